//! `Unrecorded`: the file context's non-recording handle, behind the `fs/*` escape hatch. It
//! obeys the session's roots, read-only flag and deny rules, and records nothing.

use super::deny::Access;
use super::step::{self, How, Step, Warm};
use super::{
    ContextError, Conventions, EditView, FileContext, Kind, ProviderError, ReadView, Replacement, Resolved,
    Snapshot, Stat, Version, WindowRequest, WriteView,
};
use crate::provider::Expectation;

/// What `fs/writeText` expects to find, as the client said it (the version still as text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawExpectation<'v> {
    /// Whatever is there.
    Any,
    /// Nothing: an existing file is [`ContextError::Exists`] (`FS_NOT_OBSERVED`).
    CreateIfAbsent,
    /// This version: a missing file or another version is stale.
    ReplaceIfVersion(&'v str),
}

/// The `fs/*` escape hatch: the provider's operations through the session's roots, read-only
/// flag and deny rules, recording nothing (a later edit still needs a read through the
/// context). See [`FileContext::unrecorded`].
#[derive(Debug, Clone, Copy)]
pub struct Unrecorded<'a> {
    pub(super) files: FileContext<'a>,
}

impl Unrecorded<'_> {
    /// Resolves a path. The deny rules for reads apply: a denied path is refused whether or
    /// not anything is there, so the answer never tells.
    pub fn resolve(&self, path: &str) -> Result<Resolved, ContextError> {
        let target = self.files.resolve(path, Access::Read)?;
        self.files.admit(&target.rel, &target.display, Access::Read)?;
        Ok(target)
    }

    /// Stat of a path.
    pub fn stat(&self, path: &str) -> Result<(Resolved, Stat), ContextError> {
        let target = self.files.target(path, Access::Read)?;
        let stat = self.files.provider.stat(&target)?;
        if stat.kind == Kind::File {
            self.files.one_name(&target.display, stat.links, Access::Read)?;
        }
        Ok((target, stat))
    }

    /// A window, recorded nowhere; tried at once ([`How::AtOnce`]) it answers
    /// [`Warm::NeedsBlocking`] having done nothing when it cannot be read without blocking.
    pub fn read(
        &self,
        path: &str,
        request: &WindowRequest,
        how: How<'_>,
    ) -> Result<Warm<ReadView>, ContextError> {
        let read = self.files.read_keeping(path, request, how, |_| false)?;
        Ok(read.map(|(view, _)| view))
    }

    /// The current version pinned for streaming from line `offset` (which must exist).
    pub fn stream(&self, path: &str, offset: u64) -> Result<Snapshot, ContextError> {
        let target = self.files.target(path, Access::Read)?;
        let snapshot = self.files.provider.snapshot(&target)?;
        self.files.one_name(&target.display, snapshot.links, Access::Read)?;
        let total = snapshot.total_lines();
        if offset == 0 || offset > total.max(1) {
            return Err(
                ProviderError::OffsetPastEnd { path: target.display, offset, total_lines: total }.into()
            );
        }
        Ok(snapshot)
    }

    /// The version a client named, or the stale error it deserves when it is not one this
    /// daemon could have issued (the file cannot be at it).
    fn expected(&self, target: &Resolved, text: &str) -> Result<Version, ContextError> {
        match Version::parse(text) {
            Some(version) => Ok(version),
            None => {
                let current = self.files.provider.current_version(target)?;
                Err(ProviderError::StaleVersion { path: target.display.clone(), current }.into())
            }
        }
    }

    /// A write with the client's own expectation, of exactly `content` or keeping the replaced
    /// file's conventions; a file a gate watches answers [`Step::NeedsGate`], and one tried at
    /// once [`Step::NeedsBlocking`].
    pub fn write(
        &self,
        path: &str,
        content: &str,
        expect: RawExpectation<'_>,
        conventions: Conventions,
        how: How<'_>,
    ) -> Result<Step<WriteView>, ContextError> {
        let target = self.files.target(path, Access::Write)?;
        if how.at_once() {
            return Ok(Step::NeedsBlocking);
        }
        let expect = match expect {
            RawExpectation::Any => Expectation::ANY,
            RawExpectation::CreateIfAbsent => Expectation::ABSENT,
            RawExpectation::ReplaceIfVersion(text) => Expectation::version(self.expected(&target, text)?),
        };
        let written = self.files.write_gated(&target, content, expect, conventions, false, how.gates());
        let (path, display) = (target.path, target.display);
        step::then(written, &self.files, move |_, written| match written {
            Ok(outcome) => {
                Ok(WriteView { path, display, created: outcome.created, version: outcome.version })
            }
            Err(ContextError::File(ProviderError::AlreadyExists { path })) => {
                Err(ContextError::Exists { path })
            }
            Err(e) => Err(e),
        })
    }

    /// An edit against the client's own expected version; a file a gate watches answers
    /// [`Step::NeedsGate`], and one that cannot be made at once, tried so, [`Step::NeedsBlocking`]
    /// (as [`FileContext::edit`] does).
    pub fn edit(
        &self,
        path: &str,
        change: &Replacement<'_>,
        expected: &str,
        how: How<'_>,
    ) -> Result<Step<EditView>, ContextError> {
        let target = self.files.target(path, Access::Write)?;
        if how.at_once() && Version::parse(expected).is_none() {
            // Its refusal names the current version, which may take hashing the file.
            return Ok(Step::NeedsBlocking);
        }
        let expected = self.expected(&target, expected)?;
        let edited = self.files.attempt(&target, change, expected, false, how)?;
        let (path, display, replace_all) = (target.path, target.display, change.all());
        Ok(edited.map(move |outcome| EditView {
            path,
            display,
            replacements: outcome.replacements,
            replace_all,
            version: outcome.version,
            regions: outcome.regions,
        }))
    }
}

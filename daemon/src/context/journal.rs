//! The journal as a session sees it: the entries of files it may read, an entry's diff, and
//! restores — guarded as any write of the session is (its roots, deny rules, `readOnly`, the
//! write-intent gates) and only over the version the entry left, unless forced. A restore is
//! itself a journaled change, and refreshes the session's record as its own writes do.

use std::path::Path;
use std::sync::Arc;

use super::deny::Access;
use super::gate::Gatekeeper;
use super::gate::{Subject, linked};
use super::stale::{self, ChangeSince};
use super::{
    ContextError, Conventions, Expectation, FileContext, How, ProviderError, Resolved, Step, Version,
};
use crate::journal::{Entry, Filter, Journal};
use crate::provider::journaled::{Attribution, Author};

/// Who makes a session's changes, as the journal records them.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    /// The session's id.
    pub session: &'a str,
    /// Its client's name.
    pub client: Option<&'a str>,
    /// The owner, when one was named.
    pub owner: Option<&'a str>,
}

/// One page of entries, as [`FileContext::journal_list`] answers.
#[derive(Debug, Clone)]
pub struct JournalPage {
    /// The entries with their diff stats, newest first, and each path as this session is shown it.
    pub entries: Vec<(Entry, String)>,
    /// The seq to continue below, when more entries match.
    pub more: Option<u64>,
}

/// A restore that was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreView {
    /// The entry the restore made.
    pub entry: Option<u64>,
    /// The file, canonical.
    pub path: std::path::PathBuf,
    /// The path as shown.
    pub display: String,
    /// The version written (`None`: the file was removed).
    pub version: Option<Version>,
}

/// An undo that was made: what it undid, and the restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoView {
    /// What the change undone did.
    pub undone: crate::journal::Operation,
    /// The restore.
    pub restore: RestoreView,
}

/// The seq an entry id names.
fn seq_of(entry: &str) -> Result<u64, ContextError> {
    entry.trim().parse().map_err(|_| ContextError::NoEntry { entry: entry.to_owned() })
}

impl<'a> FileContext<'a> {
    /// Who makes this context's changes, for a target about to be written.
    pub(super) fn attribution(&self, restore: bool) -> Option<Attribution> {
        let who = self.by?;
        let author = Author {
            session: Arc::from(who.session),
            client: who.client.map(Arc::from),
            owner: who.owner.map(Arc::from),
        };
        Some(Attribution { author: Arc::new(author), restore })
    }

    fn journal(&self) -> Result<&'a Journal, ContextError> {
        self.journal.ok_or(ContextError::JournalOff)
    }

    /// Whether this session may read the canonical `path`: inside one of its roots, and no deny
    /// rule for reads names it.
    fn visible(&self, path: &Path) -> bool {
        crate::provider::resolve::locate(self.scope.roots, path)
            .is_some_and(|(_, rel)| self.deny.check(rel, Access::Read).is_ok())
    }

    /// How `path` is shown to this session.
    fn shown(&self, path: &Path) -> String {
        crate::provider::resolve::display(path, self.scope.cwd)
    }

    /// Whether this session may be shown the content of `entry`'s version `version` (its
    /// links then were `links`): always, unless a deny rule for reads applies to it and the file
    /// had several links at that version (or their count was not recorded) — the content may be
    /// another name's, which the rules cannot see (as a read of such a file is refused).
    fn shows(&self, version: Option<Version>, links: Option<u64>) -> bool {
        version.is_none() || !self.deny.applies(Access::Read) || links == Some(1)
    }

    /// Refuses `found` when a version of it this session may not be shown is needed: both
    /// (`after` too) for a diff, the one before for a restore.
    fn showable(&self, found: &Entry, after: bool) -> Result<(), ContextError> {
        let before_ok = self.shows(found.before, found.links.0);
        let after_ok = !after || self.shows(found.after, found.links.1);
        if before_ok && after_ok {
            return Ok(());
        }
        Err(ContextError::Hidden { path: self.shown(&found.path), entry: found.seq })
    }

    /// The entry `entry`, if this session may read its file.
    fn entry(&self, entry: &str) -> Result<Entry, ContextError> {
        let journal = self.journal()?;
        journal
            .get(seq_of(entry)?)
            .filter(|found| self.visible(&found.path))
            .ok_or_else(|| ContextError::NoEntry { entry: entry.to_owned() })
    }

    /// The entries `filter` names (its `path` given as the session names files: relative to its
    /// cwd, inside its roots) among the files this session may read, newest first, at most
    /// `limit`, with their diff stats.
    pub fn journal_list(
        &self,
        path: Option<&str>,
        filter: Filter<'_>,
        limit: usize,
    ) -> Result<JournalPage, ContextError> {
        let journal = self.journal()?;
        let resolved = path.map(|path| self.resolve(path, Access::Read)).transpose()?;
        let filter = Filter { path: resolved.as_ref().map(|r| r.path.as_path()), ..filter };
        let (entries, more) = journal.list(&filter, limit, |path| self.visible(path));
        let more = more.then(|| entries.last().map(|e| e.seq)).flatten();
        let entries = entries
            .into_iter()
            .map(|mut entry| {
                if entry.stat.is_none()
                    && let Some(stat) = self.stat_of(journal, &entry)
                {
                    journal.set_stat(entry.seq, stat);
                    entry.stat = Some(stat);
                }
                let shown = self.shown(&entry.path);
                (entry, shown)
            })
            .collect();
        Ok(JournalPage { entries, more })
    }

    /// Lines added and removed by `entry`, when both its versions are kept, text, and no larger
    /// than the versions a stale diff is shown for (a page of 1,000 entries reads at most that
    /// much per entry).
    fn stat_of(&self, journal: &Journal, entry: &Entry) -> Option<(u64, u64)> {
        self.showable(entry, true).ok()?;
        let max = self.provider.store().max_file_bytes() as u64;
        let side = |version: Option<Version>| match version {
            None => Some(Vec::new()),
            Some(version) => journal.content_within(&version, max).ok().flatten(),
        };
        stale::stat(&side(entry.before)?, &side(entry.after)?)
    }

    /// The unified diff of `entry` (from before it to after it), cut at a stale refusal's
    /// bounds, and whether it was cut.
    pub fn journal_diff(&self, entry: &str) -> Result<(String, bool), ContextError> {
        let journal = self.journal()?;
        let found = self.entry(entry)?;
        self.showable(&found, true)?;
        let display = self.shown(&found.path);
        let side = |version: Option<Version>| -> Result<Vec<u8>, ContextError> {
            match version {
                None => Ok(Vec::new()),
                Some(version) => journal
                    .content(&version)
                    .map_err(|e| ProviderError::Io {
                        path: display.clone(),
                        op: "read the journal of",
                        source: e,
                    })?
                    .ok_or_else(|| ContextError::NotRestorable { path: display.clone(), entry: found.seq }),
            }
        };
        let (before, after) = (side(found.before)?, side(found.after)?);
        stale::diff_cut(&display, ("before", "after"), &before, &after).ok_or_else(|| {
            ProviderError::NotText {
                path: display.clone(),
                why: crate::provider::index::NotText::InvalidUtf8(0),
            }
            .into()
        })
    }

    /// The newest change this session's owner made to `path` (for the `undo` tool).
    pub fn last_own_change(&self, path: &str) -> Result<Entry, ContextError> {
        let journal = self.journal()?;
        let target = self.resolve(path, Access::Read)?;
        let nothing = || ContextError::NothingToUndo { path: target.display.clone() };
        let who = self.by.ok_or_else(nothing)?;
        journal
            .newest_of(&target.path, who.session, who.owner)
            .filter(|found| self.visible(&found.path))
            .ok_or_else(nothing)
    }

    /// Puts `path` back as it was before this owner's newest change to it (guarded as
    /// [`FileContext::restore`] is).
    pub fn undo(&self, path: &str, how: How<'_>) -> Result<Step<UndoView>, ContextError> {
        let last = self.last_own_change(path)?;
        let undone = last.operation;
        Ok(self.restore(&last.seq.to_string(), false, how)?.map(move |restore| UndoView { undone, restore }))
    }

    /// Puts back the content before `entry` (a creation's restore removes the file), only if the
    /// file is now at the version the entry left, unless `force`. Guarded as a write; the
    /// restore is journaled, and this session's record of the file follows it.
    /// Tried at once ([`How::AtOnce`]), it answers [`Step::NeedsBlocking`].
    pub fn restore(&self, entry: &str, force: bool, how: How<'_>) -> Result<Step<RestoreView>, ContextError> {
        let journal = self.journal()?;
        let found = self.entry(entry)?;
        let path = found.path.to_str().ok_or_else(|| ContextError::NoEntry { entry: entry.to_owned() })?;
        let mut target = self.target(path, Access::Write)?;
        target.by = self.attribution(true);
        if target.path != *found.path {
            // A folder on the way is now a symlink elsewhere: not the file the entry names.
            let change = ChangeSince::Unknown;
            return Err(ContextError::Changed {
                path: target.display,
                entry: found.seq,
                current: None,
                change,
            });
        }
        if !found.restorable {
            return Err(ContextError::NotRestorable { path: target.display, entry: found.seq });
        }
        self.showable(&found, false)?;
        // A file put back gets the permission bits it had (never special ones), or only its
        // owner's when they were not recorded.
        target.create_mode = Some(found.mode.map_or(0o600, |mode| mode & 0o777));
        if how.at_once() {
            return Ok(Step::NeedsBlocking);
        }
        let _writing = self.observed.writing(&target.path);
        let Some(before) = found.before else {
            return self.remove(&target, &found, force, how.gates()).map(Step::Done);
        };
        let bytes = journal
            .content(&before)
            .map_err(|e| ProviderError::Io {
                path: target.display.clone(),
                op: "read the journal of",
                source: e,
            })?
            .ok_or_else(|| ContextError::NotRestorable { path: target.display.clone(), entry: found.seq })?;
        let text = std::str::from_utf8(&bytes).map_err(|e| ProviderError::NotText {
            path: target.display.clone(),
            why: crate::provider::index::NotText::InvalidUtf8(e.valid_up_to() as u64),
        })?;
        let expect = match (force, found.after) {
            (true, _) => Expectation::ANY,
            (false, Some(after)) => Expectation::version(after),
            (false, None) => Expectation::ABSENT,
        };
        let step = match self.write_gated(&target, text, expect, Conventions::Exact, true, how.gates()) {
            Ok(step) => step,
            Err(err) => return Err(self.restore_refused(&target, &found, err)),
        };
        step.then(self, move |files, outcome| match outcome {
            Ok(outcome) => {
                files.observed.record(&target.path, outcome.version, outcome.links);
                files.provider.store().put(outcome.version, std::borrow::Cow::Owned(bytes));
                let entry = outcome.entry;
                Ok(RestoreView {
                    entry,
                    path: target.path,
                    display: target.display,
                    version: Some(outcome.version),
                })
            }
            Err(err) => Err(files.restore_refused(&target, &found, err)),
        })
    }

    /// The restore of a creation: the file removed, if it is still what the entry created.
    fn remove(
        &self,
        target: &Resolved,
        found: &Entry,
        force: bool,
        gates: Option<&dyn Gatekeeper>,
    ) -> Result<RestoreView, ContextError> {
        if let Some(keeper) = gates
            && keeper.watches(Subject { path: &target.path, linked: linked(target) })
        {
            return Err(ProviderError::Refused {
                path: target.display.clone(),
                why: "a write-intent gate watches it, and gates are asked about writes and edits, not \
                      removals: remove it yourself, or have the gate unregistered first"
                    .into(),
            }
            .into());
        }
        let expected = if force { None } else { found.after };
        match self.provider.remove(target, expected) {
            Ok(entry) => Ok(RestoreView {
                entry,
                path: target.path.clone(),
                display: target.display.clone(),
                version: None,
            }),
            Err(ProviderError::NotFound { .. }) => Err(ContextError::Changed {
                path: target.display.clone(),
                entry: found.seq,
                current: None,
                change: ChangeSince::Unknown,
            }),
            Err(err) => Err(self.restore_refused(target, found, err.into())),
        }
    }

    /// A restore's refusal: a file no longer at the entry's version is [`ContextError::Changed`]
    /// with the change since the entry.
    fn restore_refused(&self, target: &Resolved, found: &Entry, err: ContextError) -> ContextError {
        let current = match err {
            ContextError::File(ProviderError::StaleVersion { current, .. }) => current,
            ContextError::File(ProviderError::AlreadyExists { .. }) => {
                self.provider.current_version(target).ok().flatten()
            }
            err => return err,
        };
        let change = self.since_entry(target, found).unwrap_or(ChangeSince::Unknown);
        ContextError::Changed { path: target.display.clone(), entry: found.seq, current, change }
    }

    /// The change from the version `found` left to the file now; `None` where this session may
    /// not be shown either side (see [`FileContext::shows`]).
    fn since_entry(&self, target: &Resolved, found: &Entry) -> Option<ChangeSince> {
        let journal = self.journal?;
        if !self.shows(found.after, found.links.1) {
            return None;
        }
        let max = usize::try_from(journal.file_cap()).unwrap_or(usize::MAX);
        let then = match found.after {
            Some(after) => journal.content(&after).ok().flatten()?,
            None => Vec::new(),
        };
        let now = match self.provider.current_bytes(target, max).ok()? {
            Some((version, bytes, links)) if self.shows(Some(version), Some(links)) => bytes,
            Some(_) => return None,
            None => Vec::new(),
        };
        Some(stale::diff_labelled(&target.display, ("after the entry", "now"), &then, &now))
    }
}

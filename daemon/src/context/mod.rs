//! The file-context layer: what each session has observed, and the policy built on it. A read
//! of any window records (session, file) → version; writing an existing file or editing needs
//! that record to equal the file's current version; the session's own writes refresh it. It
//! knows nothing about JSON; it is the only place that turns an observation into a provider
//! write expectation.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

pub mod deny;
mod diagnostics;
mod error;
pub mod gate;
mod glob;
mod grep;
mod journal;
pub mod ledger;
pub mod merge;
mod observations;
pub mod search;
pub mod stale;
pub mod step;
mod unrecorded;
mod views;

use self::deny::{Access, DenyRules};
pub use self::diagnostics::{Diagnosed, visible_to};
pub use self::error::ContextError;
pub use self::glob::{GlobHits, Globbed};
pub use self::grep::{GrepEnd, Grepped};
pub use self::journal::{JournalPage, RestoreView, UndoView, Who};
pub use self::observations::{DEFAULT_MAX_OBSERVED, ObservationSink, Observations, WritingGuard};
pub use self::stale::ChangeSince;
use self::step::Passage;
pub use self::step::{How, Pending, Step, Warm, WarmRead};
pub use self::unrecorded::{RawExpectation, Unrecorded};
pub use self::views::{EditView, MergedView, ReadView, StatView, WriteView};
use crate::journal::Journal;
use crate::listing::Listings;
use crate::provider::resolve::Fence;
use crate::provider::store::Content;
use crate::provider::{
    ChangeToPrepare, EditOutcome, Expectation, Lookup, Pace, Paced, Provider, Resolved, Stat, WriteOutcome,
};

/// What a language server said of a file: its diagnostics, how fresh, what a change introduced.
pub use crate::lsp::{Diagnostic, Report, Severity, Status};
/// Whether a write keeps the replaced file's BOM and CRLF endings.
pub use crate::provider::Conventions;
/// The default cap on a window's bytes.
pub use crate::provider::DEFAULT_MAX_WINDOW_BYTES;
/// What a path names.
pub use crate::provider::Kind;
/// The file service's settings (part of the daemon's `Config`).
pub use crate::provider::ProviderConfig;
/// The provider's failures, as the layers above the context see them (inside
/// [`ContextError::File`]).
pub use crate::provider::ProviderError;
/// A file version.
pub use crate::provider::Version;
/// Arms the test-only crash points (feature `failpoints`).
#[cfg(feature = "failpoints")]
pub use crate::provider::crash::arm_crash_points;
/// An edit's request, valid by construction, and why one is not; an edited place of a new
/// version; where content holds a NUL byte.
pub use crate::provider::edit::{InvalidEdit, NulAt, REGION_LINE_MAX_CHARS, Region, Replacement};
/// A window of lines as the layers above see it, what a read asks for, and a line too long
/// for a window.
pub use crate::provider::index::{LineBuf, Oversized, Window, WindowRequest};
/// This user's staging token (see the provider's `leftovers`): read once at start-up.
pub use crate::provider::leftovers::staging_token;
/// Installs the SIGBUS guard that makes mapped reads of truncated files safe; once per process.
pub use crate::provider::mmap::install_sigbus_guard;
/// The daemon's own files and folders, which no session reaches.
pub use crate::provider::private::Private;
/// How a canonical path shows to a session: relative to its cwd when inside it.
pub use crate::provider::resolve::display;
/// The provider's scope, snapshots and window errors, as the layers above the context see them.
pub use crate::provider::{Changed, Root, RootDir, Scope, Snapshot, WindowError};

/// Opens a session root: a directory handle on the canonical folder `canonical`, which the
/// client spelled `given`, paid for by `charge` from the daemon's descriptor budget, with the
/// daemon's `private` files and folders out of its reach.
pub fn open_root(
    canonical: &Path,
    given: &Path,
    charge: Option<crate::descriptors::Charge>,
    private: &Arc<Private>,
) -> std::io::Result<Root> {
    crate::provider::resolve::open_root(canonical, given, charge, private)
}

/// Whether the folder or file at `path` is on a local filesystem (where the warm read path and
/// mappings are used).
pub fn is_local(path: &Path) -> bool {
    crate::provider::mmap::local_path(path)
}

/// The daemon's file service as the layers above see it: the one provider, handed out only as
/// a session's [`FileContext`].
#[derive(Debug, Clone)]
pub struct Files {
    provider: Arc<Provider>,
    /// The search listings of the provider's files.
    listings: Arc<Listings>,
    /// The journal every change is recorded in (`None`: off).
    journal: Option<Arc<Journal>>,
    /// Why the daemon runs without the journal it was configured with.
    journal_problem: Option<Arc<str>>,
    /// The language servers (`None`: none configured or found).
    lsp: Option<Arc<crate::lsp::Lsp>>,
}

impl Files {
    /// The service with an empty cache.
    pub fn new(config: ProviderConfig) -> Self {
        Self::with_descriptors(config, Arc::default())
    }

    /// The service with an empty cache, whose open files count against `descriptors` (and are
    /// given up when connections or sessions need the room).
    pub fn with_descriptors(
        config: ProviderConfig,
        descriptors: Arc<crate::descriptors::Descriptors>,
    ) -> Self {
        let provider = Arc::new(Provider::with_descriptors(config, descriptors.clone()));
        let weak = Arc::downgrade(&provider);
        descriptors.on_pressure(Box::new(move |n| {
            if let Some(provider) = weak.upgrade() {
                provider.shed_open_files(n);
            }
        }));
        let listings = Arc::new(Listings::for_provider(&provider));
        Self { provider, listings, journal: None, journal_problem: None, lsp: None }
    }

    /// The same service recording every change in `journal`.
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Self {
        self.provider.set_recorder(journal.clone());
        self.journal = Some(journal);
        self
    }

    /// The same service feeding every change that lands to `lsp` (see [`crate::lsp`]).
    pub fn with_lsp(mut self, lsp: Arc<crate::lsp::Lsp>) -> Self {
        self.provider.set_feed(lsp.clone());
        self.lsp = Some(lsp);
        self
    }

    /// Whether an edit can ever be made at once (see [`Provider::edit_pace`]).
    pub fn edits_at_once(&self) -> bool {
        self.provider.edit_pace() == Pace::AtOnce
    }

    /// The language servers, when any may run.
    pub fn lsp(&self) -> Option<&Arc<crate::lsp::Lsp>> {
        self.lsp.as_ref().filter(|lsp| lsp.any())
    }

    /// The running language servers, the built-ins not found (and configured ones that cannot
    /// run), and the `PATH` searched, for `daemon/status`.
    pub fn language_servers(&self) -> (Vec<crate::lsp::ServerStatus>, Vec<String>, Option<String>) {
        match &self.lsp {
            Some(lsp) => (lsp.status(), lsp.missing(), lsp.path()),
            None => (Vec::new(), Vec::new(), None),
        }
    }

    /// The same service without the journal it was configured with, for the reason given.
    pub fn without_journal(mut self, why: String) -> Self {
        self.journal_problem = Some(why.into());
        self
    }

    /// The journal, when it records changes (on, and loaded or loading).
    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.journal.as_ref().filter(|journal| journal.off().is_none())
    }

    /// Why a configured journal records nothing: it could not be opened, or loaded.
    pub fn journal_problem(&self) -> Option<String> {
        self.journal_problem
            .as_deref()
            .map(str::to_owned)
            .or_else(|| self.journal.as_ref().and_then(|journal| journal.off()))
    }

    /// The provider, for the watcher (which invalidates its cache); nothing above the context
    /// gets it.
    pub(crate) fn provider(&self) -> &Arc<Provider> {
        &self.provider
    }

    /// The search listings, for the watcher (which drops them all when events were lost).
    pub(crate) fn listings(&self) -> &Arc<Listings> {
        &self.listings
    }

    /// Drops cached state nobody used for one to two calls' periods; returns how many files
    /// went.
    pub fn sweep_idle(&self) -> usize {
        self.provider.sweep_idle()
    }

    /// A session's view: its scope, observations, read-only flag and deny rules.
    pub fn context<'a>(
        &'a self,
        scope: Scope<'a>,
        observed: &'a Observations,
        read_only: bool,
        deny: &'a DenyRules,
    ) -> FileContext<'a> {
        let context = FileContext::new(&self.provider, &self.listings, scope, observed, read_only);
        FileContext {
            journal: self.journal().map(Arc::as_ref),
            lsp: self.lsp().map(Arc::as_ref),
            ..context.with_deny(deny)
        }
    }

    /// Files with cached state.
    pub fn cached_files(&self) -> usize {
        self.provider.cached_files()
    }

    /// Bytes of the cached files' line indexes (what `max_index_bytes` bounds).
    pub fn cached_index_bytes(&self) -> usize {
        self.provider.cached_index_bytes()
    }

    /// Bytes mapped by cached entries.
    pub fn mapped_bytes(&self) -> usize {
        self.provider.mapped_bytes()
    }

    /// Cached files held open.
    pub fn open_files(&self) -> usize {
        self.provider.open_files()
    }

    /// Searched folders' file lists kept warm, and their bytes.
    pub fn cached_listings(&self) -> (usize, usize) {
        self.listings.stats()
    }

    /// Files the kept listings hold, their filters' bytes, and whether filters are being built.
    pub fn cached_listed_files(&self) -> (usize, usize, bool) {
        self.listings.held()
    }

    /// inotify watches the daemon holds (warm listings and the watcher together), and its cap.
    pub fn watches(&self) -> (usize, usize) {
        self.provider.watches()
    }

    /// Bytes hashed by reads and stats since the start.
    pub fn hashed_bytes(&self) -> u64 {
        self.provider.hashed_bytes()
    }

    /// Versions whose bytes are kept for stale refusals' diffs, and the bytes they hold.
    pub fn snapshots(&self) -> (usize, usize) {
        let store = self.provider.store();
        (store.len(), store.bytes())
    }
}

/// One session's view of the files: the provider, seen through the session's roots, options
/// and observations. This is the only handle the tools layer gets.
#[derive(Debug, Clone, Copy)]
pub struct FileContext<'a> {
    /// The daemon's provider.
    provider: &'a Provider,
    /// The search listings of its files.
    listings: &'a Listings,
    /// The session's roots and cwd.
    scope: Scope<'a>,
    /// What the session has observed.
    observed: &'a Observations,
    /// Whether every write is refused.
    read_only: bool,
    /// Paths the session may not read or write.
    deny: &'a DenyRules,
    /// The journal, when on.
    journal: Option<&'a Journal>,
    /// The language servers, when any may run: a read opens its file there.
    lsp: Option<&'a crate::lsp::Lsp>,
    /// Who makes this call's changes, for the journal (see [`FileContext::by`]).
    by: Option<Who<'a>>,
}

impl<'a> FileContext<'a> {
    /// A session's file context (layers above get theirs from [`Files::context`]).
    pub(crate) fn new(
        provider: &'a Provider,
        listings: &'a Listings,
        scope: Scope<'a>,
        observed: &'a Observations,
        read_only: bool,
    ) -> Self {
        static NONE: std::sync::LazyLock<DenyRules> = std::sync::LazyLock::new(DenyRules::default);
        Self {
            provider,
            listings,
            scope,
            observed,
            read_only,
            deny: &NONE,
            journal: None,
            lsp: None,
            by: None,
        }
    }

    /// The same context, whose changes the journal records as made by `who`.
    pub fn by(self, who: Who<'a>) -> Self {
        Self { by: Some(who), ..self }
    }

    /// The same context refusing what `deny` names.
    pub fn with_deny(self, deny: &'a DenyRules) -> Self {
        Self { deny, ..self }
    }

    /// The non-recording handle of this context, for the `fs/*` escape hatch: it records
    /// nothing, but obeys the same read-only flag and deny rules.
    pub fn unrecorded(self) -> Unrecorded<'a> {
        Unrecorded { files: self }
    }

    /// Resolves `path` for `access`, never looking at or beneath a name the deny rules for it
    /// refuse: such a path is [`ContextError::Denied`] whatever is there, or is not.
    fn resolve(&self, path: &str, access: Access) -> Result<Resolved, ContextError> {
        let deny = self.deny;
        let fence = move |rel: &Path| deny.denies(rel, access);
        let fence: Fence<'_> = if deny.applies(access) { Some(&fence) } else { None };
        self.provider.resolve_fenced(path, self.scope, fence).map_err(|e| self.fenced(e, access))
    }

    /// [`FileContext::resolve`], handing back what the fast path opened unlooked at.
    fn open(&self, path: &str, access: Access) -> Result<Lookup, ContextError> {
        let deny = self.deny;
        let fence = move |rel: &Path| deny.denies(rel, access);
        let fence: Fence<'_> = if deny.applies(access) { Some(&fence) } else { None };
        self.provider.open_fenced(path, self.scope, fence).map_err(|e| self.fenced(e, access))
    }

    /// A resolution's failure; one stopped by the deny rules names the rule.
    fn fenced(&self, err: ProviderError, access: Access) -> ContextError {
        match err {
            ProviderError::Fenced { path, rel } => match self.deny.check(&rel, access) {
                Err(denial) => ContextError::Denied { path, denial },
                Ok(()) => ProviderError::Fenced { path, rel }.into(),
            },
            err => err.into(),
        }
    }

    /// Resolves `path` and applies the deny rules for `access` (and read-only for writes). A
    /// write target refuses a file with several hard links while deny rules apply (see
    /// [`FileContext::one_name`]): at once when resolution saw its links, else where it is
    /// written, on the locked file.
    fn target(&self, path: &str, access: Access) -> Result<Resolved, ContextError> {
        let mut target = self.resolve(path, access)?;
        self.admit(&target.rel, &target.display, access)?;
        if access == Access::Write {
            target.by = self.attribution(false);
        }
        if access == Access::Write && self.deny.applies(access) {
            target.one_name = true;
            if let Some(found) = target.file {
                self.one_name(&target.display, found.links, access)?;
            }
        }
        Ok(target)
    }

    /// Refuses `access` to a file with several hard links (`links`, as seen on the descriptor
    /// read or written) while a deny rule for that access applies to the session: a rule
    /// holds for names, and another name of the file might be a denied one. Matching the
    /// file's inode against every denied name instead would need every denied file found
    /// (a walk of each `.git` folder, kept current), and could still miss a name made
    /// meanwhile.
    fn one_name(&self, display: &str, links: u64, access: Access) -> Result<(), ContextError> {
        if links > 1 && self.deny.applies(access) {
            return Err(ContextError::Linked { path: display.to_owned(), links, access });
        }
        Ok(())
    }

    /// Applies the deny rules for `access` (and read-only for writes) to the file at `rel`
    /// beneath its root (shown as `display`).
    fn admit(&self, rel: &Path, display: &str, access: Access) -> Result<(), ContextError> {
        if access == Access::Write && self.read_only {
            return Err(ContextError::ReadOnly { path: display.to_owned() });
        }
        if let Err(denial) = self.deny.check(rel, access) {
            return Err(ContextError::Denied { path: display.to_owned(), denial });
        }
        Ok(())
    }

    /// Reads the window `request` asks for and records the file's version for this session
    /// ([`Provider::read`], which picks its way). At once ([`How::AtOnce`]) it answers only
    /// from the provider's warm path, or by reading a small file at once; when it would need
    /// more (a large file, another device) it answers [`Warm::NeedsBlocking`], having recorded
    /// nothing.
    pub fn read(
        &self,
        path: &str,
        request: &WindowRequest,
        how: How<'_>,
    ) -> Result<Warm<ReadView>, ContextError> {
        self.read_keeping(path, request, how, |_| true).map(|read| read.map(|(view, _)| view))
    }

    /// [`FileContext::read`] of a window that records the file's version only when the window
    /// holds the whole file, every line uncut (`None` otherwise: nothing recorded), for a text
    /// that shows the model the file whole.
    pub fn read_if_whole(
        &self,
        path: &str,
        request: &WindowRequest,
        how: How<'_>,
    ) -> Result<Warm<Option<ReadView>>, ContextError> {
        let whole = |w: &Window| {
            w.start_line == 1
                && w.lines.len() as u64 == w.total_lines
                && !w.capped
                && w.oversized.is_none()
                && w.truncated.is_empty()
        };
        self.read_keeping(path, request, how, whole).map(|read| read.map(|(view, kept)| kept.then_some(view)))
    }

    /// [`FileContext::read`], recording the version only when `keep` accepts the window read;
    /// says whether it did.
    fn read_keeping(
        &self,
        path: &str,
        request: &WindowRequest,
        how: How<'_>,
        keep: impl Fn(&Window) -> bool,
    ) -> Result<Warm<(ReadView, bool)>, ContextError> {
        let lookup = self.open(path, Access::Read)?;
        match &lookup {
            Lookup::Resolved(target) => self.admit(&target.rel, &target.display, Access::Read)?,
            Lookup::Opened(opened) => self.admit(&opened.rel, &opened.display, Access::Read)?,
        }
        let pace = if how.at_once() { Pace::AtOnce } else { Pace::Blocking };
        let (outcome, target) = match self.provider.read(lookup, path, request, pace)? {
            Paced::Done(read) => read,
            Paced::NotAtOnce => return Ok(Warm::NeedsBlocking),
        };
        self.one_name(&target.display, outcome.links, Access::Read)?;
        let kept = keep(&outcome.window);
        if kept {
            if let Some(lsp) = self.lsp {
                lsp.touch(&target.dir, &target.path);
            }
            self.observed.record(&target.path, outcome.version, outcome.links);
            if let Some(bytes) = outcome.bytes {
                // Read whole anyway (a cold read of a small file): kept for a later stale diff.
                self.provider.store().put(outcome.version, bytes.into());
            }
        }
        let view = ReadView { display: target.display, version: outcome.version, window: outcome.window };
        Ok(Warm::Done((view, kept)))
    }

    /// Writes a whole file: a new file needs nothing; an existing one needs a current
    /// observation, and keeps its BOM and CRLF endings. Records the new version for this
    /// session only. A file a gate watches answers [`Step::NeedsGate`] (see [`gate`]); tried
    /// at once, it answers [`Step::NeedsBlocking`].
    pub fn write(&self, path: &str, content: &str, how: How<'_>) -> Result<Step<WriteView>, ContextError> {
        let target = self.target(path, Access::Write)?;
        if how.at_once() {
            // Whole-file writes always run on a blocking thread.
            return Ok(Step::NeedsBlocking);
        }
        let _writing = self.observed.writing(&target.path);
        let seen = if target.exists {
            match self.observed.get(&target.path) {
                Some(version) => Some(version),
                None if target.folder => {
                    return Err(ProviderError::IsDirectory { path: target.display }.into());
                }
                None => return Err(ContextError::NotObserved { path: target.display }),
            }
        } else {
            None
        };
        let expect = seen.map_or(Expectation::ABSENT, Expectation::version);
        match self.write_gated(&target, content, expect, Conventions::Keep, true, how.gates()) {
            Ok(Step::Done(outcome)) => self.wrote(target, seen, Ok(outcome), content).map(Step::Done),
            Ok(Step::NeedsBlocking) => Ok(Step::NeedsBlocking),
            // Committed with the prepared bytes (`converted`): no content is needed then.
            Ok(Step::NeedsGate(pending)) => Ok(Step::NeedsGate(
                pending.then(move |files, outcome| files.wrote(target, seen, outcome, "")),
            )),
            Err(err) => self.wrote(target, seen, Err(err), content).map(Step::Done),
        }
    }

    /// The answer of a write of `target` that this session last saw at `seen` (`None`: it
    /// was not there), given what the provider did: the new version recorded and stored (the
    /// bytes written: converted to the file's conventions, else `content` as given), or the
    /// refusal as the session is told it.
    fn wrote(
        &self,
        target: Resolved,
        seen: Option<Version>,
        outcome: Result<WriteOutcome, ContextError>,
        content: &str,
    ) -> Result<WriteView, ContextError> {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            // Someone created it after we looked: this session has not seen that file.
            Err(ContextError::File(ProviderError::AlreadyExists { path })) => {
                return Err(ContextError::NotObserved { path });
            }
            Err(ContextError::File(ProviderError::StaleVersion { path, current })) => {
                return Err(match seen {
                    Some(seen) => self.stale(&target, seen, current),
                    None => ContextError::Stale { path, current, change: ChangeSince::Unknown },
                });
            }
            Err(e) => return Err(e),
        };
        self.observed.record(&target.path, outcome.version, outcome.links);
        let written = outcome.converted.map_or(Cow::Borrowed(content.as_bytes()), Cow::Owned);
        self.provider.store().put(outcome.version, written);
        Ok(WriteView {
            path: target.path,
            display: target.display,
            created: outcome.created,
            version: outcome.version,
        })
    }

    /// The refusal of a write or edit of `target`, which this session last saw at `seen` and
    /// which is now at `current` (`None`: deleted). When the change from `seen` to the current
    /// content can be shown whole (see [`stale::diff`]), the session's record moves to the
    /// version shown, so that a retry that is still right goes ahead without a read; otherwise
    /// nothing moves.
    fn stale(&self, target: &Resolved, seen: Version, current: Option<Version>) -> ContextError {
        match self.since(target, seen, current) {
            Some((old, now)) => {
                let change = stale::diff(&target.display, &old, &now.bytes);
                self.refused(target, now, change)
            }
            None => {
                ContextError::Stale { path: target.display.clone(), current, change: ChangeSince::Unknown }
            }
        }
    }

    /// What a stale write or edit of `target` is measured against: the bytes of `seen` (the
    /// version last seen, from the store) and the file as it is now, read again (the refusal
    /// came from a version check that may not have read it; what is shown and recorded is
    /// exactly what was read here). `None` when the file is gone (`current` is `None`), the
    /// version seen is not stored, or the file cannot be read whole within the store's cap.
    fn since(&self, target: &Resolved, seen: Version, current: Option<Version>) -> Option<(Content, Now)> {
        current?;
        let store = self.provider.store();
        let old = store.get(&seen)?;
        let (version, bytes, links) =
            self.provider.current_bytes(target, store.max_file_bytes()).ok().flatten()?;
        Some((old, Now { version, bytes, links }))
    }

    /// The stale refusal that shows `change` (to `now`, the file as read); when the change was
    /// shown whole, the session's record moves to the version shown.
    fn refused(&self, target: &Resolved, now: Now, change: ChangeSince) -> ContextError {
        if change.reauthorized() {
            self.observed.record(&target.path, now.version, now.links);
            self.provider.store().put(now.version, now.bytes.into());
        }
        ContextError::Stale { path: target.display.clone(), current: Some(now.version), change }
    }

    /// Makes `change`; needs a current observation. Records the new version. A file a gate
    /// watches answers [`Step::NeedsGate`] (see [`gate`]). At once ([`How::AtOnce`]) it goes
    /// ahead only when it is small and can at once ([`Provider::edit`] at [`Pace::AtOnce`]), and a stale
    /// one needs the blocking pool too (its answer reads the current file): else
    /// [`Step::NeedsBlocking`], nothing written.
    pub fn edit(
        &self,
        path: &str,
        change: &Replacement<'_>,
        how: How<'_>,
    ) -> Result<Step<EditView>, ContextError> {
        self.edit_as(path, change, false, how).map(|step| step.map(|merged| merged.edit))
    }

    /// [`FileContext::edit`] for a session that merges stale edits (`staleEdits: "merge"`;
    /// only the `edit` tool asks for it): an edit whose observation is stale is applied to the
    /// current version instead when [`merge::check`] allows it and the change since the
    /// version seen can be shown whole ([`stale::diff`]); it is computed against that one
    /// version and written only if the file is still at it (the provider's version guard), so
    /// a file that changed again meanwhile is refused as stale. Anything else is refused as
    /// [`FileContext::edit`] refuses it. Records the new version.
    pub fn edit_merging(
        &self,
        path: &str,
        change: &Replacement<'_>,
        how: How<'_>,
    ) -> Result<Step<MergedView>, ContextError> {
        self.edit_as(path, change, true, how)
    }

    fn edit_as(
        &self,
        path: &str,
        change: &Replacement<'_>,
        merge: bool,
        how: How<'_>,
    ) -> Result<Step<MergedView>, ContextError> {
        let target = self.target(path, Access::Write)?;
        let _writing = self.observed.writing(&target.path);
        let Some(observed) = self.observed.get(&target.path) else {
            if !target.exists {
                return Err(ProviderError::NotFound { path: target.display, why: None }.into());
            }
            if target.folder {
                return Err(ProviderError::IsDirectory { path: target.display }.into());
            }
            return Err(ContextError::NotObserved { path: target.display });
        };
        let all = change.all();
        let current = match self.attempt(&target, change, observed, true, how) {
            Err(ContextError::File(ProviderError::StaleVersion { current, .. })) => current,
            attempt => return self.edit_answer(target, all, observed, attempt, None),
        };
        if !merge {
            return Err(self.stale(&target, observed, current));
        }
        let Some((old, now)) = self.since(&target, observed, current) else {
            return Err(self.stale(&target, observed, current));
        };
        let labels = ("as you last saw it", "before this edit");
        let shown = stale::diff_labelled(&target.display, labels, &old, &now.bytes);
        let outside = match (shown, merge::check(&old, &now.bytes, change)) {
            (ChangeSince::Shown(diff), Ok(())) => diff,
            (_, unmerged) => {
                tracing::debug!(path = %target.display, ?unmerged, "stale edit not merged");
                let change = stale::diff(&target.display, &old, &now.bytes);
                return Err(self.refused(&target, now, change));
            }
        };
        #[cfg(feature = "failpoints")]
        merge::checked();
        let attempt = self.attempt(&target, change, now.version, true, how);
        self.edit_answer(target, all, observed, attempt, Some(outside))
    }

    /// The answer of an edit of `target` (which this session last saw at `observed`; `all`:
    /// every occurrence was to be replaced; `outside`: the change it was merged over), given
    /// its attempt: now, or once its pending change is committed. A version other than the one
    /// attempted is refused as stale.
    fn edit_answer(
        &self,
        target: Resolved,
        all: bool,
        observed: Version,
        attempt: Result<Step<EditOutcome>, ContextError>,
        outside: Option<String>,
    ) -> Result<Step<MergedView>, ContextError> {
        step::then(attempt, self, move |files, attempt| match attempt {
            Ok(outcome) => Ok(files.edited(target, all, outcome, outside)),
            Err(ContextError::File(ProviderError::StaleVersion { current, .. })) => {
                Err(files.stale(&target, observed, current))
            }
            Err(e) => Err(e),
        })
    }

    /// One attempt at `change` of `target` if it is at `expected`, through the gate step: what
    /// the provider did, or why not — the provider's refusal (a version other than `expected`
    /// is [`ProviderError::StaleVersion`] inside [`ContextError::File`]), or what the call needs
    /// first (the blocking pool, the gates' answer). `recorded`: the session records what it
    /// writes (not through [`Unrecorded`]).
    fn attempt(
        &self,
        target: &Resolved,
        change: &Replacement<'_>,
        expected: Version,
        recorded: bool,
        how: How<'_>,
    ) -> Result<Step<EditOutcome>, ContextError> {
        let expect = Expectation::version(expected);
        let prepare = || self.provider.prepare(target, ChangeToPrepare::Edit { change, expected });
        Ok(match self.through_gate(target, expect, recorded, how.gates(), prepare)? {
            Passage::Direct if how.at_once() => {
                match self.provider.edit(target, change, expected, Pace::AtOnce) {
                    // A stale edit's answer reads the current file for its diff: not here.
                    Ok(Paced::NotAtOnce) | Err(ProviderError::StaleVersion { .. }) => Step::NeedsBlocking,
                    Ok(Paced::Done(edited)) => Step::Done(edited),
                    Err(err) => return Err(err.into()),
                }
            }
            Passage::Direct => match self.provider.edit(target, change, expected, Pace::Blocking)? {
                Paced::Done(edited) => Step::Done(edited),
                Paced::NotAtOnce => Step::NeedsBlocking,
            },
            Passage::Done(prepared, done) => Step::Done(committed_edit(prepared, done)),
            Passage::Asking(pending) => Step::NeedsGate(
                pending
                    .then(|_, landed| landed.map(|landed| committed_edit(landed.prepared, landed.committed))),
            ),
        })
    }

    /// A made edit: the new version recorded for this session, its bytes stored.
    fn edited(
        &self,
        target: Resolved,
        all: bool,
        outcome: EditOutcome,
        outside: Option<String>,
    ) -> MergedView {
        self.observed.record(&target.path, outcome.version, outcome.links);
        self.provider.store().put(outcome.version, outcome.written.into());
        let edit = EditView {
            path: target.path,
            display: target.display,
            replacements: outcome.replacements,
            replace_all: all,
            version: outcome.version,
            regions: outcome.regions,
        };
        MergedView { edit, outside }
    }

    /// Stat, plus this session's observation of the file.
    pub fn stat(&self, path: &str) -> Result<StatView, ContextError> {
        let target = self.target(path, Access::Read)?;
        let stat = self.provider.stat(&target)?;
        if stat.kind == Kind::File {
            self.one_name(&target.display, stat.links, Access::Read)?;
        }
        Ok(StatView {
            observed: self.observed.get(&target.path),
            display: target.display,
            kind: stat.kind,
            size: stat.size,
            version: stat.version,
        })
    }

    /// Whether this session is read-only.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The device (`st_dev`) of the folder or file `target` names, from a handle opened beneath
    /// its root: a gate covers a file of several links on the device of one of its paths.
    pub fn device_of(&self, target: &Resolved) -> Result<u64, ContextError> {
        use std::os::unix::fs::MetadataExt as _;
        target
            .dir
            .open_path(&target.rel)
            .and_then(|file| file.metadata())
            .map(|meta| meta.dev())
            .map_err(|source| ProviderError::Io { path: target.display.clone(), op: "stat", source }.into())
    }
}

/// The file as a stale refusal or a merge read it.
struct Now {
    version: Version,
    bytes: Vec<u8>,
    links: u64,
}

/// The outcome of an edit committed through the gate step.
fn committed_edit(prepared: crate::provider::Prepared, done: crate::provider::Committed) -> EditOutcome {
    let (replacements, regions) = prepared.edit.unwrap_or_default();
    EditOutcome {
        replacements,
        version: done.version,
        links: done.links,
        written: prepared.bytes,
        regions,
        entry: done.entry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_are_bounded_and_forget_the_least_recent() {
        let obs = Observations::new(2);
        let v = Version::of(b"x");
        obs.record(Path::new("/a"), v, 1);
        obs.record(Path::new("/b"), v, 1);
        assert_eq!(obs.get(Path::new("/a")), Some(v));
        obs.record(Path::new("/c"), v, 1);
        assert_eq!(obs.len(), 2);
        assert_eq!(obs.get(Path::new("/b")), None, "b was touched least recently");
        assert_eq!(obs.get(Path::new("/a")), Some(v));
    }

    fn setup() -> (tempfile::TempDir, std::path::PathBuf, Provider) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root, Provider::new(ProviderConfig { fsync: false, ..Default::default() }))
    }

    fn edit<'a>(old: &'a str, new: &'a str) -> Replacement<'a> {
        Replacement::new(old, new, false).unwrap()
    }

    #[test]
    fn the_policy_in_one_place() {
        let (_dir, root, provider) = setup();
        let listings = Listings::for_provider(&provider);
        let roots = [RootDir::new(&root, None).unwrap()];
        let scope = Scope { roots: &roots, cwd: &root };
        let (a_obs, b_obs) = (Observations::new(10), Observations::new(10));
        let a = FileContext::new(&provider, &listings, scope, &a_obs, false);
        let b = FileContext::new(&provider, &listings, scope, &b_obs, false);

        assert!(
            a.write("f.txt", "one\ntwo\n", How::POOL).unwrap().done().unwrap().created,
            "creating needs no read"
        );
        assert_eq!(
            a.edit("f.txt", &edit("one", "1"), How::POOL).unwrap().done().unwrap().replacements,
            1,
            "own write refreshes"
        );
        assert!(matches!(
            b.edit("f.txt", &edit("two", "2"), How::POOL),
            Err(ContextError::NotObserved { .. })
        ));
        assert!(matches!(b.write("f.txt", "x", How::POOL), Err(ContextError::NotObserved { .. })));
        b.read("f.txt", &WindowRequest::whole(2, 1, u64::MAX), How::POOL).unwrap();
        b.edit("f.txt", &edit("two", "2"), How::POOL).unwrap();
        assert!(!a.stat("f.txt").unwrap().fresh());
        // Stale is reported before matching; the change is shown (a wrote the version it last
        // saw, so its bytes are stored) and now counts as read by a.
        match a.edit("f.txt", &edit("no such text", "x"), How::POOL) {
            Err(ContextError::Stale { current: Some(_), change: ChangeSince::Shown(diff), .. }) => {
                assert!(diff.contains("-two\n+2\n"), "{diff}");
            }
            other => panic!("{other:?}"),
        }
        assert!(a.stat("f.txt").unwrap().fresh() && b.stat("f.txt").unwrap().fresh());
        assert_eq!(
            a.edit("f.txt", &edit("1", "one"), How::POOL).unwrap().done().unwrap().replacements,
            1,
            "no read needed"
        );
        assert!(!b.stat("f.txt").unwrap().fresh());
        b.read("f.txt", &WindowRequest::whole(1, 10, u64::MAX), How::POOL).unwrap();

        let ro = FileContext::new(&provider, &listings, scope, &b_obs, true);
        assert!(matches!(ro.edit("f.txt", &edit("2", "two"), How::POOL), Err(ContextError::ReadOnly { .. })));
        assert!(matches!(ro.write("new.txt", "x", How::POOL), Err(ContextError::ReadOnly { .. })));
        assert!(!root.join("new.txt").exists());
    }
}

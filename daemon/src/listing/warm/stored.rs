//! The warm listings and the search index on disk (see [`index`](crate::listing::index)):
//! a root's index is loaded and validated in the background as soon as a session names the
//! root ([`Listings::prepare`]), and a search of a listing it holds waits for that
//! ([`Listings::await_validation`]) instead of walking; a root's kept listings are written
//! back, in the background, when a build of their filters went through (at most once a
//! [`WRITE_EVERY`]), and all of those that changed at a clean stop ([`Listings::persist_all`]).
//!
//! A validation goes in two steps. Its folders first: a walk like any other of a kept listing
//! (every folder watched before it is read, so a change during it spoils it; it is tried again
//! once, then the next search walks), which takes the entries of every folder whose stat data
//! and rules are as recorded from the index; the listing is kept then, its files undated and
//! without filters, and a glob may be answered from it (dating the files it shows). Then its
//! files: each one's stat data, looked at beneath its folder's handle, date it, and a file
//! whose stat data are as recorded gets its filter back, put in only if no change was reported
//! meanwhile; a grep waits for that. The other files are read by the searches, and their
//! filters built again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{Listings, State, lock};
use crate::listing::grams::{Built, GramFilter, Grams};
use crate::listing::index::format::{Encoder, Out};
use crate::listing::index::section::Section;
use crate::listing::index::{Indexes, RootIndex};
use crate::listing::listed::Listed;
use crate::listing::stamp::{Stamp, stamps_of};
use crate::listing::walker;
use crate::provider::{Root, RootDir};

/// How often a validation that an event spoiled is tried.
const VALIDATION_ATTEMPTS: usize = 2;
/// The least time between two writes of one root's index after builds (a stop writes it
/// anyway): an index is only ever stale, never wrong, and each write looks at every file.
pub const WRITE_EVERY: Duration = Duration::from_secs(60);
/// Most roots remembered as looked up (a session naming ever new roots stops loading indexes).
const MAX_PREPARED: usize = 4096;
/// How often a search waiting for a validation looks at its stop flag.
const WAIT_STEP: Duration = Duration::from_millis(5);

/// A root's index being loaded and validated.
#[derive(Debug, Default)]
pub struct Validation {
    state: Mutex<PendingState>,
    ready: Condvar,
}

#[derive(Debug, Default)]
struct PendingState {
    /// The searched folders its index holds, once read, and how far each one's validation is.
    rels: Option<Vec<(PathBuf, Step)>>,
    /// Whether it is over.
    done: bool,
}

/// How far the validation of one listing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Its folders are being validated.
    Folders,
    /// Its listing is kept (or could not be): its files' stat data are being compared.
    Files,
    /// Over.
    Done,
}

impl Validation {
    fn update(&self, change: impl FnOnce(&mut PendingState)) {
        change(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
        self.ready.notify_all();
    }

    /// Listing `at` of the index reached `step`.
    fn reached(&self, at: usize, step: Step) {
        self.update(|state| {
            if let Some((_, reached)) = state.rels.as_mut().and_then(|rels| rels.get_mut(at)) {
                *reached = step;
            }
        });
    }
}

impl Listings {
    /// Keeps the listings' search index in `indexes` from now on.
    pub fn use_index(&self, indexes: Arc<Indexes>) {
        let _ = self.index.set(indexes);
    }

    /// The search index, when one is kept.
    pub fn index(&self) -> Option<&Arc<Indexes>> {
        self.index.get()
    }

    /// A session named `root`: its index, if there is one and nothing of the root is kept yet,
    /// is loaded and validated on a thread of its own, once per root.
    pub fn prepare(self: &Arc<Self>, root: &Root) {
        if self.max_bytes == 0 || self.index.get().is_none() {
            return;
        }
        let pending = {
            let mut validating = self.validating.lock().unwrap_or_else(PoisonError::into_inner);
            if validating.contains_key(root.path()) || validating.len() >= MAX_PREPARED {
                return;
            }
            if lock(&self.state).entries.keys().any(|(kept, _)| kept == root.path()) {
                return;
            }
            let pending = Arc::new(Validation::default());
            validating.insert(root.path().to_path_buf(), Arc::clone(&pending));
            pending
        };
        let (listings, root) = (Arc::clone(self), Arc::clone(root));
        let spawned = std::thread::Builder::new().name("filectx-index".into()).spawn({
            let pending = Arc::clone(&pending);
            move || {
                listings.validate(&root, &pending);
                pending.update(|state| state.done = true);
            }
        });
        if spawned.is_err() {
            pending.update(|state| state.done = true);
        }
    }

    /// Loads `root`'s index and validates each of its listings, keeping what holds.
    fn validate(&self, root: &Root, pending: &Validation) {
        let Some(index) = self.index.get() else { return };
        lock(&self.state).validating.insert(root.path().to_path_buf());
        self.validate_index(root, index, pending);
        lock(&self.state).validating.remove(root.path());
    }

    /// [`validate`](Self::validate) with `index`.
    fn validate_index(&self, root: &Root, index: &Indexes, pending: &Validation) {
        let started = Instant::now();
        let (image, bytes) = match index.load(root.path()) {
            Ok(Some(loaded)) => loaded,
            Ok(None) => return,
            Err(why) => return index.discard(root.path(), &why),
        };
        let rels = image.sections.iter().map(|section| (section.rel.clone(), Step::Folders)).collect();
        pending.update(|state| state.rels = Some(rels));
        let load_ms = started.elapsed().as_millis();
        index.note(root.path(), |known| *known = RootIndex { bytes, ..RootIndex::default() });
        for (at, section) in image.sections.iter().enumerate() {
            let reread = self.validate_section(root, section, &|step| {
                if step == Step::Files {
                    // Its listing is kept: from disk, whatever the files' step finds.
                    index.note(root.path(), |known| known.loaded = true);
                }
                pending.reached(at, step);
            });
            let validation_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            tracing::debug!(root = %root.path().display(), rel = %section.rel.display(), ?reread, load_ms, validation_ms, "search index validated");
            // Told before the listing's searches go on, so that they see it.
            index.note(root.path(), |known| {
                known.loaded |= reread.is_some();
                known.reread += reread.unwrap_or(0);
                known.validation_ms = validation_ms;
            });
            pending.reached(at, Step::Done);
        }
    }

    /// Validates one listing of `root`'s index and keeps it, telling `reached` when its folders
    /// are done; the files whose stat data did not match the index (`None`: it was not kept).
    fn validate_section(&self, root: &Root, section: &Section, reached: &dyn Fn(Step)) -> Option<u64> {
        for _ in 0..VALIDATION_ATTEMPTS {
            let filling = self.start(root, &section.rel)?;
            let hook = filling.folder_hook();
            // Its folders; no file is looked at yet (dated: none).
            let walked = walker::walk_with(
                root,
                &section.rel,
                &|| false,
                Some(&hook),
                Some(&|_| false),
                (true, Some(section)),
            );
            drop(hook);
            let walked = match walked {
                Ok(walked) if !walked.truncated && !walked.stopped => walked,
                _ => {
                    self.abandon(filling);
                    return None;
                }
            };
            let files = Arc::new(walked.files);
            let records = (Arc::new(walked.folders), walked.way);
            let Some(grams) = self.keep(filling, root, &files, (walked.whitelists, records), |cache| {
                Grams::new(files.len(), Arc::clone(cache))
            }) else {
                continue;
            };
            // Any change reported from now on keeps the filters out.
            let generation = grams.generation();
            reached(Step::Files);
            tracing::debug!(root = %root.path().display(), rel = %section.rel.display(), files = files.len(), "search index: folders validated");
            let (filters, reread) = filters_back(root, &files, &walked.kept, section, &self.dating);
            grams.install(filters, generation);
            if reread > 0 {
                lock(&self.state).dirty.insert(root.path().to_path_buf());
            }
            return Some(reread);
        }
        None
    }

    /// Waits while `root`'s index is being validated, unless it turns out to hold no listing of
    /// `rel`, or `stop` says so: until the listing's folders are validated, and its files too
    /// when `files` (a search that reads them wants their filters).
    pub fn await_validation(&self, root: &Root, rel: &Path, files: bool, stop: &(dyn Fn() -> bool + Sync)) {
        let pending =
            self.validating.lock().unwrap_or_else(PoisonError::into_inner).get(root.path()).cloned();
        let Some(pending) = pending else { return };
        let mut state = pending.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let ready = match state.rels.as_ref().map(|rels| rels.iter().find(|(held, _)| held == rel)) {
                // Not read yet.
                None => false,
                // The index holds no listing of it.
                Some(None) => true,
                Some(Some((_, step))) => *step == Step::Done || (*step == Step::Files && !files),
            };
            if state.done || ready || stop() {
                return;
            }
            state = pending.ready.wait_timeout(state, WAIT_STEP).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Writes the index of every root whose kept listings changed since it was last written
    /// or loaded (at a clean stop); the roots written.
    pub fn persist_all(&self) -> usize {
        let Some(index) = self.index.get() else { return 0 };
        // After a write under way (it may have taken a root off the dirty ones).
        let writing = index.hold();
        let roots: Vec<PathBuf> = lock(&self.state).dirty.iter().cloned().collect();
        roots.iter().filter(|root| write_root(&self.state, index, &writing, root)).count()
    }

    /// What is known of each root's index.
    pub fn index_roots(&self) -> Vec<(PathBuf, RootIndex)> {
        self.index.get().map(|index| index.roots()).unwrap_or_default()
    }
}

/// What a listing's filters tell when a build of them went through: its root's index is
/// written on a thread of its own, unless it was written less than [`WRITE_EVERY`] ago (then
/// at the stop, or after a later build).
pub(super) fn on_built(state: &Arc<Mutex<State>>, index: &Arc<Indexes>, root: &Path) -> Built {
    static LAST: Mutex<Option<HashMap<PathBuf, Instant>>> = Mutex::new(None);
    let (state, index, root) = (Arc::downgrade(state), Arc::clone(index), root.to_path_buf());
    Arc::new(move || {
        let Some(strong) = state.upgrade() else { return };
        lock(&strong).dirty.insert(root.clone());
        {
            let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
            let last = last.get_or_insert_with(HashMap::new);
            if last.get(&root).is_some_and(|at| at.elapsed() < WRITE_EVERY) {
                return;
            }
            if last.len() > MAX_PREPARED {
                last.clear();
            }
            last.insert(root.clone(), Instant::now());
        }
        let (state, index, root) = (Arc::downgrade(&strong), Arc::clone(&index), root.clone());
        let _ = std::thread::Builder::new().name("filectx-index".into()).spawn(move || {
            if let Some(state) = state.upgrade() {
                let writing = index.hold();
                write_root(&state, &index, &writing, &root);
            }
        });
    })
}

/// One kept listing of a root, as its index is written from it.
struct Part {
    rel: PathBuf,
    root: Root,
    files: Arc<Vec<Listed>>,
    grams: Arc<Grams>,
    records: super::Records,
    whitelists: bool,
}

/// Writes the index of `root` from its kept listings (none kept: the index on disk stays as
/// it is), `writing` held; whether it was written.
fn write_root(
    state: &Mutex<State>,
    index: &Indexes,
    _writing: &std::sync::MutexGuard<'_, ()>,
    root: &Path,
) -> bool {
    let parts: Vec<Part> = {
        let mut state = lock(state);
        if state.validating.contains(root) {
            // Written after its validation (it stays dirty until then).
            return false;
        }
        state.dirty.remove(root);
        state
            .entries
            .iter()
            .filter(|((kept, _), _)| kept == root)
            .map(|((_, rel), entry)| Part {
                rel: rel.clone(),
                root: Arc::clone(&entry.root),
                files: Arc::clone(&entry.files),
                grams: Arc::clone(&entry.grams),
                records: entry.records.clone(),
                whitelists: entry.whitelists,
            })
            .collect()
    };
    if parts.is_empty() {
        return false;
    }
    let uid = rustix::process::geteuid().as_raw();
    let mut encoder = Encoder::new(root, uid);
    for part in &parts {
        let Some(wanted) = part.grams.read_filters(|filters| {
            filters.iter().map(|filter| filter.as_ref().map_or(0, GramFilter::stamp)).collect::<Vec<u64>>()
        }) else {
            continue;
        };
        let stamps = stamps_again(&part.root, &part.files, &wanted);
        part.grams.read_filters(|filters| {
            encoder.section(&Out {
                rel: &part.rel,
                whitelists: part.whitelists,
                way: part.records.1,
                files: &part.files,
                stamps: &stamps,
                filters,
                folders: &part.records.0,
            });
        });
    }
    // Every listing was dropped meanwhile: the index on disk stays as it is.
    if encoder.is_empty() {
        return false;
    }
    match index.write(root, &encoder.finish()) {
        Ok(written) => written,
        Err(err) => {
            tracing::warn!(root = %root.display(), %err, "a search index could not be written");
            false
        }
    }
}

/// For each file of `files` beneath `root` whose filter's stamp digest is `wanted` (0: none),
/// its stamp now, when it has that digest: the filter is of its bytes (else `None`, and the
/// filter is not written).
fn stamps_again(root: &RootDir, files: &[Listed], wanted: &[u64]) -> Vec<Option<Stamp>> {
    let indices: Vec<usize> = (0..files.len()).filter(|&index| wanted[index] != 0).collect();
    let mut stamps = vec![None; files.len()];
    for (index, stamp) in indices.iter().zip(stamps_of(root, files, &indices, None)) {
        stamps[*index] = stamp.filter(|stamp| stamp.digest() == wanted[*index]);
    }
    stamps
}

/// The second step of a validation: every file of `files` (beneath `root`; `kept`: its entry
/// in `section`, the listing as the index held it) is looked at and dated; a file whose stat
/// data are the entry's gets the entry's filter. The filters, and how many files did not match.
fn filters_back(
    root: &RootDir,
    files: &[Listed],
    kept: &[Option<u32>],
    section: &Section,
    dating: &std::sync::atomic::AtomicUsize,
) -> (Vec<Option<GramFilter>>, u64) {
    let indices: Vec<usize> = (0..files.len()).collect();
    // A glob dating the files it shows meanwhile goes first.
    let stamps = stamps_of(root, files, &indices, Some(dating));
    let mut reread = 0;
    let filters = files
        .iter()
        .zip(kept)
        .zip(stamps)
        .map(|((file, &entry), stamp)| {
            if let Some(stamp) = stamp {
                file.date(stamp.mtime_ns);
            }
            let before = entry.and_then(|entry| section.file(entry));
            // New, or changed since its filter was built (a file kept without one, such as one
            // too big for a filter, is read by every search anyway).
            let known = before.and_then(|before| before.stamp);
            if stamp.is_none() || known != stamp {
                if before.is_none_or(|before| before.filter.is_some()) {
                    reread += 1;
                }
                return None;
            }
            section.filter(entry?)
        })
        .collect();
    (filters, reread)
}

#[cfg(test)]
mod tests;

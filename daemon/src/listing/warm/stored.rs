//! The warm listings and the search index on disk (see [`index`](crate::listing::index)):
//! a root's index is loaded and validated in the background as soon as a session names the
//! root ([`Listings::prepare`]), and a search of a listing it holds waits for that
//! ([`Listings::await_validation`]) instead of walking; a root's kept listings are written
//! back, in the background, when a build of their filters went through (at most once a
//! [`WRITE_EVERY`]), and all of those that changed at a clean stop ([`Listings::persist_all`]).
//!
//! A validation is a walk like any other of a kept listing: every folder it reads is watched
//! before it is read, so a change during it spoils it (it is tried again once, then the next
//! search walks). Only what it found true is kept, with the filters of the files whose stat
//! data matched; the others are read by the searches, and their filters built again.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, Mode};

use super::{Listings, State, lock};
use crate::listing::grams::{Built, GramFilter, Grams};
use crate::listing::index::format::{Encoder, Out};
use crate::listing::index::section::Section;
use crate::listing::index::{Indexes, RootIndex};
use crate::listing::listed::Listed;
use crate::listing::rules;
use crate::listing::stamp::Stamp;
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
pub struct Pending {
    state: Mutex<PendingState>,
    ready: Condvar,
}

#[derive(Debug, Default)]
struct PendingState {
    /// The searched folders its index holds, once read.
    rels: Option<Vec<PathBuf>>,
    /// Whether it is over.
    done: bool,
}

impl Pending {
    fn update(&self, change: impl FnOnce(&mut PendingState)) {
        change(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
        self.ready.notify_all();
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
            let pending = Arc::new(Pending::default());
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
    fn validate(&self, root: &Root, pending: &Pending) {
        let Some(index) = self.index.get() else { return };
        let started = Instant::now();
        let (image, bytes) = match index.load(root.path()) {
            Ok(Some(loaded)) => loaded,
            Ok(None) => return,
            Err(why) => return index.discard(root.path(), &why),
        };
        let rels = image.sections.iter().map(|section| section.rel.clone()).collect();
        pending.update(|state| state.rels = Some(rels));
        let (mut loaded, mut reread) = (false, 0u64);
        for mut section in image.sections {
            if let Some(changed) = self.validate_section(root, &mut section) {
                loaded = true;
                reread += changed;
            }
        }
        let validation_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::debug!(root = %root.path().display(), loaded, reread, validation_ms, "search index validated");
        index.note(root.path(), |known| *known = RootIndex { loaded, reread, bytes, validation_ms });
    }

    /// Validates one listing of `root`'s index and keeps it; the files whose filters were not
    /// kept (`None`: it was not kept).
    fn validate_section(&self, root: &Root, section: &mut Section) -> Option<u64> {
        for _ in 0..VALIDATION_ATTEMPTS {
            let filling = self.start(root, &section.rel)?;
            let hook = filling.folder_hook();
            let walked =
                walker::walk_with(root, &section.rel, &|| false, Some(&hook), None, (true, Some(&*section)));
            drop(hook);
            let walked = match walked {
                Ok(walked) if !walked.truncated && !walked.stopped => walked,
                _ => {
                    self.abandon(filling);
                    return None;
                }
            };
            let reread = walked.kept.iter().filter(|kept| kept.is_none()).count() as u64;
            let files = Arc::new(walked.files);
            let records = (Arc::new(walked.folders), walked.way);
            let (kept, filters) = (&walked.kept, &mut section.filters);
            let grams = self.keep(filling, root, &files, (walked.whitelists, records), |cache| {
                let taken: Vec<Option<GramFilter>> = kept
                    .iter()
                    .map(|entry| entry.and_then(|index| filters.get_mut(index as usize)?.take()))
                    .collect();
                Grams::with_filters(taken, Arc::clone(cache))
            });
            if grams.is_some() {
                if reread > 0 {
                    lock(&self.state).dirty.insert(root.path().to_path_buf());
                }
                return Some(reread);
            }
        }
        None
    }

    /// Waits while `root`'s index is being validated, unless it turns out to hold no listing of
    /// `rel`, or `stop` says so.
    pub fn await_validation(&self, root: &Root, rel: &Path, stop: &(dyn Fn() -> bool + Sync)) {
        let pending =
            self.validating.lock().unwrap_or_else(PoisonError::into_inner).get(root.path()).cloned();
        let Some(pending) = pending else { return };
        let mut state = pending.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let elsewhere = state.rels.as_ref().is_some_and(|rels| !rels.iter().any(|held| held == rel));
            if state.done || elsewhere || stop() {
                return;
            }
            state = pending.ready.wait_timeout(state, WAIT_STEP).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Writes the index of every root whose kept listings changed since it was last written
    /// or loaded (at a clean stop); the roots written.
    pub fn persist_all(&self) -> usize {
        let Some(index) = self.index.get() else { return 0 };
        let roots: Vec<PathBuf> = lock(&self.state).dirty.iter().cloned().collect();
        roots.iter().filter(|root| write_root(&self.state, index, root)).count()
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
                write_root(&state, &index, &root);
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
/// it is); whether it was written.
fn write_root(state: &Mutex<State>, index: &Indexes, root: &Path) -> bool {
    let _writing = index.hold();
    let parts: Vec<Part> = {
        let mut state = lock(state);
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
    let mut folder: Option<(PathBuf, Option<OwnedFd>)> = None;
    files
        .iter()
        .zip(wanted)
        .map(|(file, &wanted)| {
            if wanted == 0 {
                return None;
            }
            let (parent, name) = (file.rel.parent()?, file.rel.file_name()?);
            if folder.as_ref().is_none_or(|(open, _)| open != parent) {
                let fd = root.open(parent, rules::folder_flags(), Mode::empty()).ok();
                folder = Some((parent.to_path_buf(), fd));
            }
            let fd = folder.as_ref()?.1.as_ref()?;
            let stat = rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
            let stamp = Stamp::of(&stat);
            (stamp.digest() == wanted).then_some(stamp)
        })
        .collect()
}

#[cfg(test)]
mod tests;

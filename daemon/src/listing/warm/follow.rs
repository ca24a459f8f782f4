//! How a kept listing follows what happens in the folders it walked: the paths an event notes
//! ([`State::follow`]), and what the next answer makes of them ([`State::take_in`]): files
//! inserted, removed or re-dated, a folder that came walked on its own, one that went taken
//! out with its watches, the filters of everything else moved over.

use std::ffi::OsStr;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use inotify::{WatchDescriptor, Watches};

use super::{Key, MAX_CHANGED, MAX_WATCHED_FOLDERS, Role, State, Unwatched, add_watch, cost, listed_bytes};
use crate::listing::judge::{Judge, Now};
use crate::listing::listed::Listed;
use crate::listing::walker::{self, FolderHook, MAX_LISTED_BYTES, MAX_LISTED_FILES, Watch};
use crate::provider::Root;

/// Longest walk of a folder that came into a kept listing (the state's lock is held meanwhile):
/// one that takes longer drops the listing, and the next search walks the whole folder.
const NEW_FOLDER_WALK: Duration = Duration::from_millis(50);

impl State {
    /// Notes for the kept listing `id` that `path`, the entry `name` of a folder it walked (or,
    /// without a name, that folder itself) changed, came or went: it is looked at at the next
    /// answer, and its filter (if it is a listed file) goes now. Whether the listing can follow
    /// that; when not (an ignore file or `.git`, the searched folder itself going, too many
    /// changes waiting) it is to be dropped.
    pub(super) fn follow(&mut self, id: u64, name: Option<&OsStr>, path: &Path, hidden: bool) -> bool {
        if name.is_some_and(|name| matches!(name.as_encoded_bytes(), b".gitignore" | b".ignore" | b".git")) {
            return false;
        }
        let Some(key) = self.keys.get(&id) else { return true };
        let Some(entry) = self.entries.get_mut(key) else { return true };
        // Without a whitelisting rule a hidden name is never listed: the daemon's own staging
        // files and an editor's swap files change nothing.
        if hidden && !entry.whitelists {
            return true;
        }
        let Ok(rel) = path.strip_prefix(&key.0) else { return false };
        if name.is_none() && rel == key.1 {
            return false;
        }
        if entry.changed.len() >= MAX_CHANGED && !entry.changed.contains(rel) {
            return false;
        }
        if let Ok(index) = entry.files.binary_search_by(|f| (*f.rel).cmp(rel)) {
            entry.grams.forget(index);
        }
        entry.changed.insert(rel.to_path_buf());
        let root = key.0.clone();
        self.dirty.insert(root);
        true
    }

    /// Takes in the changes the kept listing `key` was told of since its last answer, each as a
    /// walk would see it now ([`Judge`]): a file that came is inserted in order, a changed one
    /// re-dated; whatever went (a file, or a folder with everything listed beneath it and the
    /// watches of its folders) is taken out; a folder that came is walked on its own, its
    /// folders watched as a walk watches them. The filters of the files that stayed move into
    /// a new [`Grams`](crate::listing::grams::Grams). `false` when only a walk of the whole
    /// folder can tell (a path cannot be judged, a new folder is too big to walk now) or the
    /// listing would pass a bound of a walk or the cache: then it is to be dropped.
    pub(super) fn take_in(&mut self, key: &Key, watches: &mut Watches) -> bool {
        let Some(entry) = self.entries.get_mut(key) else { return false };
        let (id, root) = (entry.id, Arc::clone(&entry.root));
        let mut changed: Vec<PathBuf> = std::mem::take(&mut entry.changed).into_iter().collect();
        // In the listing's order (components'): a folder before what is beneath it.
        changed.sort_unstable();
        let mut judge = Judge::new(&root);
        let mut came = Vec::new();
        // Paths whose listed files all go (a file's own path, or a folder's), the folders
        // among them to walk anew, and those whose watches go (all but the listed files).
        let (mut gone, mut walk, mut unwatched) = (Vec::<PathBuf>::new(), Vec::new(), Vec::new());
        for rel in changed {
            if gone.last().is_some_and(|folder| rel.starts_with(folder)) {
                continue;
            }
            let at = entry.files.binary_search_by(|f| (*f.rel).cmp(&rel));
            match (judge.judge(&rel, at.is_ok()), at) {
                // In place: an earlier answer holding the list sees the newer time too.
                (Now::Listed(mtime_ns), Ok(index)) => entry.files[index].redate(mtime_ns),
                (Now::Listed(mtime_ns), Err(_)) => {
                    // A file where a folder may have been: what was listed beneath it goes.
                    came.push(Listed::new(&rel, Some(mtime_ns)));
                    unwatched.push(rel.clone());
                    gone.push(rel);
                }
                // A listed file has no folders beneath it.
                (Now::Unlisted, Ok(_)) => gone.push(rel),
                (Now::Unlisted, Err(_)) => {
                    unwatched.push(rel.clone());
                    gone.push(rel);
                }
                (Now::Folder, _) => {
                    walk.push(rel.clone());
                    unwatched.push(rel.clone());
                    gone.push(rel);
                }
                (Now::Unknown, _) => return false,
            }
        }
        drop(judge);
        if came.is_empty() && gone.is_empty() {
            return true;
        }
        for rel in &unwatched {
            self.release_beneath(id, &key.0.join(rel), watches);
        }
        let mut whitelists = false;
        for rel in &walk {
            let Some(walked) = self.walk_new_folder(id, &root, rel, watches) else { return false };
            came.extend(walked.files);
            whitelists |= walked.whitelists;
        }
        let folders = self.uses.get(&id).map_or(0, Vec::len);
        if folders > MAX_WATCHED_FOLDERS {
            return false;
        }
        came.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
        let Some(entry) = self.entries.get_mut(key) else { return false };
        entry.whitelists |= whitelists;
        let old = std::mem::replace(&mut entry.files, Arc::new(Vec::new()));
        // Moved when no answer holds the list (the common case), copied otherwise.
        let old = Arc::try_unwrap(old).unwrap_or_else(|shared| (*shared).clone());
        let added: usize = came.iter().map(listed_bytes).sum();
        let (files, from, removed) = merge(old, &gone, came);
        let listed = entry.listed + added - removed;
        if files.len() > MAX_LISTED_FILES || listed > MAX_LISTED_BYTES {
            return false;
        }
        let bytes = cost(key, files.len(), listed, folders);
        if bytes > entry.bytes {
            if !self.cache.reserve(bytes - entry.bytes) {
                return false;
            }
        } else {
            self.cache.release(entry.bytes - bytes);
        }
        entry.bytes = bytes;
        entry.listed = listed;
        entry.grams = Arc::new(entry.grams.remapped(&from));
        entry.files = Arc::new(files);
        true
    }

    /// Stops listing `id` using the watches of `folder` and the folders beneath it (gone, or
    /// about to be walked anew); a watch nobody uses any more is removed.
    fn release_beneath(&mut self, id: u64, folder: &Path, watches: &mut Watches) {
        let Some(numbers) = self.uses.get_mut(&id) else { return };
        let mut released = Vec::new();
        numbers.retain(|number| {
            let beneath = self
                .watches
                .get(number)
                .and_then(|watched| watched.users.get(&id))
                .is_some_and(|user| user.folder.starts_with(folder));
            if beneath {
                released.push(*number);
            }
            !beneath
        });
        for number in released {
            self.unuse(id, number, watches);
        }
    }

    /// Walks the folder `rel` that came into the kept listing `id` (beneath `root`), watching
    /// each folder it opens before reading it, as the listing's own walk did (the folders on
    /// the way are watched by the listing already); `None` when that failed or took too long.
    fn walk_new_folder(
        &mut self,
        id: u64,
        root: &Root,
        rel: &Path,
        watches: &Watches,
    ) -> Option<walker::Walked> {
        let added: Arc<Mutex<Vec<(WatchDescriptor, PathBuf, Role)>>> = Arc::default();
        let failed = Arc::new(AtomicBool::new(false));
        let hook: FolderHook = {
            let (added, failed) = (Arc::clone(&added), Arc::clone(&failed));
            let (budget, watches) = (Arc::clone(&self.budget), watches.clone());
            Box::new(move |folder: &Path, dir: BorrowedFd<'_>, what: Watch<'_>| {
                if failed.load(Ordering::Relaxed) {
                    return;
                }
                match add_watch(&budget, &mut watches.clone(), dir) {
                    Ok(wd) => added.lock().unwrap_or_else(PoisonError::into_inner).push((
                        wd,
                        folder.to_path_buf(),
                        Role::of(what),
                    )),
                    Err(Unwatched::Budget | Unwatched::Failed(_)) => failed.store(true, Ordering::Relaxed),
                }
            })
        };
        let started = Instant::now();
        let stop = || started.elapsed() > NEW_FOLDER_WALK;
        let walked = walker::walk(root, rel, &stop, Some(&hook), None);
        drop(hook);
        // Registered whether the walk went through or not: a listing dropped releases them.
        let added = std::mem::take(&mut *added.lock().unwrap_or_else(PoisonError::into_inner));
        for (wd, folder, role) in added {
            self.register(id, wd, &folder, role);
        }
        let walked = walked.ok()?;
        (!walked.truncated && !walked.stopped && !failed.load(Ordering::Relaxed)).then_some(walked)
    }
}

/// The listing `old` without the files at or beneath the paths `gone` (sorted) and with those
/// that `came` (sorted, none of them in what stays), in order; for each file of it, where it
/// was in `old` (`None`: it came); and the [`listed_bytes`] of the files taken out.
fn merge(old: Vec<Listed>, gone: &[PathBuf], came: Vec<Listed>) -> (Vec<Listed>, Vec<Option<usize>>, usize) {
    let total = old.len() + came.len();
    let (mut files, mut from, mut removed) = (Vec::with_capacity(total), Vec::with_capacity(total), 0);
    let (mut came, mut gone) = (came.into_iter().peekable(), gone.iter().peekable());
    for (index, file) in old.into_iter().enumerate() {
        // The paths gone that sort before this file cannot hold it or any later one.
        while gone.next_if(|path| **path < *file.rel && !file.rel.starts_with(path)).is_some() {}
        if gone.peek().is_some_and(|path| file.rel.starts_with(path)) {
            removed += listed_bytes(&file);
            continue;
        }
        while let Some(new) = came.next_if(|new| new.rel < file.rel) {
            files.push(new);
            from.push(None);
        }
        files.push(file);
        from.push(Some(index));
    }
    for new in came {
        files.push(new);
        from.push(None);
    }
    (files, from, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_takes_out_what_went_beneath_and_puts_in_what_came_in_order() {
        let listed = |paths: &[&str]| -> Vec<Listed> {
            paths.iter().map(|p| Listed::new(Path::new(p), None)).collect()
        };
        let old = listed(&["a.rs", "b/c.rs", "b/d/e.rs", "b-x.rs", "c.rs", "d/f.rs"]);
        let gone: Vec<PathBuf> = ["b", "c.rs"].iter().map(PathBuf::from).collect();
        let came = listed(&["0.rs", "b/new.rs", "bz.rs", "e.rs"]);
        let (files, from, removed) = merge(old, &gone, came);
        let taken_out =
            ["b/c.rs", "b/d/e.rs", "c.rs"].iter().map(|p| p.len() + std::mem::size_of::<Listed>());
        assert_eq!(removed, taken_out.sum::<usize>());
        let paths: Vec<_> = files.iter().map(|f| f.rel.to_str().unwrap()).collect();
        assert_eq!(paths, ["0.rs", "a.rs", "b/new.rs", "b-x.rs", "bz.rs", "d/f.rs", "e.rs"]);
        assert_eq!(from, [None, Some(0), None, Some(3), None, Some(5), None]);
    }
}

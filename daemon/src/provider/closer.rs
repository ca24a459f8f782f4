//! Closing the descriptors of replaced files off the request's path. An atomic replace renames
//! a new inode over the old one; the edit's own descriptor (the one its `flock` was on) is then
//! the old inode's last reference, and closing it frees the inode: truncating its pages and
//! freeing its blocks — on a filesystem mounted with `discard`, a synchronous discard that
//! waits for the device. That is no part of the edit: its lock is let go of at once
//! (`LOCK_UN`), and the descriptor is handed to one thread that closes such descriptors in
//! batches. At most [`MAX_PENDING`] wait; past that a descriptor is closed where it is.

use std::fs::File;
use std::sync::{Condvar, LazyLock, Mutex, PoisonError};
use std::time::Duration;

/// Descriptors waiting to be closed at most.
const MAX_PENDING: usize = 64;

/// How long the closing thread lets descriptors gather after a batch (so that a stream of
/// edits wakes it about once per interval, not once per edit).
const GATHER: Duration = Duration::from_millis(5);

#[derive(Debug, Default)]
struct Queue {
    files: Vec<File>,
    /// Whether the closing thread waits for the next descriptor (and must be woken).
    idle: bool,
}

#[derive(Debug, Default)]
struct Closer {
    queue: Mutex<Queue>,
    wake: Condvar,
}

static CLOSER: LazyLock<Option<&'static Closer>> = LazyLock::new(|| {
    let closer: &'static Closer = Box::leak(Box::default());
    std::thread::Builder::new().name("filectx-closer".into()).spawn(move || closer.run()).ok()?;
    Some(closer)
});

impl Closer {
    fn run(&self) {
        loop {
            let batch = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                while queue.files.is_empty() {
                    queue.idle = true;
                    queue = self.wake.wait(queue).unwrap_or_else(PoisonError::into_inner);
                }
                queue.idle = false;
                std::mem::take(&mut queue.files)
            };
            drop(batch);
            std::thread::sleep(GATHER);
        }
    }
}

/// Closes `file` on the closing thread (here when too many wait, or no thread could be
/// started). Let go of any lock on it first: it may stay open for a few milliseconds.
pub(super) fn close_later(file: File) {
    let Some(closer) = *CLOSER else { return drop(file) };
    let mut queue = closer.queue.lock().unwrap_or_else(PoisonError::into_inner);
    if queue.files.len() >= MAX_PENDING {
        drop(queue);
        return drop(file);
    }
    queue.files.push(file);
    let wake = std::mem::take(&mut queue.idle);
    drop(queue);
    if wake {
        closer.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_handed_over_are_closed_soon() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x").unwrap();
        let file = File::open(&path).unwrap();
        let fd = {
            use std::os::fd::AsRawFd;
            file.as_raw_fd()
        };
        let before = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert_eq!(before, path);
        close_later(file);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        // Closed: the descriptor number no longer names the file (it may be reused by now).
        while std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|p| p == path) {
            assert!(std::time::Instant::now() < deadline, "not closed within 5 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

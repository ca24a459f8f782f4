//! Temporary files a killed daemon left behind, and the crash points tests kill it at.
//!
//! A write stages its bytes in `.{name}.filectx-{pid}-{n}.tmp` next to the target and renames
//! it over the target; a daemon killed in between leaves the temporary file (the target itself
//! holds the old or the new content, never a mix). The first write or edit in a folder after a
//! start removes the temporary files there whose daemon is gone.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// Folders remembered as cleaned before the set is started afresh (it only saves `readdir`s).
const MAX_REMEMBERED: usize = 4096;

/// This process's id, asked once (it is a system call, and it never changes).
fn pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// The name of a temporary file for `name` staged by this process.
pub fn temp_name(name: &str, n: u64) -> String {
    format!(".{name}.filectx-{}-{n}.tmp", pid())
}

/// The pid in a temporary file's name, when the name is one of ours.
fn owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (_, tail) = rest.rsplit_once(".filectx-")?;
    let (pid, n) = tail.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse::<i32>().ok().filter(|pid| *pid > 0)
}

/// Whether process `pid` is gone (a process of another user counts as alive).
fn gone(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else { return false };
    matches!(rustix::process::test_kill_process(pid), Err(rustix::io::Errno::SRCH))
}

/// Folders already cleaned since this daemon started.
#[derive(Debug, Default)]
pub struct Leftovers {
    cleaned: Mutex<HashSet<PathBuf>>,
}

impl Leftovers {
    /// Removes the temporary files in `dir` staged by daemons that are gone, the first time a
    /// write goes to `dir`; returns how many went.
    pub fn clean_once(&self, dir: &Path) -> usize {
        {
            let mut cleaned = self.cleaned.lock().unwrap_or_else(PoisonError::into_inner);
            if cleaned.contains(dir) {
                return 0;
            }
            if cleaned.len() >= MAX_REMEMBERED {
                cleaned.clear();
            }
            cleaned.insert(dir.to_owned());
        }
        clean(dir)
    }
}

/// Removes the temporary files in `dir` whose daemon is gone; returns how many went.
pub fn clean(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner) else { continue };
        if u32::try_from(pid).ok() == Some(self::pid()) || !gone(pid) {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => {
                removed += 1;
                tracing::info!(path = %entry.path().display(), pid, "removed a temporary file left by a daemon that died");
            }
            Err(err) => {
                tracing::debug!(path = %entry.path().display(), %err, "could not remove a leftover temporary file")
            }
        }
    }
    removed
}

/// Test builds (`failpoints`): a point inside a write where a test can kill the daemon. When
/// the fail point `name` is configured (`FILECTX_FAILPOINTS=name=return`), the daemon sends
/// itself SIGKILL right there: no unwinding, no cleanup, as in a crash or an OOM kill.
macro_rules! crash_point {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name, |_| $crate::provider::leftovers::die($name))
    };
}
pub(crate) use crash_point;

/// Whether fail points were configured at start-up (see [`arm`]).
#[cfg(feature = "failpoints")]
static ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks the fail points as configured, so that code shaped only for them (a write split in
/// two, to die halfway) runs; without it a test build writes like a release build.
#[cfg(feature = "failpoints")]
pub fn arm() {
    ARMED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// See [`arm`].
#[cfg(feature = "failpoints")]
pub fn armed() -> bool {
    ARMED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Kills this process with SIGKILL (see [`crash_point!`]).
#[cfg(feature = "failpoints")]
pub fn die(point: &str) -> ! {
    eprintln!("filectxd: crash point {point}: SIGKILL");
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_names_with_a_dead_owner_are_removed() {
        assert_eq!(owner(".a.rs.filectx-123-7.tmp"), Some(123));
        assert_eq!(owner(".x.filectx-1.filectx-42-0.tmp"), Some(42));
        assert_eq!(owner("a.rs.filectx-123-7.tmp"), None);
        assert_eq!(owner(".a.rs.filectx-123.tmp"), None);
        assert_eq!(owner(".a.rs.filectx-x-1.tmp"), None);

        let dir = tempfile::tempdir().unwrap();
        // A pid that cannot be alive (above the kernel's maximum).
        let dead = dir.path().join(".a.rs.filectx-2147483646-0.tmp");
        let ours = dir.path().join(temp_name("a.rs", 0));
        let live = dir.path().join(".a.rs.filectx-1-0.tmp");
        let other = dir.path().join(".a.rs.tmp");
        for path in [&dead, &ours, &live, &other] {
            std::fs::write(path, "x").unwrap();
        }
        let leftovers = Leftovers::default();
        assert_eq!(leftovers.clean_once(dir.path()), 1);
        assert!(!dead.exists() && ours.exists() && live.exists() && other.exists());
        std::fs::write(&dead, "x").unwrap();
        assert_eq!(leftovers.clean_once(dir.path()), 0, "once per folder");
    }
}

//! Temporary files: how a write's staging file (and the copy of an in-place rewrite's old
//! content) is created, and what happens to those a killed daemon left behind (the crash points
//! tests kill the daemon at are in [`crash`](super::crash)).
//!
//! A write stages its bytes in a new file next to the target, created with `O_EXCL` and mode
//! 0600 beneath the folder's handle, named `.{name}.filectx-{token}-{boot}-{pid}-{start}-{random}.tmp`:
//! `token` is a secret shared by this user's daemons (see [`staging_token`]), `boot`, `pid`
//! and `start` say which process made it, and `random` makes the name impossible to guess. It
//! is renamed over the target; a daemon killed in between leaves the temporary file (the target
//! itself holds the old or the new content, never a mix). A file with several hard links is
//! rewritten in place instead, after its old content was copied aside into a file named the
//! same way but ending in `.old` (see [`inplace`](super::inplace)). The first write in a folder
//! after a start (or the first read there of a file with several links) removes the temporary
//! files there that carry this family's token, belong to the daemon's uid, and whose creator is
//! provably gone (another boot, or no process with that pid and start time); such a creator's
//! copies are used to put back a file its death left torn, and then removed. Nothing else is
//! ever deleted.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

use rustix::fs::{AtFlags, Mode, OFlags};

/// Folders remembered as cleaned before the set is started afresh (it only saves `readdir`s).
const MAX_REMEMBERED: usize = 4096;

/// Longest part of the target's name kept in a temporary file's name (the rest is ours, and a
/// name may not exceed 255 bytes).
const MAX_NAME_PART: usize = 96;

/// The file-creation mask of this process, read once (from `/proc`, which does not change it;
/// asking `umask(2)` would change it for a moment under the other threads).
pub static UMASK: LazyLock<u32> = LazyLock::new(|| {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| line.strip_prefix("Umask:").map(|v| v.trim().to_owned()))
        })
        .and_then(|v| u32::from_str_radix(&v, 8).ok())
        .unwrap_or(0o022)
});

/// Random bytes as hex (`getrandom(2)`, see [`crate::random::hex`]); with no entropy source at
/// all, bytes from the clock and the pid instead (still never the same twice for one process,
/// which is what uniqueness needs; `O_EXCL` does the rest).
pub fn random_hex(bytes: usize) -> String {
    crate::random::hex(bytes).unwrap_or_else(|_| {
        let mut buf = vec![0u8; bytes];
        for (n, chunk) in buf.chunks_mut(32).enumerate() {
            let seed = format!("{:?}{}{}", std::time::SystemTime::now(), std::process::id(), n * 32);
            chunk.copy_from_slice(&blake3::hash(seed.as_bytes()).as_bytes()[..chunk.len()]);
        }
        crate::random::hex_of(&buf)
    })
}

/// 32 hex digits nobody can guess, without a system call each time: the keyed blake3 hash of
/// a counter, under a key drawn once from `getrandom(2)` (never the same twice in one
/// process; `O_EXCL` does the rest).
fn unguessable() -> String {
    static KEY: LazyLock<[u8; 32]> = LazyLock::new(|| {
        let hex = random_hex(32);
        *blake3::hash(hex.as_bytes()).as_bytes()
    });
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let hash = blake3::keyed_hash(&KEY, &n.to_le_bytes());
    hash.to_hex()[..32].to_owned()
}

/// Who made a temporary file: boot, pid and the process's start time (clock ticks since boot).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Creator {
    boot: String,
    pid: i32,
    start: u64,
}

/// This boot's id (the first 8 hex digits of the kernel's boot id).
fn boot_id() -> Option<String> {
    static BOOT: LazyLock<Option<String>> = LazyLock::new(|| {
        let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let hex: String = id.chars().filter(char::is_ascii_hexdigit).take(8).collect();
        (hex.len() == 8).then_some(hex)
    });
    BOOT.clone()
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`); `Err(NotFound)` when
/// there is no such process.
fn start_time(pid: &str) -> std::io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may hold spaces: count after its end.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    after
        .split_whitespace()
        .nth(19)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "unreadable /proc stat"))
}

/// This process, as named in its temporary files.
fn me() -> Option<&'static Creator> {
    static ME: LazyLock<Option<Creator>> = LazyLock::new(|| {
        Some(Creator {
            boot: boot_id()?,
            pid: i32::try_from(std::process::id()).ok()?,
            start: start_time("self").ok()?,
        })
    });
    ME.as_ref()
}

impl Creator {
    /// Whether this creator is provably gone: another boot, no such process, or a process with
    /// that pid that started at another time (the pid was reused).
    fn gone(&self) -> bool {
        if Some(&self.boot) != boot_id().as_ref() {
            return boot_id().is_some();
        }
        match start_time(&self.pid.to_string()) {
            Ok(start) => start != self.start,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }
}

/// What a file of this family is, by the end of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Made {
    /// A write's staging file (`.tmp`): renamed over its target, or removed.
    Staging,
    /// The old content of a file rewritten in place (`.old`, see [`inplace`](super::inplace)).
    Copy,
}

impl Made {
    fn suffix(self) -> &'static str {
        match self {
            Made::Staging => ".tmp",
            Made::Copy => ".old",
        }
    }
}

/// The creator in a temporary file's name, and what the file is, when the name is one of this
/// family's (`token`).
fn made_by(name: &str, token: &str) -> Option<(Creator, Made)> {
    [Made::Staging, Made::Copy]
        .into_iter()
        .find_map(|made| Some((creator_of(name.strip_suffix(made.suffix())?, token)?, made)))
}

/// The creator in a staging file's name (see [`made_by`] for the copies').
#[cfg(test)]
fn creator(name: &str, token: &str) -> Option<Creator> {
    creator_of(name.strip_suffix(".tmp")?, token)
}

/// The creator in the part of a name before its suffix.
fn creator_of(stem: &str, token: &str) -> Option<Creator> {
    let rest = stem.strip_prefix('.')?;
    let (_, tail) = rest.rsplit_once(".filectx-")?;
    let mut parts = tail.split('-');
    let (t, boot, pid, start, random) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || t != token
        || random.len() != 32
        || !random.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    let pid = pid.parse::<i32>().ok().filter(|pid| *pid > 0)?;
    Some(Creator { boot: boot.to_owned(), pid, start: start.parse().ok()? })
}

/// The part of a target's name kept in its temporary file's name (cut at a char boundary).
fn name_part(name: &str) -> &str {
    if name.len() <= MAX_NAME_PART {
        return name;
    }
    let mut cut = MAX_NAME_PART;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    &name[..cut]
}

/// The secret shared by this user's daemons, kept in `$XDG_STATE_HOME/filectx/staging-token`
/// (else `~/.local/state/…`), created (0600, in a 0700 folder) the first time. `None` when no
/// such file can be had: the daemon then draws its own, and its leftovers are cleaned by no
/// other daemon.
pub fn staging_token() -> Option<String> {
    let dir = crate::xdg::state_dir()?;
    let path = dir.join("staging-token");
    let read = |path: &Path| -> Option<String> {
        let text = std::fs::read_to_string(path).ok()?;
        let token = text.trim();
        (token.len() == 16 && token.bytes().all(|b| b.is_ascii_hexdigit())).then(|| token.to_owned())
    };
    if let Some(token) = read(&path) {
        return Some(token);
    }
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).ok()?;
    }
    let token = random_hex(8);
    let temp = dir.join(format!(".staging-token.{}", random_hex(8)));
    let written = (|| -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp)?;
        file.write_all(token.as_bytes())?;
        file.sync_all()?;
        // Never replace a token another daemon wrote first.
        std::fs::hard_link(&temp, &path)
    })();
    let _ = std::fs::remove_file(&temp);
    match written {
        Ok(()) => Some(token),
        Err(_) => read(&path),
    }
}

/// The staging names of this daemon, and the folders already cleaned since it started.
#[derive(Debug)]
pub struct Leftovers {
    token: String,
    cleaned: Mutex<HashSet<PathBuf>>,
    /// How long putting back a torn file waits for its lock.
    patience: Duration,
}

impl Default for Leftovers {
    fn default() -> Self {
        Self::new(None)
    }
}

/// What cleaning a folder did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cleaned {
    /// Leftover files removed (staging files, and copies no longer needed).
    pub removed: usize,
    /// Files put back to their old content from a dead daemon's copy (see
    /// [`inplace`](super::inplace)).
    pub restored: usize,
}

impl Leftovers {
    /// Staging with the family's `token` (a fresh random one when `None`).
    pub fn new(token: Option<String>) -> Self {
        Self {
            token: token.unwrap_or_else(|| random_hex(8)),
            cleaned: Mutex::default(),
            patience: Duration::from_secs(10),
        }
    }

    /// The same, waiting at most `patience` for a torn file's lock before putting it back.
    pub fn with_patience(self, patience: Duration) -> Self {
        Self { patience, ..self }
    }

    /// A name for a new file of this process for `name`.
    pub(super) fn temp_name(&self, name: &str, made: Made) -> String {
        let (boot, pid, start) = match me() {
            Some(me) => (me.boot.as_str(), me.pid, me.start),
            // Without /proc the creator cannot be named; such files are never cleaned.
            None => ("nobootid", 0, 0),
        };
        let (token, random, suffix) = (&self.token, unguessable(), made.suffix());
        format!(".{}.filectx-{token}-{boot}-{pid}-{start}-{random}{suffix}", name_part(name))
    }

    /// Creates a new temporary file for `name` in `dir`: `O_EXCL`, mode 0600, never through a
    /// symlink; `announce` is told each name just before it is tried. Returns its name and the
    /// open file.
    pub fn create(
        &self,
        dir: &OwnedFd,
        name: &str,
        announce: &dyn Fn(&str),
    ) -> std::io::Result<(String, File)> {
        self.create_made(dir, name, Made::Staging, announce)
    }

    /// [`Leftovers::create`] for a file of the given kind (opened for reading too: a copy is
    /// read back when it is needed).
    pub(super) fn create_made(
        &self,
        dir: &OwnedFd,
        name: &str,
        made: Made,
        announce: &dyn Fn(&str),
    ) -> std::io::Result<(String, File)> {
        let access = match made {
            Made::Staging => OFlags::WRONLY,
            Made::Copy => OFlags::RDWR,
        };
        loop {
            let temp = self.temp_name(name, made);
            announce(&temp);
            let flags = access | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            match rustix::fs::openat(dir, temp.as_str(), flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => return Ok((temp, File::from(fd))),
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Whether the folder at `path` was already cleaned since the start (a write there does not
    /// list it).
    pub fn cleaned(&self, path: &Path) -> bool {
        self.cleaned.lock().unwrap_or_else(PoisonError::into_inner).contains(path)
    }

    /// Cleans `dir` (at `path`) of what this family's daemons that are gone left there (see
    /// [`Leftovers::clean`]), the first time this daemon writes there (or reads a file with
    /// several links there). The folder counts as cleaned only once a cleaning has finished, so
    /// a request that comes meanwhile cleans too (putting back is idempotent under the file's
    /// lock) rather than going ahead in a folder not cleaned yet.
    pub fn clean_once(&self, dir: &OwnedFd, path: &Path) -> Cleaned {
        if self.cleaned(path) {
            return Cleaned::default();
        }
        let cleaned = self.clean(dir, path);
        let mut remembered = self.cleaned.lock().unwrap_or_else(PoisonError::into_inner);
        if remembered.len() >= MAX_REMEMBERED {
            remembered.clear();
        }
        remembered.insert(path.to_owned());
        cleaned
    }

    /// Removes the temporary files in `dir` whose daemon is gone, and uses the copies of old
    /// content such a daemon left to put back a file its death left torn (see
    /// [`recover`](super::copy::recover)).
    pub fn clean(&self, dir: &OwnedFd, path: &Path) -> Cleaned {
        let mut cleaned = Cleaned::default();
        let Ok(listing) =
            rustix::fs::openat(dir, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        else {
            return cleaned;
        };
        let Ok(mut entries) = rustix::fs::Dir::read_from(&listing) else { return cleaned };
        let uid = rustix::process::geteuid().as_raw();
        while let Some(Ok(entry)) = entries.next() {
            let Ok(name) = entry.file_name().to_str() else { continue };
            let Some((creator, made)) = made_by(name, &self.token) else { continue };
            if Some(&creator) == me() || !creator.gone() {
                continue;
            }
            // Only a regular file of our own uid (a link or another user's file is left alone).
            let Ok(stat) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
            if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile
                || stat.st_uid != uid
            {
                continue;
            }
            if made == Made::Copy {
                let folder = path.display();
                match super::copy::recover(dir, name, self.patience) {
                    Ok(super::copy::Recovered::Restored(file)) => {
                        cleaned.restored += 1;
                        cleaned.removed += 1;
                        tracing::warn!(%folder, file, pid = creator.pid, "put back the old content of a file a daemon died writing in place");
                    }
                    Ok(super::copy::Recovered::Removed(why)) => {
                        cleaned.removed += 1;
                        tracing::info!(%folder, name, pid = creator.pid, why, "removed the copy of an in-place write left by a daemon that died");
                    }
                    Ok(super::copy::Recovered::Kept(why)) => {
                        tracing::warn!(%folder, name, why, "kept the copy of an in-place write left by a daemon that died");
                    }
                    Err(err) => {
                        tracing::warn!(%folder, name, %err, "could not use the copy of an in-place write left by a daemon that died");
                    }
                }
                continue;
            }
            match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) => {
                    cleaned.removed += 1;
                    tracing::info!(folder = %path.display(), name, pid = creator.pid, "removed a temporary file left by a daemon that died");
                }
                Err(err) => {
                    tracing::debug!(folder = %path.display(), name, %err, "could not remove a leftover temporary file")
                }
            }
        }
        cleaned
    }
}

/// A name of this family's for `name`, of the given kind, made by a process that is gone
/// (another boot): for tests of what cleaning does with it.
#[cfg(test)]
pub(super) fn dead_name(name: &str, token: &str, made: Made) -> String {
    let boot = match boot_id() {
        Some(boot) if boot == "00000000" => "11111111",
        _ => "00000000",
    };
    format!(".{name}.filectx-{token}-{boot}-42-7-{}{}", "0".repeat(32), made.suffix())
}

#[cfg(test)]
mod tests {
    use super::super::Version;
    use super::super::copy::{HEADER_BYTES, Header};
    use super::*;
    use fs2::FileExt as _;
    use std::os::unix::fs::MetadataExt as _;

    fn open(path: &Path) -> OwnedFd {
        rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).unwrap()
    }

    #[test]
    fn only_this_familys_files_with_a_gone_creator_are_removed() {
        let leftovers = Leftovers::new(Some("0123456789abcdef".into()));
        let me = me().unwrap().clone();
        let random = "0".repeat(32);
        let name = |token: &str, boot: &str, pid: i32, start: u64| {
            format!(".a.rs.filectx-{token}-{boot}-{pid}-{start}-{random}.tmp")
        };
        let token = "0123456789abcdef";
        let other_boot = if me.boot == "00000000" { "11111111" } else { "00000000" };
        assert_eq!(
            creator(&name(token, &me.boot, 42, 7), token),
            Some(Creator { boot: me.boot.clone(), pid: 42, start: 7 })
        );
        assert_eq!(creator(&name("fedcba9876543210", &me.boot, 42, 7), token), None, "another family");
        assert_eq!(creator(".a.rs.filectx-123-7.tmp", token), None, "the old, guessable names");

        let dir = tempfile::tempdir().unwrap();
        let fd = open(dir.path());
        let cases = [
            // (name, removed?)
            (name(token, other_boot, me.pid, me.start), true),
            (name(token, &me.boot, 2_147_483_646, 1), true),
            (name(token, &me.boot, me.pid, me.start + 1), true),
            (name(token, &me.boot, me.pid, me.start), false),
            (name(token, &me.boot, 1, start_time("1").unwrap()), false),
            (name("fedcba9876543210", other_boot, 5, 5), false),
            (".a.rs.filectx-2147483646-0.tmp".to_owned(), false),
            ("a.rs".to_owned(), false),
        ];
        for (name, _) in &cases {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        // A symlink with a removable name is not ours: left alone.
        let link = name(token, other_boot, 9, 9).replace(".a.rs.", ".b.rs.");
        std::os::unix::fs::symlink("/nonexistent", dir.path().join(&link)).unwrap();
        assert_eq!(leftovers.clean_once(&fd, dir.path()), Cleaned { removed: 3, restored: 0 });
        for (name, removed) in &cases {
            assert_eq!(!dir.path().join(name).exists(), *removed, "{name}");
        }
        assert!(dir.path().join(&link).symlink_metadata().is_ok());
        std::fs::write(dir.path().join(&cases[0].0), "x").unwrap();
        assert_eq!(leftovers.clean_once(&fd, dir.path()), Cleaned::default(), "once per folder");
    }

    #[test]
    fn staging_files_are_private_exclusive_and_unguessable() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open(dir.path());
        let leftovers = Leftovers::default();
        let (a, _) = leftovers.create(&fd, "x.txt", &|_| {}).unwrap();
        let (b, _) = leftovers.create(&fd, "x.txt", &|_| {}).unwrap();
        assert_ne!(a, b);
        assert!(creator(&a, &leftovers.token).is_some());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(&a)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let long = "é".repeat(200);
        let (c, _) = leftovers.create(&fd, &long, &|_| {}).unwrap();
        assert!(c.len() <= 255, "{}", c.len());
    }

    const TOKEN: &str = "0123456789abcdef";

    /// A folder with `a.txt` holding `now`, and a dead daemon's copy for it saying the old
    /// content was `old` and the new one `new` (`whole`: the copy is complete). Returns the
    /// folder, its handle and the copy's name.
    fn torn(now: &[u8], old: &[u8], new: &[u8], whole: bool) -> (tempfile::TempDir, OwnedFd, String) {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        std::fs::write(&target, now).unwrap();
        let meta = std::fs::metadata(&target).unwrap();
        let header = Header {
            dev: meta.dev(),
            ino: meta.ino(),
            name: b"a.txt".to_vec(),
            old_len: old.len() as u64,
            old: Version::of(old),
            new_len: new.len() as u64,
            new: Version::of(new),
        };
        let mut copy = if whole { header.encode() } else { vec![0u8; HEADER_BYTES as usize] };
        copy.extend_from_slice(old);
        let name = dead_name("a.txt", TOKEN, Made::Copy);
        std::fs::write(dir.path().join(&name), copy).unwrap();
        let fd = rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        (dir, fd, name)
    }

    fn clean(fd: &OwnedFd, dir: &Path) -> Cleaned {
        Leftovers::new(Some(TOKEN.into())).with_patience(Duration::from_millis(200)).clean(fd, dir)
    }

    #[test]
    fn a_torn_file_is_put_back_from_a_dead_daemons_copy() {
        let (old, new) = (b"the old content\n".repeat(100), b"the new one\n".repeat(300));
        // Killed halfway: the new content's start over the old.
        let mut now = new[..800].to_vec();
        now.extend_from_slice(&old[800..]);
        let (dir, fd, name) = torn(&now, &old, &new, true);
        assert_eq!(clean(&fd, dir.path()), Cleaned { removed: 1, restored: 1 });
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), old);
        assert!(!dir.path().join(&name).exists(), "the copy is removed once used");
        // Killed after the new content was whole but before its length was cut: the same.
        let (old, new) = (b"long old content\n".repeat(100), b"short new\n".to_vec());
        let mut now = new.clone();
        now.extend_from_slice(&old[new.len()..]);
        let (dir, fd, _) = torn(&now, &old, &new, true);
        assert_eq!(clean(&fd, dir.path()).restored, 1);
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), old);
    }

    #[test]
    fn a_whole_file_an_incomplete_copy_or_a_later_change_is_left_as_it_is() {
        let (old, new) = (b"old\n".repeat(50), b"new\n".repeat(80));
        let mut half = new[..100].to_vec();
        half.extend_from_slice(&old[100..]);
        let longer = b"x".repeat(1000);
        // (what the file holds, whether the copy is complete)
        for (now, whole) in [(&old, true), (&new, true), (&half, false), (&longer, true)] {
            let (dir, fd, name) = torn(now, &old, &new, whole);
            assert_eq!(clean(&fd, dir.path()), Cleaned { removed: 1, restored: 0 });
            assert_eq!(&std::fs::read(dir.path().join("a.txt")).unwrap(), now, "untouched");
            assert!(!dir.path().join(&name).exists(), "the copy is no longer needed");
        }
    }

    #[test]
    fn a_copy_whose_file_is_another_now_is_kept() {
        let (old, new) = (b"old\n".repeat(50), b"new\n".repeat(80));
        let (dir, fd, name) = torn(&new[..10], &old, &new, true);
        // Another file renamed over the name since: not the inode the copy belongs to.
        std::fs::write(dir.path().join("b.txt"), "someone else's\n").unwrap();
        std::fs::rename(dir.path().join("b.txt"), dir.path().join("a.txt")).unwrap();
        assert_eq!(clean(&fd, dir.path()), Cleaned::default());
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), b"someone else's\n");
        assert!(dir.path().join(&name).exists(), "kept for a person to look at");
        // And a torn file whose lock another holds is left for a later daemon.
        let (dir, fd, name) = torn(&new[..10], &old, &new, true);
        let held = std::fs::File::open(dir.path().join("a.txt")).unwrap();
        held.lock_exclusive().unwrap();
        assert_eq!(clean(&fd, dir.path()), Cleaned::default());
        assert!(dir.path().join(&name).exists());
        drop(held);
        assert_eq!(clean(&fd, dir.path()).restored, 1);
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), old);
    }
}

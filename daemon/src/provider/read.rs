//! The read path: open beneath the root, load (hash, text check, line index; mapped, read whole
//! or streamed), the cache's warm path, windows, stat and current versions.

use std::fs::{File, Metadata};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use super::budget::Reservation;
use super::entry::{Body, CacheEntry, unchanged};
use super::error::io_error;
use super::index::{self, Oversized, Scanner, Window, WindowRequest};
use super::mmap::{self, Mapped};
use super::outcome::{OpenedRead, Pace, Paced, ReadAt};
use super::version;
use super::{
    Changed, Fingerprint, Kind, Lookup, Opened, Provider, ProviderError, ReadOutcome, Resolved, Root,
    Snapshot, Stat, Version, WindowError, resolve,
};

/// Files up to this size are read into memory in one go on a cache miss (and the window cut
/// from that buffer); bigger ones are streamed through the scanner and windows are read with
/// positional reads.
const SMALL_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Chunk size of the streaming scan.
const SCAN_CHUNK_BYTES: usize = 1024 * 1024;

/// Times a read retries when the file changes under it before giving up with `FS_BUSY`.
const READ_ATTEMPTS: usize = 3;

/// Reads a whole file with positional reads (independent of its cursor), expecting about
/// `hint` bytes; stops at the real end of file.
pub(super) fn read_all_at(file: &File, hint: u64) -> std::io::Result<Vec<u8>> {
    read_whole_at(file, hint, false)
}

/// [`read_all_at`] of a file whose fingerprint the caller checks after the read (a load): a
/// read that returns less than it asked for, ending exactly at the `size` the fingerprint
/// holds, ends it without the read of 0 bytes that would prove the end (the fingerprint
/// check after it proves the file is still that long).
fn read_fingerprinted(file: &File, size: u64) -> std::io::Result<Vec<u8>> {
    read_whole_at(file, size, true)
}

fn read_whole_at(file: &File, hint: u64, short_ends_at_hint: bool) -> std::io::Result<Vec<u8>> {
    // One byte more than expected, so that a file that grew is noticed without a second buffer;
    // only what is read into is ever zeroed (a fixed 1 MiB scratch chunk cost more than reading
    // a small file).
    let mut bytes = vec![0u8; usize::try_from(hint).unwrap_or(0).saturating_add(1)];
    let mut len = 0;
    loop {
        if len == bytes.len() {
            bytes.resize(len.saturating_mul(2).max(SCAN_CHUNK_BYTES), 0);
        }
        match file.read_at(&mut bytes[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if short_ends_at_hint && len < bytes.len() && len as u64 == hint {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(len);
    Ok(bytes)
}

/// Largest file a cold read answers on an async worker ([`Provider::read_at_once`]).
pub const AT_ONCE_READ_BYTES: u64 = 64 * 1024;

/// The canonical `path` as a target beneath the one of `roots` that contains it, for the
/// watcher, which works on paths it already resolved.
fn located(path: &Path, roots: &[Root]) -> Option<Resolved> {
    let (dir, rel) = resolve::locate(roots, path)?;
    Some(Resolved {
        path: path.to_owned(),
        display: path.display().to_string(),
        exists: true,
        folder: false,
        dir: dir.clone(),
        rel: rel.to_owned(),
        file: None,
        one_name: false,
        create_mode: None,
        by: None,
    })
}

impl Provider {
    /// The current version of the regular file at a canonical path, opened beneath the root
    /// of `roots` that contains it; `None` when nothing (or no regular file, or a symlink) is
    /// there now. For the watcher, which works on paths it already resolved. A file that kept
    /// changing while it was hashed is `Err(Busy)`, never `None`: it is there, just not still.
    pub fn current_version_in(&self, path: &Path, roots: &[Root]) -> Result<Option<Version>, ProviderError> {
        let Some(target) = located(path, roots) else {
            return Ok(None);
        };
        let current = self.current_version(&target);
        #[cfg(feature = "failpoints")]
        let current = fail::eval("provider::recheck", |_| {
            Err(ProviderError::Busy { path: target.display.clone(), why: "fail point".into() })
        })
        .unwrap_or(current);
        match current {
            Ok(version) => Ok(version),
            Err(
                ProviderError::IsDirectory { .. }
                | ProviderError::NotRegularFile { .. }
                | ProviderError::NotFound { .. },
            ) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`Provider::current_bytes`] of the file at the canonical `path`, looked at beneath the
    /// one of `roots` that contains it (`None` outside them), for the watcher.
    pub fn current_bytes_in(
        &self,
        path: &Path,
        roots: &[Root],
        max_bytes: usize,
    ) -> Result<Option<(Version, Vec<u8>, u64)>, ProviderError> {
        match located(path, roots) {
            Some(target) => self.current_bytes(&target, max_bytes),
            None => Ok(None),
        }
    }

    /// Opens a regular file for reading beneath its root (never following a symlink, never
    /// blocking on a FIFO), with its metadata checked on the descriptor.
    fn open_file(&self, target: &Resolved) -> Result<(File, Metadata), ProviderError> {
        let file = target.dir.open_read(&target.rel).map_err(|e| io_error(&target.display, "open", e))?;
        let meta = file.metadata().map_err(|e| io_error(&target.display, "stat", e))?;
        regular(target, &meta)?;
        if !target.dir.admits(&meta) {
            return Err(ProviderError::Private { path: target.display.clone() });
        }
        Ok((file, meta))
    }

    /// Hashes and indexes an open file: mapped (large files on local filesystems), read whole
    /// (small files; the bytes are returned), or streamed. `None` when the file changed under
    /// the scan (a torn mapping). The entry keeps `file` open when it is a shared handle.
    ///
    /// For a read (`Need::Text`), a file whose first chunk already shows it is not text is
    /// answered `FS_NOT_TEXT` before anything is hashed: a sparse 8 GiB file would otherwise be
    /// hashed whole (seconds of a file-work slot) just to say it is binary. Whatever needs the
    /// version (`Need::Version`: stat, a write's version check) hashes everything.
    fn load(
        &self,
        target: &Resolved,
        file: &File,
        keep: Option<&Arc<File>>,
        meta: &Metadata,
        need: Need,
    ) -> Result<Option<(CacheEntry, Body)>, ProviderError> {
        let recorded_ns = version::now_ns();
        let fingerprint = Fingerprint::of(meta);
        let io = |e| io_error(&target.display, "read", e);
        let len = meta.len();
        if len > self.config.max_hash_bytes {
            return Err(ProviderError::TooLarge {
                path: target.display.clone(),
                size: len,
                limit: self.config.max_hash_bytes,
            });
        }
        // On the root's device the file is on the root's filesystem: no `fstatfs` to ask again.
        let local = if meta.dev() == target.dir.dev() { target.dir.local() } else { mmap::mappable(file) };
        // Only an entry the warm path may use (trusted: hashed well after the file last
        // changed) is worth a file handle; a racy one is hashed again on its next access anyway.
        let file_kept = keep.filter(|_| version::trusted(&fingerprint, recorded_ns)).cloned();
        if len >= self.config.map_threshold
            && local
            && let Some(reservation) = self.reserve_mapping(len)
            && let Some(mut mapped) = map_or_degrade(file, len)
        {
            mapped.hold(reservation);
            mapped.advise_sequential();
            let head = &mapped.bytes()[..mapped.bytes().len().min(SCAN_CHUNK_BYTES)];
            let go_on = refuse_early(target, need, head, len, file, &fingerprint);
            // A torn mapping reads as NUL bytes: only an untorn one may call the file binary.
            if mapped.torn() || !go_on? {
                return Ok(None);
            }
            let scanned = index::scan_parallel_until(mapped.bytes(), &|| mapped.torn());
            self.hashed.fetch_add(len, Ordering::Relaxed);
            let Some((version, text)) = scanned.filter(|_| !mapped.torn()) else {
                return Ok(None);
            };
            let mapped = Arc::new(mapped);
            let entry = CacheEntry {
                fingerprint,
                version,
                recorded_ns,
                text: text.map(Arc::new),
                mapping: Some(mapped.clone()),
                file: file_kept,
                local,
            };
            return Ok(Some((entry, Body::Mapped(mapped))));
        }
        if len <= SMALL_FILE_BYTES {
            // `entry` checks the fingerprint once the load is done.
            let bytes = read_fingerprinted(file, len).map_err(io)?;
            let head = &bytes[..bytes.len().min(SCAN_CHUNK_BYTES)];
            if !refuse_early(target, need, head, bytes.len() as u64, file, &fingerprint)? {
                return Ok(None);
            }
            let (version, text) = index::scan_parallel(&bytes);
            self.hashed.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            let text = text.map(Arc::new);
            let entry =
                CacheEntry { fingerprint, version, recorded_ns, text, mapping: None, file: file_kept, local };
            return Ok(Some((entry, Body::Memory(bytes))));
        }
        let mut scanner = Scanner::new();
        let mut buf = vec![0u8; SCAN_CHUNK_BYTES];
        let mut at = 0u64;
        loop {
            // Positional reads: the scan never depends on (or moves) the file's cursor.
            let n = match file.read_at(&mut buf, at) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            };
            if n == 0 {
                break;
            }
            if at == 0 && !refuse_early(target, need, &buf[..n], len.max(n as u64), file, &fingerprint)? {
                return Ok(None);
            }
            scanner.feed(&buf[..n]);
            self.hashed.fetch_add(n as u64, Ordering::Relaxed);
            at += n as u64;
        }
        let (version, text) = scanner.finish();
        Ok(Some((
            CacheEntry {
                fingerprint,
                version,
                recorded_ns,
                text: text.map(Arc::new),
                mapping: None,
                file: file_kept,
                local,
            },
            Body::File,
        )))
    }

    /// Reserves `len` bytes of the mapped-bytes budget for a new mapping, first unmapping the
    /// least recently used cached mappings when that makes room. `None` when the file does not
    /// fit (bigger than the whole budget, or the rest is held by reads in flight): it is then
    /// read with positional reads, never mapped beyond the cap.
    fn reserve_mapping(&self, len: u64) -> Option<Reservation> {
        let len = usize::try_from(len).ok().filter(|len| *len <= self.map_budget.cap())?;
        if let Some(reservation) = self.map_budget.reserve(len) {
            return Some(reservation);
        }
        let target = self.map_budget.cap() - len;
        let released = self.cache.lock().unwrap_or_else(PoisonError::into_inner).shed_mapped(target);
        // Unmapped here, after the cache's lock is released.
        drop(released);
        self.map_budget.reserve(len)
    }

    /// The cached entry for an open file, or a freshly loaded one (then cached). `None` when
    /// the file changed while it was being loaded.
    fn entry(
        &self,
        target: &Resolved,
        file: &File,
        keep: Option<&Arc<File>>,
        meta: &Metadata,
        need: Need,
    ) -> Result<Option<(Arc<CacheEntry>, Body)>, ProviderError> {
        let fingerprint = Fingerprint::of(meta);
        if let Some(entry) = self.cached(&target.path, &fingerprint) {
            let body = entry.body();
            return Ok(Some((entry, body)));
        }
        let Some((entry, body)) = self.load(target, file, keep, meta, need)? else {
            self.forget(&target.path);
            return Ok(None);
        };
        // The bytes must belong to the inode state we fingerprinted.
        if !unchanged(file, &fingerprint) {
            self.forget(&target.path);
            return Ok(None);
        }
        Ok(Some((self.remember(&target.path, entry), body)))
    }

    /// Pins the current version of the text file at `target` for reading windows.
    pub fn snapshot(&self, target: &Resolved) -> Result<Snapshot, ProviderError> {
        for _ in 0..READ_ATTEMPTS {
            let (file, meta) = match self.open_file(target) {
                Ok(opened) => opened,
                Err(err) => {
                    // Gone (or no longer a file): let go of what we held for it, a mapping
                    // included, so a deleted file's space is freed.
                    self.forget(&target.path);
                    return Err(err);
                }
            };
            // A file with several links a killed daemon may have left torn: its folder first.
            if meta.nlink() > 1 && self.settle_folder(target) {
                continue;
            }
            let file = Arc::new(file);
            let Some((entry, body)) = self.entry(target, &file, Some(&file), &meta, Need::Text)? else {
                continue;
            };
            return Snapshot::pin(&entry, file, meta.nlink(), body)
                .map_err(|why| ProviderError::NotText { path: target.display.clone(), why });
        }
        Err(ProviderError::Busy {
            path: target.display.clone(),
            why: "it kept changing while being read".into(),
        })
    }

    /// Reads the window `request` asks for (see [`index::window`]) of the text file `lookup`
    /// found for `raw` (the path as asked, for errors), at `pace`, and says which file that
    /// was. Its byte budget is never more than `max_window_bytes`; a first line over it is
    /// `LineTooLarge` (unless the request cuts it to fit), an offset past the end
    /// `OffsetPastEnd`. Each way reads the same window; which runs is this entry's choice:
    /// - a name resolution opened and did not look at is read warm when its cached entry
    ///   allows (see `read_opened`: looked at once, after the window is read), else looked at
    ///   and read as below;
    /// - [`Pace::AtOnce`]: warm (see `read_cached`), or a small local file read at once (see
    ///   `read_at_once`); else [`Paced::NotAtOnce`];
    /// - [`Pace::Blocking`]: warm, else opened, loaded, indexed and hashed.
    pub fn read(
        &self,
        lookup: Lookup,
        raw: &str,
        request: &WindowRequest,
        pace: Pace,
    ) -> Result<Paced<(ReadOutcome, ReadAt)>, ProviderError> {
        let target = match lookup {
            Lookup::Resolved(target) => target,
            Lookup::Opened(opened) => match self.read_opened(opened, raw, request)? {
                OpenedRead::Warm(outcome, Opened { path, display, dir, .. }) => {
                    return Ok(Paced::Done((outcome, ReadAt { path, display, dir })));
                }
                OpenedRead::Cold(target) => target,
            },
        };
        let outcome = match pace {
            Pace::AtOnce => match self.read_at_once(&target, request) {
                Some(outcome) => outcome?,
                None => return Ok(Paced::NotAtOnce),
            },
            Pace::Blocking => self.read_resolved(&target, request)?,
        };
        let Resolved { path, display, dir, .. } = target;
        Ok(Paced::Done((outcome, ReadAt { path, display, dir })))
    }

    /// [`Provider::read`] of a file resolution looked at, blocking.
    pub(super) fn read_resolved(
        &self,
        target: &Resolved,
        request: &WindowRequest,
    ) -> Result<ReadOutcome, ProviderError> {
        if let Some(answer) = self.read_cached(target, request) {
            return answer;
        }
        for _ in 0..READ_ATTEMPTS {
            let snapshot = self.snapshot(target)?;
            if let Some(mut outcome) = self.cut(&target.display, &target.path, &snapshot, request, true)? {
                // A small file was just read whole: its bytes go with the answer, uncopied.
                outcome.bytes = snapshot.into_bytes();
                return Ok(outcome);
            }
        }
        Err(ProviderError::Busy {
            path: target.display.clone(),
            why: "it kept changing while being read".into(),
        })
    }

    /// The warm path of [`Provider::read`]: answers only when the file's entry is cached and
    /// trusted for the file's current fingerprint, on a local filesystem, and holds the file
    /// open — then a read is positional reads and an `fstat` (plus a `stat` of the path when
    /// resolution did not just look at it), with no open, load or hash, cheap enough to run on
    /// an async worker. `None` means "take the slow
    /// path" (a miss, a change, or any error: [`Provider::read`] reports those properly).
    pub(super) fn read_cached(
        &self,
        target: &Resolved,
        request: &WindowRequest,
    ) -> Option<Result<ReadOutcome, ProviderError>> {
        // Resolution has just looked at the file (on the handle it opened beneath the root).
        let found = target.file?;
        let entry = self.cached(&target.path, &found.fingerprint)?;
        let file = entry.file.clone().filter(|_| entry.local)?;
        self.add_line_ends(&target.path, &entry, &file);
        let snapshot = Snapshot::pin(&entry, file, found.links, entry.body()).ok()?;
        match self.cut(&target.display, &target.path, &snapshot, request, true) {
            Ok(Some(outcome)) => Some(Ok(outcome)),
            Err(e @ (ProviderError::OffsetPastEnd { .. } | ProviderError::LineTooLarge { .. })) => {
                Some(Err(e))
            }
            Ok(None) | Err(_) => None,
        }
    }

    /// [`Provider::read_cached`], or else [`Provider::read`] itself when the file is small
    /// (at most [`AT_ONCE_READ_BYTES`] when resolution looked at it) and on the same device as
    /// its root (not under a mount point in it): an open, one read of at most 64 KiB and a
    /// hash, bounded like a warm read, for a caller on an async worker whose roots are on local
    /// filesystems. `None`: take the blocking path. An exploring agent's first reads of many
    /// small files so skip a hop to the blocking pool and back each.
    fn read_at_once(
        &self,
        target: &Resolved,
        request: &WindowRequest,
    ) -> Option<Result<ReadOutcome, ProviderError>> {
        if let Some(answer) = self.read_cached(target, request) {
            return Some(answer);
        }
        let found = target.file?;
        // A file with several links in a folder not looked at yet may need putting back first
        // (see `inplace`): that waits for a lock, so not on an async worker.
        let settled = found.links == 1 || self.leftovers.cleaned(target.path.parent()?);
        (settled && found.fingerprint.size <= AT_ONCE_READ_BYTES && found.fingerprint.dev == target.dir.dev())
            .then(|| self.read_resolved(target, request))
    }

    /// The warm path for a name resolution has opened and not looked at yet ([`Opened`]): the
    /// entry cached for its path, the window cut from the version's bytes (its mapping, the
    /// content store's copy of that version, else read from the entry's open file), then one
    /// `fstat` of resolution's handle, which must show a regular file with the entry's
    /// fingerprint. That handle is bound to the inode the name led to beneath the root, and
    /// the entry's open file keeps its own inode alive (so its number is not reused), so the
    /// one check says both what [`Provider::read_cached`]'s check before the read says (the
    /// name is that file, as trusted) and what its check after it says (the file did not
    /// change during the read). An answer, an error of the window itself (an offset past the
    /// end, a line too large) included, stands only after that check. A cold path is
    /// [`OpenedRead::Cold`], with the resolution as that `fstat` showed it; nothing is looked
    /// at twice.
    pub(super) fn read_opened(
        &self,
        opened: Opened,
        raw: &str,
        request: &WindowRequest,
    ) -> Result<OpenedRead, ProviderError> {
        let warm = self.cached_at(&opened.path).and_then(|entry| {
            let file = entry.file.clone().filter(|_| entry.local)?;
            self.add_line_ends(&opened.path, &entry, &file);
            // Bytes at hand for this version (its mapping, else the content store's copy) need
            // no read of the file.
            let stored = entry.mapping.is_none().then(|| self.store.peek(&entry.version)).flatten();
            let body = stored.map_or_else(|| entry.body(), Body::Stored);
            let snapshot = Snapshot::pin(&entry, file, 0, body).ok()?;
            Some((entry.fingerprint, self.cut(&opened.display, &opened.path, &snapshot, request, false)))
        });
        let meta = opened.look(raw)?;
        let Some((fingerprint, cut)) = warm else {
            return Ok(OpenedRead::Cold(opened.resolved(&meta)));
        };
        if !meta.is_file() || Fingerprint::of(&meta) != fingerprint {
            return Ok(OpenedRead::Cold(opened.resolved(&meta)));
        }
        match cut {
            Ok(Some(outcome)) => Ok(OpenedRead::Warm(ReadOutcome { links: meta.nlink(), ..outcome }, opened)),
            Err(e @ (ProviderError::OffsetPastEnd { .. } | ProviderError::LineTooLarge { .. })) => Err(e),
            Ok(None) | Err(_) => Ok(OpenedRead::Cold(opened.resolved(&meta))),
        }
    }

    /// Cuts a window out of a snapshot of the file at `path` (shown as `display`); `None` when
    /// the file changed under it (its cached state is then dropped). Unless `verify` is false
    /// (the caller then checks the file's fingerprint itself, after this), a window read from
    /// the file or its mapping counts only when the file still has the snapshot's fingerprint.
    fn cut(
        &self,
        display: &str,
        path: &Path,
        snapshot: &Snapshot,
        request: &WindowRequest,
        verify: bool,
    ) -> Result<Option<ReadOutcome>, ProviderError> {
        let total = snapshot.total_lines();
        let offset = request.offset;
        if offset == 0 || offset > total.max(1) {
            return Err(ProviderError::OffsetPastEnd {
                path: display.to_owned(),
                offset,
                total_lines: total,
            });
        }
        let limit = self.config.max_window_bytes;
        let request = WindowRequest { max_bytes: request.max_bytes.min(limit), ..*request };
        let window = if verify { snapshot.window(&request) } else { snapshot.window_unverified(&request) };
        match window {
            Ok(Window { oversized: Some(Oversized { line, bytes }), .. }) => {
                Err(ProviderError::LineTooLarge {
                    path: display.to_owned(),
                    line,
                    size: bytes,
                    limit: request.max_bytes,
                })
            }
            Ok(window) => Ok(Some(ReadOutcome {
                version: snapshot.version,
                window,
                links: snapshot.links,
                bytes: None,
            })),
            Err(WindowError::Changed(Changed)) => {
                self.forget(path);
                Ok(None)
            }
            Err(WindowError::Io(e)) => Err(io_error(display, "read", e)),
        }
    }

    /// The version of the regular file at `target`, from the cache when it can be trusted.
    pub(super) fn version_of(
        &self,
        target: &Resolved,
        file: &File,
        meta: &Metadata,
    ) -> Result<Version, ProviderError> {
        let mut meta = meta.clone();
        for _ in 0..READ_ATTEMPTS {
            if let Some((entry, _)) = self.entry(target, file, None, &meta, Need::Version)? {
                return Ok(entry.version);
            }
            // It changed under the scan: look again at what it is now.
            meta = file.metadata().map_err(|e| io_error(&target.display, "stat", e))?;
        }
        Err(ProviderError::Busy {
            path: target.display.clone(),
            why: "it kept changing while being hashed".into(),
        })
    }

    /// What is at `target`: kind, size, mode, mtime and (for regular files) version.
    pub fn stat(&self, target: &Resolved) -> Result<Stat, ProviderError> {
        let meta = match target.dir.open_path(&target.rel).and_then(|f| f.metadata()) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                self.forget(&target.path);
                return Ok(Stat {
                    kind: Kind::Missing,
                    size: None,
                    version: None,
                    mtime_ms: None,
                    mode: None,
                    links: 0,
                });
            }
            Err(e) => return Err(io_error(&target.display, "stat", e)),
        };
        let mtime_ms = Some(meta.mtime() * 1000 + meta.mtime_nsec() / 1_000_000);
        let mode = Some(meta.mode() & 0o7777);
        if meta.is_dir() {
            let links = meta.nlink();
            return Ok(Stat {
                kind: Kind::Directory,
                size: Some(meta.len()),
                version: None,
                mtime_ms,
                mode,
                links,
            });
        }
        if !meta.is_file() {
            let links = meta.nlink();
            return Ok(Stat { kind: Kind::Other, size: None, version: None, mtime_ms, mode, links });
        }
        let (file, meta) = match self.open_file(target)? {
            // A file with several links a killed daemon may have left torn: its folder first.
            (_, meta) if meta.nlink() > 1 && self.settle_folder(target) => self.open_file(target)?,
            opened => opened,
        };
        let version = match self.version_of(target, &file, &meta) {
            Ok(version) => Some(version),
            // Over the hash cap: everything but the version (a read would be FS_TOO_LARGE).
            Err(ProviderError::TooLarge { .. }) => None,
            Err(e) => return Err(e),
        };
        Ok(Stat { kind: Kind::File, size: Some(meta.len()), version, mtime_ms, mode, links: meta.nlink() })
    }

    /// The current bytes of the regular file at `target`, their version and the file's hard
    /// links, when it is at most `max_bytes` long; `None` when nothing (or no regular file, or a
    /// bigger one) is there. The version is that of the bytes returned, whatever happens next.
    pub fn current_bytes(
        &self,
        target: &Resolved,
        max_bytes: usize,
    ) -> Result<Option<(Version, Vec<u8>, u64)>, ProviderError> {
        let (file, meta) = match self.open_file(target) {
            Ok(opened) => opened,
            Err(
                ProviderError::NotFound { why: None, .. }
                | ProviderError::IsDirectory { .. }
                | ProviderError::NotRegularFile { .. },
            ) => return Ok(None),
            Err(e) => return Err(e),
        };
        if meta.len() > max_bytes as u64 {
            return Ok(None);
        }
        let bytes = read_all_at(&file, meta.len()).map_err(|e| io_error(&target.display, "read", e))?;
        if bytes.len() > max_bytes {
            return Ok(None);
        }
        Ok(Some((Version::of(&bytes), bytes, meta.nlink())))
    }

    /// The current version of the file at `target`; `None` when nothing is there.
    pub fn current_version(&self, target: &Resolved) -> Result<Option<Version>, ProviderError> {
        match self.open_file(target) {
            Ok((file, meta)) => self.version_of(target, &file, &meta).map(Some),
            Err(ProviderError::NotFound { why: None, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// What a load is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Text to read: a file whose first chunk is not text is refused before it is hashed.
    Text,
    /// The version, whatever the content.
    Version,
}

/// For a read, `FS_NOT_TEXT` when `head` (the first chunk of a file of `len` bytes) already
/// shows the file is not text (a NUL byte, or invalid UTF-8 other than a character cut by the
/// chunk's end); `Ok(false)` when the file changed since `fingerprint` (load it again). A file
/// of one chunk is left to its scan, which checks it anyway.
fn refuse_early(
    target: &Resolved,
    need: Need,
    head: &[u8],
    len: u64,
    file: &File,
    fingerprint: &Fingerprint,
) -> Result<bool, ProviderError> {
    if need == Need::Version || len <= SCAN_CHUNK_BYTES as u64 {
        return Ok(true);
    }
    match index::check_head(head, head.len() as u64 >= len) {
        Ok(()) => Ok(true),
        // Only bytes of the state that was fingerprinted may call the file binary: a file being
        // rewritten in place holds NUL bytes for a moment.
        Err(_) if !unchanged(file, fingerprint) => Ok(false),
        Err(why) => Err(ProviderError::NotText { path: target.display.clone(), why }),
    }
}

/// Refuses anything but a regular file, judged on the descriptor's own metadata.
pub(super) fn regular(target: &Resolved, meta: &Metadata) -> Result<(), ProviderError> {
    if meta.is_dir() {
        return Err(ProviderError::IsDirectory { path: target.display.clone() });
    }
    if !meta.is_file() {
        return Err(ProviderError::NotRegularFile { path: target.display.clone() });
    }
    Ok(())
}

/// Maps `len` bytes of `file`, or `None` when it cannot be mapped (the guard is not installed,
/// or `mmap` failed: out of address space, a filesystem without mmap support). A failed `mmap`
/// is not the read's failure: the file is then read with positional reads, as ripgrep's searcher
/// falls back, and the first failure is logged (once per daemon, not once per read).
fn map_or_degrade(file: &File, len: u64) -> Option<Mapped> {
    static LOGGED: std::sync::Once = std::sync::Once::new();
    #[cfg(feature = "failpoints")]
    fail::fail_point!("provider::map", |_| {
        LOGGED.call_once(|| {
            tracing::warn!("mmap failed (fail point); reading large files with positional reads")
        });
        None
    });
    match Mapped::map(file, len) {
        Ok(mapped) => mapped,
        Err(err) => {
            LOGGED.call_once(|| {
                tracing::warn!(%err, len, "mmap failed; reading large files with positional reads instead");
            });
            None
        }
    }
}

//! The journal's log: segment files `log-<20 digits>` (mode 0600, numbered in the order they
//! were begun), each starting with the format line [`HEADER`], then one JSON record a line,
//! appended with a single `write` each. A change is two records: `begin` (written, and synced
//! when the daemon syncs, before the change is renamed into place) and `end` (whether it
//! landed). A record that lost its end in a crash is settled on the next start by looking at
//! the file. `drop` records say which oldest entries the caps removed. Loading drops a torn tail
//! (a last line without its newline, or one that does not parse) and truncates the file there;
//! a bad line before good ones is skipped. A segment of another format version stops the
//! journal ([`LogError::Format`]); a file named `log-*` that is no segment of this journal (a
//! garbage header, another name, a link) is logged and left alone. Every file is opened beneath
//! the journal folder's handle, never through a link (see [`files`](super::files)).

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{FileType, Mode, OFlags};

use filectx_protocol::JournalOperation;
use serde::{Deserialize, Serialize};

/// The first line of every segment: the format and its version.
pub(super) const HEADER: &str = "{\"format\":\"filectx-journal\",\"version\":1}\n";
/// The format version this daemon reads and writes.
const FORMAT: u64 = 1;
/// Largest and smallest size past which a segment is followed by a new one (so that whole old
/// segments can go): a sixteenth of the journal's byte cap, within these.
const MAX_SEGMENT_BYTES: u64 = 4 * 1024 * 1024;
const MIN_SEGMENT_BYTES: u64 = 64 * 1024;
/// Bytes of a segment's start read to judge its header.
const HEADER_PEEK: usize = 256;

/// The size past which a segment of a journal capped at `max_bytes` is followed by a new one.
pub(super) fn segment_bytes(max_bytes: u64) -> u64 {
    (max_bytes / 16).clamp(MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES)
}

/// One entry as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Stored {
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time: u64,
    /// The canonical path (when it is UTF-8; else `path_hex`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The path's bytes in hex, for a path that is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_hex: Option<String>,
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub op: JournalOperation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// The size of the version before, when its bytes are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_size: Option<u64>,
    /// The size of the version after, when its bytes are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_size: Option<u64>,
    /// The file's hard links at the version before (absent in older logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_links: Option<u64>,
    /// The file's hard links at the version after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_links: Option<u64>,
    /// The file's permission bits before the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}

/// A line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "lowercase")]
pub(super) enum Record {
    /// A change about to land.
    Begin(Stored),
    /// The change begun as `seq` landed, or did not.
    End { seq: u64, landed: bool },
    /// A change recorded whole at once (an outside change).
    Entry(Stored),
    /// Every entry up to `upto` was dropped by the caps.
    Drop { upto: u64 },
}

/// A segment file.
#[derive(Debug)]
struct Segment {
    name: String,
    /// The largest seq any of its records names.
    last_seq: u64,
    bytes: u64,
}

/// The log's segments, the last one open for appending.
#[derive(Debug)]
pub(super) struct Log {
    /// The journal's folder.
    dir: Arc<OwnedFd>,
    fsync: bool,
    /// A segment past this many bytes is followed by a new one.
    segment_bytes: u64,
    segments: Vec<Segment>,
    /// The highest number a segment's name uses, those left alone included: a new segment's
    /// is higher.
    highest_name: u64,
    file: Option<File>,
    /// Records put off until the next append (the ends of changes), written with it in one
    /// `write`: an end lost in a crash is settled by looking at the file.
    deferred: Vec<u8>,
    /// The largest seq the deferred records name.
    deferred_seq: u64,
    /// The daemon's private files, told of each new segment.
    private: Arc<crate::provider::private::Private>,
}

/// What loading read: the records in order, and what it had to repair.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    pub records: Vec<Record>,
    /// Bytes of torn tails dropped.
    pub torn_bytes: u64,
    /// Lines skipped that did not parse (not at the tail).
    pub bad_lines: usize,
    /// Files named `log-*` left alone: not segments of this journal.
    pub strangers: usize,
}

/// Why a log cannot be used.
#[derive(Debug, thiserror::Error)]
pub(super) enum LogError {
    /// A segment of another format version (a newer daemon's).
    #[error(
        "{path} is journal format {found}, and this daemon reads format {FORMAT}: move the journal aside or upgrade filectxd"
    )]
    Format { path: PathBuf, found: String },
    /// The filesystem failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What a file named `log-*` is.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// A segment of this journal, numbered so.
    Segment(u64),
    /// Left alone, and why.
    Stranger(&'static str),
    /// A segment torn inside its header (a crash while it was begun): nothing in it.
    Empty(u64),
}

fn segment_name(number: u64) -> String {
    format!("log-{number:020}")
}

/// The number of a segment's name: `log-` and 20 digits.
fn number_of(name: &[u8]) -> Option<u64> {
    let digits = name.strip_prefix(b"log-")?;
    if digits.len() != 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn seq_of(record: &Record) -> u64 {
    match record {
        Record::Begin(stored) | Record::Entry(stored) => stored.seq,
        Record::End { seq, .. } => *seq,
        Record::Drop { upto } => *upto,
    }
}

/// The files named `log-*` of the journal folder `dir`, in name order, each with what it is;
/// a segment of another format version is [`LogError::Format`]. Reads only their starts.
fn survey(dir: &OwnedFd, path: &Path) -> Result<Vec<(String, Kind)>, LogError> {
    use std::io::Read as _;
    let mut found = Vec::new();
    for (name, kind) in super::files::entries(dir)? {
        if !name.starts_with(b"log-") {
            continue;
        }
        let shown = String::from_utf8_lossy(&name).into_owned();
        let Some(number) = number_of(&name) else {
            found.push((shown, Kind::Stranger("its name is not log- and 20 digits")));
            continue;
        };
        if kind != FileType::RegularFile {
            found.push((shown, Kind::Stranger("it is not a regular file (a link is never followed)")));
            continue;
        }
        let Some(file) = super::files::open_regular(dir, OsStr::from_bytes(&name))? else {
            found.push((shown, Kind::Stranger("it is not a regular file (a link is never followed)")));
            continue;
        };
        let mut start = Vec::with_capacity(HEADER_PEEK);
        file.take(HEADER_PEEK as u64).read_to_end(&mut start)?;
        let kind = if start.starts_with(HEADER.as_bytes()) {
            Kind::Segment(number)
        } else if HEADER.as_bytes().starts_with(&start) {
            Kind::Empty(number)
        } else {
            let first = start.split(|&b| b == b'\n').next().unwrap_or_default();
            match serde_json::from_slice::<serde_json::Value>(first) {
                Ok(header) if header.get("format").and_then(|f| f.as_str()) == Some("filectx-journal") => {
                    let found =
                        header.get("version").map_or_else(|| "unknown".to_owned(), ToString::to_string);
                    return Err(LogError::Format { path: path.join(&shown), found });
                }
                _ => Kind::Stranger("its first line is not a journal's header"),
            }
        };
        found.push((shown, kind));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// Checks the segments of the journal folder `dir` (at `path`) without loading them: a segment
/// of another format version is [`LogError::Format`] (the journal must not be used).
pub(super) fn check(dir: &OwnedFd, path: &Path) -> Result<(), LogError> {
    survey(dir, path).map(drop)
}

impl Log {
    /// Reads every segment of the journal folder `dir` (at `path`), repairing torn tails.
    pub(super) fn load(
        dir: Arc<OwnedFd>,
        path: &Path,
        fsync: bool,
        segment_bytes: u64,
        private: Arc<crate::provider::private::Private>,
    ) -> Result<(Self, Loaded), LogError> {
        let mut loaded = Loaded::default();
        let mut segments = Vec::new();
        let mut highest_name = 0;
        for (name, kind) in survey(&dir, path)? {
            let number = match kind {
                Kind::Stranger(why) => {
                    tracing::warn!(file = %path.join(&name).display(), why, "a file in the journal's folder is no segment of it: left alone");
                    loaded.strangers += 1;
                    if let Some(number) = number_of(name.as_bytes()) {
                        highest_name = highest_name.max(number);
                    }
                    continue;
                }
                Kind::Empty(_) => {
                    let Some(file) = super::files::open_regular(&*dir, OsStr::new(&name))? else { continue };
                    loaded.torn_bytes += file.metadata()?.len();
                    super::files::remove(&*dir, OsStr::new(&name), &private)?;
                    continue;
                }
                Kind::Segment(number) => number,
            };
            highest_name = highest_name.max(number);
            let file = super::files::open_regular(&*dir, OsStr::new(&name))?
                .ok_or_else(|| std::io::Error::other(format!("{name} went away while loaded")))?;
            if let Ok(meta) = file.metadata() {
                use std::os::unix::fs::MetadataExt as _;
                private.created(meta.dev(), meta.ino());
            }
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut &file, &mut text)?;
            let header_end = HEADER.len();
            let mut last_seq = 0;
            let mut at = header_end;
            let mut good_end = header_end;
            let mut pending_bad = 0;
            while at < text.len() {
                let Some(len) = text[at..].iter().position(|&b| b == b'\n') else { break };
                let line = &text[at..at + len];
                match serde_json::from_slice::<Record>(line) {
                    Ok(record) => {
                        last_seq = last_seq.max(seq_of(&record));
                        loaded.records.push(record);
                        loaded.bad_lines += pending_bad;
                        pending_bad = 0;
                        good_end = at + len + 1;
                    }
                    Err(_) => pending_bad += 1,
                }
                at += len + 1;
            }
            if good_end < text.len() {
                loaded.torn_bytes += (text.len() - good_end) as u64;
                let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let out = File::from(
                    rustix::fs::openat(&*dir, name.as_str(), flags, Mode::empty())
                        .map_err(std::io::Error::from)?,
                );
                out.set_len(good_end as u64)?;
                if fsync {
                    out.sync_data()?;
                }
            }
            segments.push(Segment { name, last_seq, bytes: good_end as u64 });
        }
        let log = Self {
            dir,
            fsync,
            segment_bytes,
            segments,
            highest_name,
            file: None,
            deferred: Vec::new(),
            deferred_seq: 0,
            private,
        };
        Ok((log, loaded))
    }

    /// Bytes of every segment.
    pub(super) fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Bytes of the segments [`Log::drop_upto`] would keep for `upto`.
    pub(super) fn bytes_after(&self, upto: u64) -> u64 {
        let gone = self.droppable(upto);
        self.segments[gone..].iter().map(|s| s.bytes).sum()
    }

    /// How many leading segments (never the last) name only entries up to `upto`.
    fn droppable(&self, upto: u64) -> usize {
        let kept_last = self.segments.len().saturating_sub(1);
        self.segments[..kept_last].iter().take_while(|s| s.last_seq <= upto).count()
    }

    /// Appends `record` in one write (synced when `sync` and the daemon syncs); a failed write is
    /// cut off again, so that no torn line stays before the next one.
    pub(super) fn append(&mut self, record: &Record, sync: bool) -> std::io::Result<()> {
        let seq = seq_of(record).max(self.deferred_seq);
        let mut line = std::mem::take(&mut self.deferred);
        self.deferred_seq = 0;
        serde_json::to_writer(&mut line, record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let rotate = self.segments.last().is_none_or(|s| s.bytes >= self.segment_bytes);
        if rotate || self.file.is_none() {
            self.open_tail(rotate, seq)?;
        }
        let (Some(file), Some(segment)) = (self.file.as_mut(), self.segments.last_mut()) else {
            return Err(std::io::Error::other("the journal's log is not open"));
        };
        if let Err(e) = file.write_all(&line) {
            let _ = file.set_len(segment.bytes);
            return Err(e);
        }
        segment.bytes += line.len() as u64;
        segment.last_seq = segment.last_seq.max(seq);
        if sync && self.fsync {
            file.sync_data()?;
        }
        Ok(())
    }

    /// Puts `record` off until the next append (or [`Log::flush`]).
    pub(super) fn defer(&mut self, record: &Record) {
        if serde_json::to_writer(&mut self.deferred, record).is_ok() {
            self.deferred.push(b'\n');
            self.deferred_seq = self.deferred_seq.max(seq_of(record));
        }
    }

    /// Writes what was put off.
    pub(super) fn flush(&mut self) -> std::io::Result<()> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let (Some(file), Some(segment)) = (self.file.as_mut(), self.segments.last_mut()) else {
            return Ok(());
        };
        let lines = std::mem::take(&mut self.deferred);
        if let Err(e) = file.write_all(&lines) {
            let _ = file.set_len(segment.bytes);
            return Err(e);
        }
        segment.bytes += lines.len() as u64;
        segment.last_seq = segment.last_seq.max(self.deferred_seq);
        self.deferred_seq = 0;
        Ok(())
    }

    /// Opens the last segment for appending, or a new one (numbered past every `log-` name in
    /// the folder, `seq` at least).
    fn open_tail(&mut self, new: bool, seq: u64) -> std::io::Result<()> {
        let append = OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if !new && let Some(segment) = self.segments.last() {
            let fd = rustix::fs::openat(&*self.dir, segment.name.as_str(), append, Mode::empty())?;
            self.file = Some(File::from(fd));
            return Ok(());
        }
        let create = append | OFlags::CREATE | OFlags::EXCL;
        let mut number = seq.max(self.highest_name + 1);
        let (name, mut file) = loop {
            let name = segment_name(number);
            match rustix::fs::openat(&*self.dir, name.as_str(), create, Mode::from_raw_mode(0o600)) {
                Ok(fd) => break (name, File::from(fd)),
                Err(rustix::io::Errno::EXIST) => number += 1,
                Err(e) => return Err(e.into()),
            }
        };
        self.highest_name = number;
        if let Ok(stat) = rustix::fs::fstat(&file) {
            self.private.created(stat.st_dev, stat.st_ino);
        }
        if let Err(e) = file.write_all(HEADER.as_bytes()) {
            let _ = super::files::remove(&*self.dir, OsStr::new(&name), &self.private);
            return Err(e);
        }
        if self.fsync {
            file.sync_data()?;
            rustix::fs::fsync(self.dir.as_fd())?;
        }
        self.segments.push(Segment { name, last_seq: seq, bytes: HEADER.len() as u64 });
        self.file = Some(file);
        Ok(())
    }

    /// Removes the segments (never the last) whose records all name entries up to `upto`.
    pub(super) fn drop_upto(&mut self, upto: u64) {
        let gone = self.droppable(upto);
        for segment in self.segments.drain(..gone) {
            if let Err(e) = super::files::remove(&*self.dir, OsStr::new(&segment.name), &self.private) {
                tracing::warn!(segment = segment.name, %e, "cannot remove an old journal segment");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_and_sizes() {
        assert_eq!(number_of(b"log-00000000000000000042"), Some(42));
        for stranger in
            [&b"log-42"[..], b"log-evil", b"log-0000000000000000004x", b"log-000000000000000000042"]
        {
            assert_eq!(number_of(stranger), None, "{}", String::from_utf8_lossy(stranger));
        }
        assert_eq!(segment_bytes(1 << 30), MAX_SEGMENT_BYTES);
        assert_eq!(segment_bytes(1 << 20), MIN_SEGMENT_BYTES);
        assert_eq!(segment_bytes(8 << 20), 512 * 1024);
    }
}

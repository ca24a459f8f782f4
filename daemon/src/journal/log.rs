//! The journal's log: segment files `log-<first seq, 20 digits>` (mode 0600), each starting with
//! the format line [`HEADER`], then one JSON record a line, appended with a single `write` each.
//! A change is two records: `begin` (written, and synced when the daemon syncs, before the
//! change is renamed into place) and `end` (whether it landed). A record that lost its end in a
//! crash is settled on the next start by looking at the file. `drop` records say which oldest
//! entries the caps removed. Loading drops a torn tail (a last line without its newline, or one
//! that does not parse) and truncates the file there; a bad line before good ones is skipped.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use filectx_protocol::JournalOperation;
use serde::{Deserialize, Serialize};

/// The first line of every segment: the format and its version.
pub(super) const HEADER: &str = "{\"format\":\"filectx-journal\",\"version\":1}\n";
/// The format version this daemon reads and writes.
const FORMAT: u64 = 1;
/// A segment past this many bytes is followed by a new one (so that whole old segments can go).
const SEGMENT_BYTES: u64 = 4 * 1024 * 1024;

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
    path: PathBuf,
    /// The largest seq any of its records names.
    last_seq: u64,
    bytes: u64,
}

/// The log's segments, the last one open for appending.
#[derive(Debug)]
pub(super) struct Log {
    dir: PathBuf,
    fsync: bool,
    segments: Vec<Segment>,
    file: Option<File>,
    /// Records put off until the next append (the ends of changes), written with it in one
    /// `write`: an end lost in a crash is settled by looking at the file.
    deferred: Vec<u8>,
    /// The largest seq the deferred records name.
    deferred_seq: u64,
}

/// What loading read: the records in order, and what it had to repair.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    pub records: Vec<Record>,
    /// Bytes of torn tails dropped.
    pub torn_bytes: u64,
    /// Lines skipped that did not parse (not at the tail).
    pub bad_lines: usize,
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

fn segment_name(first_seq: u64) -> String {
    format!("log-{first_seq:020}")
}

fn seq_of(record: &Record) -> u64 {
    match record {
        Record::Begin(stored) | Record::Entry(stored) => stored.seq,
        Record::End { seq, .. } => *seq,
        Record::Drop { upto } => *upto,
    }
}

impl Log {
    /// Reads every segment under `dir`, repairing torn tails.
    pub(super) fn load(dir: &Path, fsync: bool) -> Result<(Self, Loaded), LogError> {
        let mut names: Vec<(PathBuf, String)> = std::fs::read_dir(dir)?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_owned();
                name.starts_with("log-").then(|| (e.path(), name))
            })
            .collect();
        names.sort_by(|a, b| a.1.cmp(&b.1));
        let mut loaded = Loaded::default();
        let mut segments = Vec::new();
        for (path, _) in names {
            let mut text = std::fs::read(&path)?;
            if !text.starts_with(HEADER.as_bytes()) {
                if HEADER.as_bytes().starts_with(&text) {
                    // A segment torn inside its own header: nothing in it.
                    loaded.torn_bytes += text.len() as u64;
                    std::fs::remove_file(&path)?;
                    continue;
                }
                let first = text.split(|&b| b == b'\n').next().unwrap_or_default();
                let found = serde_json::from_slice::<serde_json::Value>(first)
                    .ok()
                    .and_then(|v| v.get("version").map(ToString::to_string))
                    .unwrap_or_else(|| "unknown".to_owned());
                return Err(LogError::Format { path, found });
            }
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
                text.truncate(good_end);
                let file = std::fs::OpenOptions::new().write(true).open(&path)?;
                file.set_len(good_end as u64)?;
                if fsync {
                    file.sync_data()?;
                }
            }
            segments.push(Segment { path, last_seq, bytes: good_end as u64 });
        }
        Ok((
            Self { dir: dir.to_owned(), fsync, segments, file: None, deferred: Vec::new(), deferred_seq: 0 },
            loaded,
        ))
    }

    /// Bytes of every segment.
    pub(super) fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Appends `record` in one write (synced when `sync` and the daemon syncs); a failed write is
    /// cut off again, so that no torn line stays before the next one.
    pub(super) fn append(&mut self, record: &Record, sync: bool) -> std::io::Result<()> {
        let seq = seq_of(record).max(self.deferred_seq);
        let mut line = std::mem::take(&mut self.deferred);
        self.deferred_seq = 0;
        serde_json::to_writer(&mut line, record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let rotate = self.segments.last().is_none_or(|s| s.bytes >= SEGMENT_BYTES);
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

    /// Opens the last segment for appending, or a new one starting at `seq`.
    fn open_tail(&mut self, new: bool, seq: u64) -> std::io::Result<()> {
        if !new && let Some(segment) = self.segments.last() {
            self.file = Some(std::fs::OpenOptions::new().append(true).open(&segment.path)?);
            return Ok(());
        }
        let path = self.dir.join(segment_name(seq));
        let mut file = std::fs::OpenOptions::new().append(true).create_new(true).mode(0o600).open(&path)?;
        if let Err(e) = file.write_all(HEADER.as_bytes()) {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        if self.fsync {
            file.sync_data()?;
            File::open(&self.dir)?.sync_all()?;
        }
        self.segments.push(Segment { path, last_seq: seq, bytes: HEADER.len() as u64 });
        self.file = Some(file);
        Ok(())
    }

    /// Removes the segments (never the last) whose records all name entries up to `upto`.
    pub(super) fn drop_upto(&mut self, upto: u64) {
        while self.segments.len() > 1 && self.segments[0].last_seq <= upto {
            let segment = self.segments.remove(0);
            if let Err(e) = std::fs::remove_file(&segment.path)
                && e.kind() != ErrorKind::NotFound
            {
                tracing::warn!(path = %segment.path.display(), %e, "cannot remove an old journal segment");
            }
        }
    }
}

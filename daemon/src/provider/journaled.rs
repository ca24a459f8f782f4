//! What the provider tells a journal about each change it makes, under the file's locks and
//! before the new content is moved into place: who makes it ([`Attribution`], set on the
//! resolved target by the layer that knows the session), what it is, the versions before and
//! after and their bytes. The journal lives above the provider and registers itself as a
//! [`Recorder`]; with none registered (or a target no layer attributed) nothing is recorded.
//!
//! Every change that landed also goes to the [`Feed`] (the language servers), once it landed,
//! whoever made it and whether or not a journal records it: the same seam, one way down.

use std::path::Path;
use std::sync::Arc;

use super::version::Version;

/// Who makes changes: a session, its client, and the owner inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    /// The session's id.
    pub session: Arc<str>,
    /// Its client's name (`clientInfo.name`).
    pub client: Option<Arc<str>>,
    /// The owner, when one was named.
    pub owner: Option<Arc<str>>,
}

/// Who makes one change, and whether it is a restore of an earlier content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    /// Who.
    pub author: Arc<Author>,
    /// Whether the change puts back an earlier content (`journal/restore`, the `undo` tool).
    pub restore: bool,
}

/// What a change does, as the provider knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// A write that creates the file.
    Create,
    /// A write that replaces an existing file whole.
    Write,
    /// An edit of an existing file.
    Edit,
    /// The file is removed.
    Delete,
}

/// A change about to land.
#[derive(Debug, Clone, Copy)]
pub struct ChangeToRecord<'a> {
    /// The file, canonical.
    pub path: &'a Path,
    /// Who makes it.
    pub by: &'a Attribution,
    /// What it does.
    pub kind: ChangeKind,
    /// The version replaced (`None`: no file there).
    pub before: Option<Version>,
    /// Its bytes, when at most the recorder's [`Recorder::max_file_bytes`].
    pub before_bytes: Option<&'a [u8]>,
    /// The version written (`None`: the file is removed).
    pub after: Option<Version>,
    /// Its bytes, when at most the recorder's cap.
    pub after_bytes: Option<&'a [u8]>,
    /// The file's hard links before and after (each 0 where there is no file).
    pub links: (u64, u64),
    /// The file's permission bits before the change (`None`: no file there).
    pub mode: Option<u32>,
}

/// A journal of changes, as the provider sees one.
pub trait Recorder: Send + Sync + std::fmt::Debug {
    /// The largest version whose bytes the recorder keeps; a change of a larger file is recorded
    /// without them (and cannot be restored).
    fn max_file_bytes(&self) -> u64;
    /// Records `change` before it lands: the bytes before it are kept (durably, when the
    /// provider syncs) before this returns. Returns the entry's sequence number, or `None`
    /// when the recorder records nothing (a journal that could not be loaded). An error means
    /// the journal cannot keep them, and the change is not made.
    fn begin(&self, change: &ChangeToRecord<'_>) -> std::io::Result<Option<u64>>;
    /// The change begun as `seq` landed (`true`) or did not (`false`: nothing was written).
    fn end(&self, seq: u64, landed: bool);
}

/// A change that landed, as the [`Feed`] is told of it.
#[derive(Debug, Clone, Copy)]
pub struct Landing<'a> {
    /// The root of the session that made it.
    pub root: &'a super::Root,
    /// The file, canonical.
    pub path: &'a Path,
    /// The session that made it, when a layer said.
    pub session: Option<&'a str>,
    /// Whether it created the file.
    pub created: bool,
    /// The bytes it replaced, when read and within what the feed takes.
    pub before: Option<&'a [u8]>,
    /// The version and bytes it wrote (`None`: it removed the file; bytes over what the feed
    /// takes are not given).
    pub after: Option<(Version, Option<&'a [u8]>)>,
}

/// Where every change that landed goes besides the journal: the language servers.
pub trait Feed: Send + Sync + std::fmt::Debug {
    /// The most bytes of `path` it takes; `None`: it does not want changes of `path`.
    fn wants(&self, path: &Path) -> Option<u64>;
    /// A change landed (called once it did, still under the file's locks: it must not block).
    fn landed(&self, landing: Landing<'_>);
}

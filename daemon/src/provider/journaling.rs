//! The provider's side of the journal: a change of an attributed target is begun in the
//! registered [`Recorder`] under the file's locks, with the bytes it replaces (read here when
//! the caller has not), before anything is moved into place, and ended once it landed or failed.

use std::fs::File;
use std::sync::Arc;

use super::error::io_error;
use super::journaled::{ChangeKind, ChangeToRecord, Feed, Landing, Recorder};
use super::lock::LockedFile;
use super::read::read_all_at;
use super::{Provider, ProviderError, Resolved, Version};

/// What the provider knows of the content a change replaces.
#[derive(Clone, Copy)]
pub(super) enum Old<'a> {
    /// No file there.
    Absent,
    /// Its version and bytes, already read (an edit reads them whole).
    Known(Version, &'a [u8]),
    /// The locked file: read here when the recorder keeps files of its size.
    Locked(&'a LockedFile),
}

/// A change begun in the journal (when one records it) and told to the feed once it landed
/// (when one wants it); ended in the journal when it is dropped, landed only when marked so.
pub(super) struct Begun<'a> {
    /// The journal and the entry's seq.
    journal: Option<(Arc<dyn Recorder>, u64)>,
    /// The feed and what it is told.
    fed: Option<(Arc<dyn Feed>, Fed<'a>)>,
    landed: bool,
    /// The version written (hashed once, here).
    after: Option<Version>,
}

/// What the feed is told of a change.
struct Fed<'a> {
    root: super::Root,
    path: &'a std::path::Path,
    session: Option<Arc<str>>,
    created: bool,
    before: Option<std::borrow::Cow<'a, [u8]>>,
    after: Option<&'a [u8]>,
}

impl Begun<'_> {
    /// The change landed: the version it wrote, and its journal entry's id (when journaled). The
    /// feed is told now.
    pub(super) fn landed(mut self) -> (Option<Version>, Option<u64>) {
        self.landed = true;
        if let Some((feed, fed)) = &self.fed {
            feed.landed(Landing {
                root: &fed.root,
                path: fed.path,
                session: fed.session.as_deref(),
                created: fed.created,
                before: fed.before.as_deref(),
                after: self.after.map(|version| (version, fed.after)),
            });
        }
        (self.after, self.journal.as_ref().map(|(_, seq)| *seq))
    }
}

impl Drop for Begun<'_> {
    fn drop(&mut self) {
        if let Some((recorder, seq)) = &self.journal {
            recorder.end(*seq, self.landed);
        }
    }
}

/// The bytes of `file` (of `size` bytes) and their version.
fn read_whole(target: &Resolved, file: &File, size: u64) -> Result<(Version, Vec<u8>), ProviderError> {
    let bytes = read_all_at(file, size).map_err(|e| io_error(&target.display, "read", e))?;
    Ok((Version::of(&bytes), bytes))
}

impl Provider {
    /// Registers the journal every attributed change is recorded in (once; later calls are
    /// ignored).
    pub fn set_recorder(&self, recorder: Arc<dyn Recorder>) {
        let _ = self.recorder.set(recorder);
    }

    /// Registers where every change that lands goes besides the journal (once; later calls
    /// are ignored).
    pub fn set_feed(&self, feed: Arc<dyn Feed>) {
        let _ = self.feed.set(feed);
    }

    /// Begins a change of `target` (under its locks, before anything is moved into place): its
    /// journal entry (when a journal records `target`'s changes) and what the feed will be told
    /// once it landed (when the feed wants `target`). `None` when neither does. `new` is what
    /// will be written (`None`: the file is removed); `locked` the file it replaces, as locked
    /// (`None`: none).
    pub(super) fn journal_begin<'a>(
        &self,
        target: &'a Resolved,
        kind: ChangeKind,
        old: Old<'a>,
        locked: Option<&std::fs::Metadata>,
        new: Option<&'a [u8]>,
    ) -> Result<Option<Begun<'a>>, ProviderError> {
        use std::os::unix::fs::MetadataExt as _;
        let journal = self.recorder.get().zip(target.by.as_ref());
        let feed = self.feed.get().and_then(|feed| feed.wants(&target.path).map(|max| (feed, max)));
        if journal.is_none() && feed.is_none() {
            return Ok(None);
        }
        let keeps = journal.map_or(0, |(recorder, _)| recorder.max_file_bytes());
        let wants = feed.map_or(0, |(_, max)| max);
        let max = keeps.max(wants);
        let (before, before_bytes): (Option<Version>, Option<std::borrow::Cow<'a, [u8]>>) = match old {
            Old::Absent => (None, None),
            Old::Known(version, bytes) => {
                (Some(version), (bytes.len() as u64 <= max).then_some(std::borrow::Cow::Borrowed(bytes)))
            }
            Old::Locked(locked) if locked.meta.len() <= max => {
                let (version, bytes) = read_whole(target, &locked.file, locked.meta.len())?;
                (Some(version), Some(std::borrow::Cow::Owned(bytes)))
            }
            Old::Locked(locked) => (Some(self.version_of(target, &locked.file, &locked.meta)?), None),
        };
        let after = new.map(Version::of);
        let seq = match journal {
            None => None,
            Some((recorder, by)) => {
                let kept = |bytes: &[u8]| bytes.len() as u64 <= keeps;
                let before_links = locked.map_or(0, std::os::unix::fs::MetadataExt::nlink);
                // A file of several links is rewritten in place (it keeps them); else a new inode lands.
                let after_links = match new {
                    None => 0,
                    Some(_) if before_links > 1 => before_links,
                    Some(_) => 1,
                };
                let change = ChangeToRecord {
                    path: &target.path,
                    by,
                    kind,
                    before,
                    before_bytes: before_bytes.as_deref().filter(|b| kept(b)),
                    after,
                    after_bytes: new.filter(|b| kept(b)),
                    links: (before_links, after_links),
                    mode: locked.map(|meta| meta.mode() & 0o7777),
                };
                let begun = recorder.begin(&change).map_err(|e| ProviderError::Io {
                    path: target.display.clone(),
                    op: "journal the change to",
                    source: std::io::Error::new(
                        e.kind(),
                        format!(
                            "{e}; nothing was written: free space where the journal lives, or run filectxd \
                             with journal = false"
                        ),
                    ),
                })?;
                begun.map(|seq| (recorder.clone(), seq))
            }
        };
        let fed = feed.map(|(feed, max)| {
            let fits = |bytes: &[u8]| bytes.len() as u64 <= max;
            let fed = Fed {
                root: target.dir.clone(),
                path: &target.path,
                session: target.by.as_ref().map(|by| by.author.session.clone()),
                created: matches!(old, Old::Absent),
                before: before_bytes.filter(|b| fits(b)),
                after: new.filter(|b| fits(b)),
            };
            (feed.clone(), fed)
        });
        Ok(Some(Begun { journal: seq, fed, landed: false, after }))
    }
}

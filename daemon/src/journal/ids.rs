//! Entry ids, never reused: the journal hands out ids below a ceiling kept in the file `ids`
//! of its folder (written whole, synced when the daemon syncs), raised by [`BLOCK`] before the
//! id that reaches it is handed out. The log cannot lower it: a torn tail or a removed segment
//! loses records, not the ceiling, so after a crash the next id is past every id ever shown. A
//! clean close writes the next id itself, so ids go on without a gap; a crash leaves at most
//! [`BLOCK`] unused. Removing the whole journal folder starts ids at 1 again.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;

use super::files;
use crate::provider::private::Private;

/// Ids reserved at once: one synced write of the `ids` file per this many changes.
pub(super) const BLOCK: u64 = 1024;

/// The file's name.
const FILE: &str = "ids";

/// The ceiling of the ids handed out.
#[derive(Debug)]
pub(super) struct Ids {
    /// Every id handed out is below it (durably, when the daemon syncs).
    ceiling: u64,
}

impl Ids {
    /// The ceiling the journal folder `dir` keeps (1 when it keeps none). A file that does not
    /// hold a number is logged and read as none: the log's own ids decide then.
    pub(super) fn load(dir: &OwnedFd) -> std::io::Result<Self> {
        let ceiling = match files::read_regular(dir, OsStr::new(FILE), 64)? {
            None => 1,
            Some(text) => match std::str::from_utf8(&text).ok().and_then(|t| t.trim().parse::<u64>().ok()) {
                Some(ceiling) => ceiling,
                None => {
                    tracing::warn!("the journal's ids file holds no number: ids go on from its log");
                    1
                }
            },
        };
        Ok(Self { ceiling })
    }

    /// The ceiling read.
    pub(super) fn ceiling(&self) -> u64 {
        self.ceiling
    }

    /// Makes sure `next` may be handed out: past the ceiling, a new one is written first.
    pub(super) fn reserve(
        &mut self,
        dir: &OwnedFd,
        next: u64,
        fsync: bool,
        private: &Private,
    ) -> std::io::Result<()> {
        if next < self.ceiling {
            return Ok(());
        }
        let ceiling = next.saturating_add(BLOCK);
        files::write_whole(dir, OsStr::new(FILE), format!("{ceiling}\n").as_bytes(), fsync, private)?;
        self.ceiling = ceiling;
        Ok(())
    }

    /// At a clean close: the next id becomes the ceiling, so that ids go on without a gap.
    pub(super) fn close(&mut self, dir: &OwnedFd, next: u64, fsync: bool, private: &Private) {
        if next >= self.ceiling {
            return;
        }
        match files::write_whole(dir, OsStr::new(FILE), format!("{next}\n").as_bytes(), fsync, private) {
            Ok(()) => self.ceiling = next,
            Err(e) => tracing::warn!(%e, "cannot record the journal's next id (the next start skips a few)"),
        }
    }
}

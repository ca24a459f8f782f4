//! The journal methods of [`Client`]: `journal/list` (the changes recorded, newest first, paged),
//! `journal/diff` (one entry's unified diff) and `journal/restore` (put back the content before
//! an entry, guarded like any write). All need the daemon's `journal` feature.

use filectx_protocol::{
    JournalDiffParams, JournalDiffResult, JournalEntry, JournalListParams, JournalListResult,
    JournalRestoreParams, JournalRestoreResult, features, methods,
};

use crate::{Client, ClientError};

/// The largest page `journal/list` gives; [`Client::journal_list_all`] asks for pages of it.
pub const JOURNAL_MAX_PAGE: u32 = 1000;

impl Client {
    /// `journal/list`: the changes the daemon recorded, newest first, one page of them
    /// (`params.limit`, default 50, at most [`JOURNAL_MAX_PAGE`]); pass the answer's `cursor` as
    /// `params.cursor` for the next page (absent: there is none). Every filter is optional:
    /// `path` (a file, or a folder for every file beneath it; relative to the session's cwd),
    /// `session_id` (`"outside"` for the changes made outside the daemon), `owner`, `since`
    /// (milliseconds since the Unix epoch).
    ///
    /// Only changes to paths inside this session's roots that its deny rules let it read are
    /// listed, whoever made them. An entry's `entry` is its id for [`Client::journal_diff`] and
    /// [`Client::journal_restore`].
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when the daemon does not announce `journal` (its journal is
    /// off, `journal = false` or `--no-journal`, or it is an older filectxd); nothing is sent
    /// then. [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_OUTSIDE_ROOT` (a `path`
    /// outside the roots), `FS_PERMISSION_DENIED` or `FS_INVALID_ARGUMENT` (e.g. a cursor that is
    /// not one, a limit of 0); any error of [`Client::request`].
    pub async fn journal_list(&self, params: JournalListParams) -> Result<JournalListResult, ClientError> {
        self.require(features::JOURNAL)?;
        self.request(methods::JOURNAL_LIST, &params).await
    }

    /// [`Client::journal_list`] of every page: all the entries matching `params` (whose `cursor`
    /// is where to start, and `limit` the page size, default [`JOURNAL_MAX_PAGE`]), newest
    /// first.
    ///
    /// # Errors
    /// As [`Client::journal_list`].
    pub async fn journal_list_all(
        &self,
        mut params: JournalListParams,
    ) -> Result<Vec<JournalEntry>, ClientError> {
        params.limit = Some(params.limit.unwrap_or(JOURNAL_MAX_PAGE));
        let mut entries = Vec::new();
        loop {
            let page = self.journal_list(params.clone()).await?;
            let empty = page.entries.is_empty();
            entries.extend(page.entries);
            match page.cursor {
                // An empty page that still names a cursor would never end: stop there.
                Some(cursor) if !empty && params.cursor.as_ref() != Some(&cursor) => {
                    params.cursor = Some(cursor)
                }
                _ => return Ok(entries),
            }
        }
    }

    /// `journal/diff`: the unified diff of one entry, from the content before it to the content
    /// after it (headers `--- PATH (before)` and `+++ PATH (after)`, lines as `read` shows
    /// them); empty when no line differs. Cut at 200 lines or 16 KiB, then `truncated` is true.
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when the daemon does not announce `journal`;
    /// [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_NOT_FOUND` (no such entry, or
    /// one this session may not read: outside its roots or denied); any error of
    /// [`Client::request`].
    pub async fn journal_diff(&self, entry: &str) -> Result<JournalDiffResult, ClientError> {
        self.require(features::JOURNAL)?;
        self.request(methods::JOURNAL_DIFF, JournalDiffParams { entry: entry.to_owned() }).await
    }

    /// `journal/restore`: puts back the content the file had before the entry `params.entry`:
    /// only if the file is now at the entry's `after` version (absent when the entry removed
    /// it), unless `params.force`. Restoring a creation deletes the file (the result's `version`
    /// is then `None`); restoring a deletion recreates it. The restore is itself journaled: the
    /// result's `entry` is the new entry, which a later restore undoes in turn. It is guarded as
    /// any write of this session: its roots, deny rules, `readOnly` and any write gate.
    ///
    /// `params.owner` names the owner whose observation of the file the restore refreshes (a
    /// sub-agent sharing this session); absent, the session's default owner.
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when the daemon does not announce `journal`, or
    /// `params.owner` is set and it lacks `owners`; [`ClientError::Rpc`] whose
    /// [`ClientError::fs_code`] is `FS_STALE_VERSION` (the file changed since the entry: nothing
    /// was restored, and [`ClientError::stale_diff`] is the change from the entry's after to
    /// now, when it was small enough to send), `FS_NOT_FOUND` (no such entry, or one this
    /// session may not read), `FS_TOO_LARGE` (the entry is not restorable: its content was over
    /// the daemon's `journal_max_file_bytes` and was not kept), `FS_OUTSIDE_ROOT`,
    /// `FS_PERMISSION_DENIED` (a deny rule, a read-only session, or a gate's refusal: see
    /// [`ClientError::gate_refusal`]), `FS_BUSY` or `FS_IO`; any error of [`Client::request`].
    pub async fn journal_restore(
        &self,
        params: JournalRestoreParams,
    ) -> Result<JournalRestoreResult, ClientError> {
        self.require(features::JOURNAL)?;
        if params.owner.is_some() {
            self.require(features::OWNERS)?;
        }
        self.request(methods::JOURNAL_RESTORE, &params).await
    }
}

//! Handlers of the journal methods: `journal/list`, `journal/diff` and `journal/restore`. The
//! file context decides what a session may see and restore; these parse, page and convert.

use std::sync::Arc;

use filectx_protocol::methods::{JOURNAL_DIFF, JOURNAL_LIST, JOURNAL_RESTORE};
use filectx_protocol::{
    JournalDiffParams, JournalDiffResult, JournalEntry, JournalListParams, JournalListResult,
    JournalRestoreParams, JournalRestoreResult,
};
use jsonrpsee::Extensions;
use jsonrpsee::types::{ErrorObjectOwned, Params};

use super::files::{named_owner, wire};
use super::run::{Op, run};
use super::{ServerContext, parse_params};
use crate::journal::{Entry, Filter};

/// Entries in a page unless asked otherwise, and at most.
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 1000;

/// The wire form of an entry, its path shown as `display`.
pub fn entry_of(entry: Entry, display: String) -> JournalEntry {
    JournalEntry {
        entry: entry.seq.to_string(),
        seq: entry.seq,
        time: entry.time,
        path: entry.path.display().to_string(),
        display_path: display,
        session_id: entry.session.to_string(),
        client_name: entry.client.as_deref().map(str::to_owned),
        owner: entry.owner.as_deref().map(str::to_owned),
        operation: entry.operation,
        before: entry.before.map(|v| v.to_string()),
        after: entry.after.map(|v| v.to_string()),
        restorable: entry.restorable,
        added: entry.stat.map(|(added, _)| added),
        removed: entry.stat.map(|(_, removed)| removed),
    }
}

/// `journal/list`.
pub async fn journal_list(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<JournalListResult, ErrorObjectOwned> {
    let params: JournalListParams = match params.as_str() {
        None => JournalListParams::default(),
        Some(_) => parse_params(JOURNAL_LIST, &params)?,
    };
    let before_seq = match params.cursor.as_deref() {
        None => None,
        Some(cursor) => Some(cursor.parse::<u64>().map_err(|_| {
            super::error::invalid_params(format!(
                "{JOURNAL_LIST}: cursor {cursor:?} is not one this daemon gave"
            ))
        })?),
    };
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
    run(&ctx, &ext, Op::Journal, None, move |files, _, _| {
        let filter = Filter {
            path: None,
            session: params.session_id.as_deref(),
            owner: params.owner.as_deref(),
            since: params.since,
            before_seq,
        };
        let page =
            files.journal_list(params.path.as_deref(), filter, limit).map_err(ErrorObjectOwned::from)?;
        let entries = page.entries.into_iter().map(|(entry, display)| entry_of(entry, display)).collect();
        Ok(crate::context::Step::Done(JournalListResult {
            entries,
            cursor: page.more.map(|seq| seq.to_string()),
        }))
    })
    .await
}

/// `journal/diff`.
pub async fn journal_diff(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<JournalDiffResult, ErrorObjectOwned> {
    let params: JournalDiffParams = parse_params(JOURNAL_DIFF, &params)?;
    run(&ctx, &ext, Op::Journal, None, move |files, _, _| {
        let (diff, truncated) = files.journal_diff(&params.entry).map_err(ErrorObjectOwned::from)?;
        Ok(crate::context::Step::Done(JournalDiffResult { diff, truncated }))
    })
    .await
}

/// `journal/restore`.
pub async fn journal_restore(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<JournalRestoreResult, ErrorObjectOwned> {
    let params: JournalRestoreParams = parse_params(JOURNAL_RESTORE, &params)?;
    let owner = named_owner(&ext, params.owner.as_deref())?;
    let (mut result, path, version) = run(&ctx, &ext, Op::Restore, owner, move |files, _, how| {
        wire(files, files.restore(&params.entry, params.force, how), |view| {
            let result = JournalRestoreResult {
                entry: view.entry.map_or_else(String::new, |seq| seq.to_string()),
                display_path: view.display,
                version: view.version.map(|v| v.to_string()),
                diagnostics: None,
            };
            (result, view.path, view.version)
        })
    })
    .await?;
    if let Some(version) = version {
        result.diagnostics = super::diagnostics::after_change_report(&ctx, &ext, &path, version).await;
    }
    Ok(result)
}

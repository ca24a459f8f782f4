//! `filectx watch`: one line per `file/didChange` notice, re-reading each changed file so its
//! next change is notified too, until no watched file is left, stdout closes, or a signal.

use std::collections::HashSet;
use std::io::Write as _;
use std::ops::ControlFlow;

use anyhow::{Context as _, bail};
use filectx_client::terminal::escape_json;
use filectx_client::{Client, ClientError};
use filectx_protocol::{FileDidChange, FsErrorCode, methods};
use futures::StreamExt as _;
use serde_json::Value;
use tokio::signal::unix::{SignalKind, signal};

use super::observe::observe;
use super::render::render_change;

/// `watch` until no watched file is left, stdout closes, or SIGINT or SIGTERM comes; each ends
/// successfully, and `run` then closes the session politely.
pub(crate) async fn watch(client: &Client, paths: &[String], json: bool) -> anyhow::Result<()> {
    // Listening replaces the signals' default action (ending the process at once) for good.
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    tokio::select! {
        result = watch_changes(client, paths, json) => result,
        _ = interrupt.recv() => Ok(()),
        _ = terminate.recv() => Ok(()),
    }
}

/// Opens the `file/didChange` stream, reads one line of each file (recording its version), then
/// prints each notice as it comes; a changed file is read again, so that its next change is
/// notified too (the daemon notifies once per recorded version).
async fn watch_changes(client: &Client, paths: &[String], json: bool) -> anyhow::Result<()> {
    // First: notices that arrive before the stream is open are dropped.
    let mut notices = client.notifications(methods::FILE_DID_CHANGE).await?;
    // The watched files by canonical path, the key notices carry: PATHs naming one file count
    // once, and a notice for a file no longer watched is recognised (and ignored).
    let mut watched = HashSet::new();
    for path in paths {
        observe(client, path).await?;
        watched.insert(client.fs_resolve(path).await?.path);
    }
    while !watched.is_empty() {
        let Some(params) = notices.next().await else {
            if notices.lagged() {
                bail!("file/didChange notices came faster than they could be written, and some were lost");
            }
            return Err(client.disconnected().await.into());
        };
        let change: FileDidChange = serde_json::from_value(params.clone()).map_err(ClientError::Decode)?;
        // A file deleted earlier (which may notify again when it comes back as it was).
        if !watched.contains(&change.path) {
            continue;
        }
        if print_change(&change, &params, json)?.is_break() {
            return Ok(());
        }
        if change.version.is_none() {
            watched.remove(&change.path);
            continue;
        }
        match observe(client, &change.path).await {
            Ok(()) => {}
            // Gone (or no longer a regular file) before the read: no notice will come for it any
            // more, so it is reported as deleted now.
            Err(error)
                if matches!(error.fs_code(), Some(FsErrorCode::NotFound | FsErrorCode::NotRegularFile)) =>
            {
                watched.remove(&change.path);
                let deleted = FileDidChange { version: None, ..change };
                if print_change(&deleted, &serde_json::to_value(&deleted)?, json)?.is_break() {
                    return Ok(());
                }
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// Writes one notice to stdout and flushes: `params` as one line of JSON, or the readable line.
/// Breaks when stdout is closed (nobody reads any more). A blocking write, as in `cat`: while
/// stdout is full the socket is not read either, so notices pile up at the daemon, which bounds
/// them, rather than in this client.
fn print_change(change: &FileDidChange, params: &Value, json: bool) -> anyhow::Result<ControlFlow<()>> {
    let line = if json { format!("{}\n", escape_json(&params.to_string())) } else { render_change(change) };
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(line.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(ControlFlow::Continue(())),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(ControlFlow::Break(())),
        Err(error) => Err(anyhow::Error::new(error).context("cannot write to stdout")),
    }
}

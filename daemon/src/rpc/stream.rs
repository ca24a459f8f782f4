//! `fs/streamText`: a jsonrpsee subscription that delivers a file of any size as ordered
//! `fs/textChunk` notifications, all from one version (a [`Snapshot`]). A change mid-stream ends
//! it with an error item carrying `FS_STALE_VERSION`. The blocking producer hands chunks over a
//! channel of [`STREAM_BUFFER_CHUNKS`], and the next chunk is queued on the connection only when
//! fewer than that many messages wait to be written there, so a slow reader makes the daemon
//! hold a few chunks per stream, never the file.
//! Cancelling (`fs/streamCancel`) or disconnecting stops the producer.

use std::sync::Arc;

use filectx_protocol::tools::READ_LINE_LIMIT;
use filectx_protocol::{ChunkError, FsErrorCode, STREAM_CHUNK_LINES, StreamTextParams, TextChunk};
use jsonrpsee::Extensions;
use jsonrpsee::core::server::PendingSubscriptionSink;
use jsonrpsee::types::{ErrorObjectOwned, Params};
use tokio::sync::mpsc;

use super::error::fs_error;
use super::{ServerContext, internal, parse_params, session_of};
use crate::context::{Changed, Scope, Snapshot, WindowError};

/// Chunks produced ahead of the connection, per stream.
pub const STREAM_BUFFER_CHUNKS: usize = 4;

/// Opens the snapshot a stream will read, on the blocking pool, in one of the session's fair
/// share of file-work slots (opening may hash the whole file).
async fn open(
    params: &StreamTextParams,
    ctx: &ServerContext,
    ext: &Extensions,
) -> Result<(Snapshot, u64, u64), ErrorObjectOwned> {
    let session = session_of(ext)?;
    let files = ctx.files.clone();
    let path = params.path.clone();
    let offset = params.offset.unwrap_or(1);
    let chunk = match params.chunk_lines {
        Some(0) => {
            return Err(fs_error(FsErrorCode::InvalidArgument, "chunkLines must be at least 1", Some(&path)));
        }
        Some(n) => n.min(u64::from(READ_LINE_LIMIT)),
        None => STREAM_CHUNK_LINES,
    };
    let _slot = ctx.file_work.acquire(session.id()).await;
    tokio::task::spawn_blocking(move || {
        let options = session.options().ok_or_else(super::error::not_initialized)?;
        let scope = Scope { roots: &options.roots, cwd: &options.cwd };
        let files = files.context(scope, session.observations(), options.read_only, &options.deny);
        let snapshot = files.unrecorded().stream(&path, offset)?;
        Ok((snapshot, offset, chunk))
    })
    .await
    .map_err(internal)?
}

/// Cuts the snapshot into chunks until it is done, the file changes, or nobody listens.
fn produce(snapshot: Snapshot, offset: u64, chunk: u64, out: mpsc::Sender<TextChunk>) {
    let version = snapshot.version.to_string();
    let total = snapshot.total_lines();
    let mut line = offset;
    loop {
        let item = match snapshot.window(line, chunk) {
            Ok(window) => {
                let next = line + window.lines.len() as u64;
                let done = next > total || window.lines.is_empty();
                let item = TextChunk {
                    version: version.clone(),
                    start_line: line,
                    lines: window.lines,
                    truncated_lines: window.truncated,
                    total_lines: total,
                    done,
                    error: None,
                };
                line = next;
                item
            }
            Err(failure) => {
                let (code, message) = match failure {
                    WindowError::Changed(Changed) => (
                        FsErrorCode::StaleVersion,
                        format!(
                            "the file changed while it was being streamed (from version {version}); start again"
                        ),
                    ),
                    WindowError::Io(e) => (FsErrorCode::Io, format!("reading failed: {e}")),
                };
                TextChunk {
                    version: version.clone(),
                    start_line: line,
                    lines: Vec::new(),
                    truncated_lines: Vec::new(),
                    total_lines: total,
                    done: true,
                    error: Some(ChunkError { code, message }),
                }
            }
        };
        let done = item.done;
        if out.blocking_send(item).is_err() || done {
            return;
        }
    }
}

/// Waits until at most [`STREAM_BUFFER_CHUNKS`] messages are queued on the connection ahead of
/// this stream's next chunk. `false` when the subscription closed meanwhile.
async fn wait_for_room(sink: &jsonrpsee::core::server::SubscriptionSink) -> bool {
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        if sink.is_closed() {
            return false;
        }
        let queued = sink.max_capacity().saturating_sub(sink.capacity());
        if queued < STREAM_BUFFER_CHUNKS {
            return true;
        }
        // The writer is blocked on a client that does not read: back off, cheaply.
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = sink.closed() => return false,
        }
        pause = (pause * 2).min(std::time::Duration::from_millis(100));
    }
}

/// The subscription callback of `fs/streamText`.
pub async fn stream_text(
    params: Params<'static>,
    pending: PendingSubscriptionSink,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) {
    let params: StreamTextParams = match parse_params("fs/streamText", &params) {
        Ok(params) => params,
        Err(err) => return pending.reject(err).await,
    };
    let (snapshot, offset, chunk) = match open(&params, &ctx, &ext).await {
        Ok(opened) => opened,
        Err(err) => return pending.reject(err).await,
    };
    let Ok(sink) = pending.accept().await else { return };
    let (tx, mut rx) = mpsc::channel(STREAM_BUFFER_CHUNKS);
    let producer = tokio::task::spawn_blocking(move || produce(snapshot, offset, chunk, tx));
    loop {
        let item = tokio::select! {
            item = rx.recv() => item,
            () = sink.closed() => None,
        };
        let Some(item) = item else { break };
        let json = match serde_json::value::to_raw_value(&item) {
            Ok(json) => json,
            Err(err) => {
                tracing::error!(%err, "a text chunk failed to serialize");
                break;
            }
        };
        if sink.send(json).await.is_err() || item.done {
            break;
        }
        // Let the connection's writer run, and do not queue more than a few chunks ahead of
        // what it has written: the outgoing queue is shared and far larger than one stream may
        // use (a 4 MB chunk times the queue's length would be the whole file).
        tokio::task::yield_now().await;
        if !wait_for_room(&sink).await {
            break;
        }
    }
    // Dropping the receiver makes the producer's next send fail, which stops it.
    drop(rx);
    let _ = producer.await;
}

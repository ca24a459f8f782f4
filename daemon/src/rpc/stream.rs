//! `fs/streamText`: a jsonrpsee subscription that delivers a file of any size as ordered
//! `fs/textChunk` notifications, all from one version (a [`Snapshot`]). A change mid-stream ends
//! it with an error item carrying `FS_STALE_VERSION`. Chunks are cut one at a time, on the
//! blocking pool, only when the connection's outgoing queue is under its byte budget, and each
//! chunk's bytes are admitted by that budget (per connection and daemon-wide) before it is
//! queued; one stream per connection at a time holds a chunk outside the queue. So a slow reader
//! makes the daemon hold at most its budget plus one chunk, never the file, however many
//! streams it opens.
//! Cancelling (`fs/streamCancel`) or disconnecting stops the stream.

use std::sync::Arc;

use filectx_protocol::tools::READ_LINE_LIMIT;
use filectx_protocol::{ChunkError, FsErrorCode, STREAM_CHUNK_LINES, StreamTextParams, TextChunk};
use jsonrpsee::Extensions;
use jsonrpsee::core::server::PendingSubscriptionSink;
use jsonrpsee::types::{ErrorObjectOwned, Params};

use super::error::fs_error;
use super::run::{Op, run};
use super::{ServerContext, parse_params, session_of};
use crate::context::{Changed, Oversized, Snapshot, Step, Window, WindowError, WindowRequest};

/// Opens the snapshot a stream will read ([`Op::Stream`]: on the blocking pool, in one of the
/// session's fair share of file slots, since opening may hash the whole file).
async fn open(
    params: &StreamTextParams,
    ctx: &ServerContext,
    ext: &Extensions,
) -> Result<(Snapshot, u64, u64), ErrorObjectOwned> {
    let path = params.path.clone();
    let offset = match params.offset {
        Some(0) => {
            let message = "offset must be at least 1 (lines are numbered from 1)";
            return Err(fs_error(FsErrorCode::InvalidArgument, message, Some(&path)));
        }
        offset => offset.unwrap_or(1),
    };
    let chunk = match params.chunk_lines {
        Some(0) => {
            return Err(fs_error(FsErrorCode::InvalidArgument, "chunkLines must be at least 1", Some(&path)));
        }
        Some(n) => n.min(u64::from(READ_LINE_LIMIT)),
        None => STREAM_CHUNK_LINES,
    };
    let opened = run(ctx, ext, Op::Stream, None, move |files, _, _| {
        Ok(Step::Done(files.unrecorded().stream(&path, offset)?))
    });
    Ok((opened.await?, offset, chunk))
}

/// Cuts the chunk that starts at `line`: at most `chunk` whole lines and `max_bytes` of them
/// (or the error item that ends the stream).
fn cut(snapshot: &Snapshot, version: &str, line: u64, chunk: u64, max_bytes: u64) -> TextChunk {
    let total = snapshot.total_lines();
    let error_item = |code, message| TextChunk {
        version: version.to_owned(),
        start_line: line,
        lines: Vec::new(),
        total_lines: total,
        done: true,
        error: Some(ChunkError { code, message }),
    };
    match snapshot.window(&WindowRequest::whole(line, chunk, max_bytes)) {
        Ok(Window { oversized: Some(Oversized { line: n, bytes }), .. }) => error_item(
            FsErrorCode::TooLarge,
            format!(
                "line {n} is {bytes} bytes, over the limit of {max_bytes} bytes one chunk may hold \
                 (--max-window-bytes); read it with file/read and maxLineChars"
            ),
        ),
        Ok(window) => {
            let next = line + window.lines.len() as u64;
            let done = next > total || window.lines.is_empty();
            TextChunk {
                version: version.to_owned(),
                start_line: line,
                lines: window.lines.to_vec(),
                total_lines: total,
                done,
                error: None,
            }
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
            error_item(code, message)
        }
    }
}

/// The subscription callback of `fs/streamText`.
pub async fn stream_text(
    params: Params<'static>,
    pending: PendingSubscriptionSink,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) {
    let params: StreamTextParams = match parse_params(filectx_protocol::methods::FS_STREAM_TEXT, &params) {
        Ok(params) => params,
        Err(err) => return pending.reject(err).await,
    };
    let session = match session_of(&ext) {
        Ok(session) => session,
        Err(err) => return pending.reject(err).await,
    };
    let (snapshot, offset, chunk) = match open(&params, &ctx, &ext).await {
        Ok(opened) => opened,
        Err(err) => return pending.reject(err).await,
    };
    let Ok(sink) = pending.accept().await else { return };
    let budget = session.outgoing().budget().clone();
    let version = snapshot.version.to_string();
    let max_bytes = ctx.config.files.max_window_bytes;
    let mut snapshot = Some(snapshot);
    let mut line = offset;
    loop {
        // Our turn on this connection, then room under its budget: only then cut a chunk.
        let turn = tokio::select! {
            turn = budget.stream_turn() => turn,
            () = sink.closed() => None,
        };
        let Some(turn) = turn else { break };
        tokio::select! {
            () = budget.wait_below_budget() => {}
            () = sink.closed() => break,
        }
        let Some(taken) = snapshot.take() else { break };
        let version = version.clone();
        let cutting = tokio::task::spawn_blocking(move || {
            let item = cut(&taken, &version, line, chunk, max_bytes);
            (taken, item)
        });
        let item = match cutting.await {
            Ok((back, item)) => {
                snapshot = Some(back);
                item
            }
            Err(err) => {
                tracing::error!(%err, "cutting a text chunk failed");
                break;
            }
        };
        line = item.start_line + item.lines.len() as u64;
        let json = match serde_json::value::to_raw_value(&item) {
            Ok(json) => json,
            Err(err) => {
                tracing::error!(%err, "a text chunk failed to serialize");
                break;
            }
        };
        // Pay for the chunk before it enters the sink; the connection's forwarder uses the
        // payment when the wrapped notification reaches the queue.
        let n = json.get().len();
        let admitted = tokio::select! {
            admitted = budget.reserve(n) => admitted,
            () = sink.closed() => false,
        };
        if !admitted {
            break;
        }
        budget.prepay(n);
        drop(turn);
        if sink.send(json).await.is_err() {
            budget.refund(n);
            break;
        }
        if item.done {
            break;
        }
    }
}

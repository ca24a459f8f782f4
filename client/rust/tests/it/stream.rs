//! Tests of `Client::stream_text` against a fake daemon: what goes on the wire (the
//! subscription, and `fs/streamCancel` when a stream is dropped or cancelled), the order of the
//! chunks, and how every early end surfaces as an error rather than a silent end.

use std::time::Duration;

use filectx_client::{Client, ClientError, ConnectOptions, TextStream};
use filectx_protocol::{ClientInfo, FsErrorCode, InitializeParams, StreamTextParams, TextChunk, methods};
use futures::StreamExt;
use futures::stream::FusedStream;
use serde_json::{Value, json};

use crate::support::{self, FakeDaemon, Out, TestResult, chunk, chunk_out, method_names};
use tokio::sync::mpsc;

/// How long a test waits for anything before it fails.
const WAIT: Duration = Duration::from_secs(10);

fn params() -> InitializeParams {
    InitializeParams {
        client_info: Some(ClientInfo { name: "test".to_owned(), version: None }),
        read_only: Some(true),
        ..InitializeParams::new(vec!["/tmp/project".to_owned()])
    }
}

fn stream_params(path: &str, offset: Option<u64>, chunk_lines: Option<u64>) -> StreamTextParams {
    StreamTextParams { path: path.to_owned(), offset, chunk_lines }
}

/// The next item of `stream`, failing the test if none comes in time.
async fn next(stream: &mut TextStream) -> TestResult<Option<Result<TextChunk, ClientError>>> {
    Ok(tokio::time::timeout(WAIT, stream.next()).await?)
}

/// The next item, which must be a chunk.
async fn next_chunk(stream: &mut TextStream) -> TestResult<TextChunk> {
    match next(stream).await? {
        Some(Ok(chunk)) => Ok(chunk),
        other => Err(format!("expected a chunk, got {other:?}").into()),
    }
}

/// The next item, which must be an error; the stream must end right after it.
async fn final_error(stream: &mut TextStream) -> TestResult<ClientError> {
    let error = match next(stream).await? {
        Some(Err(error)) => error,
        other => return Err(format!("expected an error, got {other:?}").into()),
    };
    assert!(stream.is_terminated());
    assert!(next(stream).await?.is_none(), "the stream goes on after {error:?}");
    Ok(error)
}

/// The messages received for `method`.
fn all_of<'a>(received: &'a [Value], method: &str) -> Vec<&'a Value> {
    received.iter().filter(|m| m["method"] == method).collect()
}

#[tokio::test]
async fn a_stream_sends_its_params_and_yields_every_chunk_in_order() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;
    // The start can be awaited on any runtime thread; the stream owns what it needs.
    fn send<T: Send>(_: &T) {}
    fn owned<T: Send + Unpin + 'static>(_: &T) {}
    let start = client.stream_text(stream_params("logs/a.log", Some(2), Some(2)));
    send(&start);
    let mut stream = start.await?;
    owned(&stream);
    assert!(!stream.is_terminated());

    let mut chunks = Vec::new();
    while let Some(item) = next(&mut stream).await? {
        chunks.push(item?);
    }
    assert_eq!(
        chunks,
        [chunk(2, &["", "gamma  "], 5, false), chunk(4, &["δέλτα", "last"], 5, true)],
        "{chunks:#?}"
    );
    assert!(stream.is_terminated());
    assert!(next(&mut stream).await?.is_none());

    // Default offset and chunk size: the params carry the path only, one chunk holds it all.
    let stream = client.stream_text(stream_params("/tmp/project/b.log", None, None)).await?;
    let chunks: Vec<TextChunk> =
        tokio::time::timeout(WAIT, stream.map(|item| item.map_err(|e| e.to_string())).collect::<Vec<_>>())
            .await?
            .into_iter()
            .collect::<Result<_, _>>()?;
    assert_eq!(chunks, [chunk(1, &support::STREAM_LINES, 5, true)]);
    client.close().await?;

    let received = daemon.received().await?;
    assert_eq!(
        method_names(&received),
        [
            "initialize",
            "fs/streamText",
            "fs/streamCancel",
            "fs/streamText",
            "fs/streamCancel",
            "shutdown",
            "exit"
        ]
    );
    let starts = all_of(&received, methods::FS_STREAM_TEXT);
    assert_eq!(starts[0]["params"], json!({"path": "logs/a.log", "offset": 2, "chunkLines": 2}));
    assert_eq!(starts[1]["params"], json!({"path": "/tmp/project/b.log"}));
    // A finished stream is released: its cancel names its subscription, as a one-element array.
    let cancels = all_of(&received, methods::FS_STREAM_CANCEL);
    for (start, cancel) in starts.iter().zip(&cancels) {
        assert!(start["id"].is_number() && cancel["id"].is_number(), "{start} {cancel}");
        assert_eq!(cancel["params"], json!([support::subscription_id(start)]));
    }
    Ok(())
}

#[tokio::test]
async fn dropping_or_cancelling_a_stream_midway_sends_fs_stream_cancel() -> TestResult {
    // Each stream gets its first chunk of three, then nothing until cancelled.
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => {
            let subscription = support::subscription_id(request);
            vec![
                support::subscribed(request, &subscription),
                chunk_out(&subscription, &chunk(1, &["one"], 3, false)),
            ]
        }
        Some("fs/streamCancel") => vec![support::result(request, json!(true))],
        _ => support::standard(request),
    })?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;

    let mut dropped = client.stream_text(stream_params("a.log", None, Some(1))).await?;
    assert_eq!(next_chunk(&mut dropped).await?, chunk(1, &["one"], 3, false));
    drop(dropped);

    let mut cancelled = client.stream_text(stream_params("b.log", None, Some(1))).await?;
    assert_eq!(next_chunk(&mut cancelled).await?, chunk(1, &["one"], 3, false));
    tokio::time::timeout(WAIT, cancelled.cancel()).await?;
    client.close().await?;

    let received = daemon.received().await?;
    assert_eq!(
        method_names(&received),
        [
            "initialize",
            "fs/streamText",
            "fs/streamCancel",
            "fs/streamText",
            "fs/streamCancel",
            "shutdown",
            "exit"
        ]
    );
    let starts = all_of(&received, methods::FS_STREAM_TEXT);
    let cancels = all_of(&received, methods::FS_STREAM_CANCEL);
    for (start, cancel) in starts.iter().zip(&cancels) {
        assert_eq!(cancel["params"], json!([support::subscription_id(start)]));
    }
    Ok(())
}

#[tokio::test]
async fn an_error_item_is_a_final_error_with_its_fs_code() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => vec![
            support::subscribed(request, "s"),
            chunk_out("s", &chunk(1, &["one", "two"], 4, false)),
            chunk_out("s", &support::stale_item(3, 4)),
        ],
        _ => support::standard(request),
    })?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;
    let mut stream = client.stream_text(stream_params("a.log", None, Some(2))).await?;
    assert_eq!(next_chunk(&mut stream).await?, chunk(1, &["one", "two"], 4, false));
    let error = final_error(&mut stream).await?;
    assert_eq!(error.fs_code(), Some(FsErrorCode::StaleVersion), "{error:?}");
    assert!(!error.is_disconnected());
    match &error {
        ClientError::StreamFailed { code, message, version, next_line } => {
            assert_eq!(*code, FsErrorCode::StaleVersion);
            assert_eq!(message, "the file changed while it was being streamed; start again");
            assert_eq!(version, support::VERSION);
            assert_eq!(*next_line, 3);
        }
        other => return Err(format!("expected StreamFailed, got {other:?}").into()),
    }
    assert_eq!(
        error.to_string(),
        "the stream ended early: FS_STALE_VERSION: the file changed while it was being streamed; start again"
    );
    client.close().await?;
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn a_refused_stream_is_an_rpc_error_with_its_fs_code() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => {
            vec![support::fs_error(request, FsErrorCode::NotFound, "no such file: x.log")]
        }
        _ => support::standard(request),
    })?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;
    let error = client.stream_text(stream_params("x.log", Some(9), None)).await.err();
    assert_eq!(error.as_ref().and_then(ClientError::fs_code), Some(FsErrorCode::NotFound), "{error:?}");
    assert!(matches!(&error, Some(ClientError::Rpc { code: -31002, .. })), "{error:?}");
    client.close().await?;
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "fs/streamText", "shutdown", "exit"]);
    Ok(())
}

#[tokio::test]
async fn a_hang_up_midway_is_a_transport_error_not_a_silent_end() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => {
            vec![
                support::subscribed(request, "s"),
                chunk_out("s", &chunk(1, &["one"], 9, false)),
                Out::HangUp,
            ]
        }
        _ => support::standard(request),
    })?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;
    let mut stream = client.stream_text(stream_params("a.log", None, Some(1))).await?;
    // The chunk that arrived before the hang-up is still delivered, then the error.
    assert_eq!(next_chunk(&mut stream).await?, chunk(1, &["one"], 9, false));
    let error = final_error(&mut stream).await?;
    assert!(
        matches!(&error, ClientError::Transport(m) if m == "the daemon closed the connection"),
        "{error:?}"
    );
    assert!(error.is_disconnected());
    drop(client);
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn dropping_the_client_ends_its_streams_with_a_transport_error() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => {
            vec![support::subscribed(request, "s"), chunk_out("s", &chunk(1, &["one"], 9, false))]
        }
        _ => support::standard(request),
    })?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;
    let mut stream = client.stream_text(stream_params("a.log", None, Some(1))).await?;
    assert_eq!(next_chunk(&mut stream).await?, chunk(1, &["one"], 9, false));
    // The stream does not keep the connection open.
    drop(client);
    let error = final_error(&mut stream).await?;
    assert!(
        matches!(&error, ClientError::Transport(m) if m == "the client was dropped before the stream ended"),
        "{error:?}"
    );
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "fs/streamText"]);
    Ok(())
}

#[tokio::test]
async fn a_lagging_reader_gets_an_error_and_the_daemon_a_cancel() -> TestResult {
    let (cancelled, mut on_cancel) = mpsc::unbounded_channel();
    let daemon = FakeDaemon::start(move |request| match request["method"].as_str() {
        // Four chunks at once, for a client that buffers two.
        Some("fs/streamText") => {
            let mut out = vec![support::subscribed(request, "s")];
            out.extend((1..=4).map(|line| chunk_out("s", &chunk(line, &["x"], 9, false))));
            out
        }
        Some("fs/streamCancel") => {
            let _ = cancelled.send(request["params"].clone());
            vec![support::result(request, json!(true))]
        }
        _ => support::standard(request),
    })?;
    let options = ConnectOptions::default().notification_buffer(2);
    let client = Client::connect_with(&daemon.socket, options).await?;
    client.initialize(params()).await?;
    let mut stream = client.stream_text(stream_params("a.log", None, Some(1))).await?;
    // Nothing is read until jsonrpsee has given up on the stream and cancelled it.
    let cancel = tokio::time::timeout(WAIT, on_cancel.recv()).await?;
    assert_eq!(cancel, Some(json!(["s"])));
    assert_eq!(next_chunk(&mut stream).await?, chunk(1, &["x"], 9, false));
    assert_eq!(next_chunk(&mut stream).await?, chunk(2, &["x"], 9, false));
    let error = final_error(&mut stream).await?;
    assert!(matches!(error, ClientError::StreamLagged { buffer: 2 }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "the stream was read too slowly: more than 2 chunks went unread, so it was dropped"
    );
    client.close().await?;
    let received = daemon.received().await?;
    // Cancelled once, by jsonrpsee; dropping the ended stream sends nothing more.
    assert_eq!(all_of(&received, methods::FS_STREAM_CANCEL).len(), 1);
    Ok(())
}

#[tokio::test]
async fn the_daemon_closing_the_subscription_early_is_a_protocol_error() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => vec![
            support::subscribed(request, "s"),
            chunk_out("s", &chunk(1, &["one"], 9, false)),
            // jsonrpsee's subscription-close message: an error instead of a result.
            support::notification(
                methods::FS_TEXT_CHUNK,
                json!({"subscription": "s", "error": {"code": -32603, "message": "gone"}}),
            ),
        ],
        _ => support::standard(request),
    })?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;
    let mut stream = client.stream_text(stream_params("a.log", None, Some(1))).await?;
    assert_eq!(next_chunk(&mut stream).await?, chunk(1, &["one"], 9, false));
    let error = final_error(&mut stream).await?;
    assert!(
        matches!(&error, ClientError::Protocol(m) if m == "the daemon ended the stream before its last chunk"),
        "{error:?}"
    );
    assert!(!error.is_disconnected());
    // The connection is still fine.
    assert_eq!(client.status().await?, support::status());
    client.close().await?;
    let received = daemon.received().await?;
    // The daemon ended it, so there is nothing to cancel.
    assert_eq!(method_names(&received), ["initialize", "fs/streamText", "daemon/status", "shutdown", "exit"]);
    Ok(())
}

#[tokio::test]
async fn chunks_that_break_the_stream_contract_end_it_with_an_error() -> TestResult {
    let daemon = FakeDaemon::start(|request| {
        let subscription = support::subscription_id(request);
        let first = chunk(1, &["one"], 9, false);
        let bad = match request["params"]["path"].as_str() {
            Some("undecodable") => json!({"version": support::VERSION, "lines": "one"}),
            Some("gap") => json!(chunk(3, &["three"], 9, false)),
            Some("switch") => {
                json!(TextChunk { version: support::NEW_VERSION.to_owned(), ..chunk(2, &["2"], 9, false) })
            }
            _ => return support::standard(request),
        };
        vec![
            support::subscribed(request, &subscription),
            chunk_out(&subscription, &first),
            support::notification(
                methods::FS_TEXT_CHUNK,
                json!({"subscription": subscription, "result": bad}),
            ),
        ]
    })?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;

    let mut stream = client.stream_text(stream_params("undecodable", None, Some(1))).await?;
    next_chunk(&mut stream).await?;
    let error = final_error(&mut stream).await?;
    assert!(matches!(error, ClientError::Decode(_)), "{error:?}");

    let mut stream = client.stream_text(stream_params("gap", None, Some(1))).await?;
    next_chunk(&mut stream).await?;
    let error = final_error(&mut stream).await?;
    assert!(
        matches!(&error, ClientError::Protocol(m) if m == "the stream's chunk starts at line 3 where line 2 was due"),
        "{error:?}"
    );

    let mut stream = client.stream_text(stream_params("switch", None, Some(1))).await?;
    next_chunk(&mut stream).await?;
    let error = final_error(&mut stream).await?;
    let expected = format!(
        "the stream switched from version {} to {} without an error item",
        support::VERSION,
        support::NEW_VERSION
    );
    assert!(matches!(&error, ClientError::Protocol(m) if *m == expected), "{error:?}");

    // A stream whose first chunk does not start at the requested offset.
    let mut stream = client.stream_text(stream_params("gap", Some(2), Some(1))).await?;
    let error = final_error(&mut stream).await?;
    assert!(
        matches!(&error, ClientError::Protocol(m) if m == "the stream's chunk starts at line 1 where line 2 was due"),
        "{error:?}"
    );
    client.close().await?;

    // Each broken stream was cancelled at the daemon, which may still be producing.
    let received = daemon.received().await?;
    assert_eq!(all_of(&received, methods::FS_STREAM_CANCEL).len(), 4);
    Ok(())
}

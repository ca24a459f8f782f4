//! Fuzzing entry point for request dispatch: arbitrary bytes into one real connection driver.
//! Shared by the cargo-fuzz target (`daemon/fuzz`, nightly) and the stable property-test
//! harness (`daemon/tests/fuzz_dispatch.rs`). Not a stable API; hidden from the docs.
//!
//! [`dispatch`] runs one connection's `serve` over a `UnixStream::pair()` against a fresh
//! temporary root, exactly as the accept loop would run it. The harness opens the session
//! itself (`initialize` with that root, cwd the root) before the fuzz bytes, so that no input
//! can widen the sandbox: a later `initialize` in the input is parsed and validated, then
//! refused. Paths in inputs are relative (`a.txt`, `sub/b.txt`, …). Then it writes the input,
//! half-closes, reads every answer within a time bound, and panics when an invariant breaks:
//! the driver must end on its own once the input ends (no hang, no panic escaping), and
//! everything it sent must be complete frames of well-formed JSON-RPC 2.0.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::BytesMut;
use filectx_protocol::{Frame, LspCodec};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio_util::codec::Decoder;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::context::{Files, ProviderConfig};
use crate::stats::Stats;
use crate::transport::connection::{self, Shared};
use crate::watch::WatchHub;

/// How long one input may take to be answered completely before it counts as a hang.
pub const TIME_BOUND: Duration = Duration::from_secs(20);

/// Caps of the fuzzed daemon: small, so inputs reach every limit cheaply.
pub fn config() -> Config {
    Config {
        max_frame_bytes: 64 * 1024,
        max_batch_len: 16,
        max_concurrent_requests: 8,
        max_queued_messages: 16,
        max_subscriptions: 4,
        shutdown_grace: Duration::from_secs(1),
        max_observed_files: 64,
        files: ProviderConfig {
            lock_patience: Duration::from_secs(2),
            max_edit_bytes: 256 * 1024,
            fsync: false,
            max_cached_files: 64,
            max_index_bytes: 1024 * 1024,
            max_mapped_bytes: 16 * 1024 * 1024,
            map_threshold: 64 * 1024,
            max_open_files: 16,
            // The stores that hold bytes across connections stay small, so the harness's memory
            // check sees a leak rather than a cache filling up to its (default 64 MiB) cap.
            max_snapshot_bytes: 1024 * 1024,
            max_snapshot_file_bytes: 64 * 1024,
            max_search_cache_bytes: 1024 * 1024,
            ..ProviderConfig::default()
        },
        max_owners: 8,
        max_parked_sessions: 4,
        max_parked_bytes: 1024 * 1024,
        ..Config::default()
    }
}

/// What one execution of [`dispatch`] saw, for the harness's statistics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DispatchRun {
    /// Responses (batch answers count as one), the harness's `initialize` included.
    pub responses: usize,
    /// Error responses among them (and inside batch answers).
    pub errors: usize,
    /// Server notifications (`file/didChange`, stream chunks).
    pub notifications: usize,
    /// Bytes the daemon wrote back.
    pub output_bytes: usize,
}

/// One daemon's worth of shared state, built once per process and reused by every execution
/// (as one daemon serves many connections).
struct Harness {
    runtime: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    base: PathBuf,
    next: AtomicUsize,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let config = config();
        // Its blocking pool bounded as the daemon's is (so memory checks see what it would hold).
        let runtime = crate::server::bound_blocking_pool(
            tokio::runtime::Builder::new_current_thread().enable_all(),
            &config,
        )
        .build()
        .unwrap_or_else(|err| panic!("fuzz harness: cannot start a runtime: {err}"));
        let shared = runtime.block_on(async {
            let stats = Arc::new(Stats::new());
            let files = Files::new(config.files.clone());
            let watch = WatchHub::start(&files);
            let handlers = crate::rpc::methods(
                config.clone(),
                stats.clone(),
                files,
                watch.clone(),
                crate::session::SessionPolicy::default(),
            )
            .unwrap_or_else(|err| panic!("fuzz harness: method table: {err}"));
            Arc::new(Shared::new(handlers.methods, config, stats, watch, handlers.records))
        });
        let base = std::env::temp_dir().join(format!("filectx-fuzz-{}", std::process::id()));
        Harness { runtime, shared, base, next: AtomicUsize::new(1) }
    })
}

/// Fills a fresh root with the files the seeds name.
fn make_root(root: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(root.join("sub"))?;
    std::fs::write(root.join("a.txt"), "alpha\nbeta\ngamma\n")?;
    std::fs::write(root.join("crlf.txt"), "one\r\ntwo\r\nthree\r\n")?;
    std::fs::write(root.join("sub/b.txt"), "\u{feff}bom line\nnä¿ve\tunicode\nno final newline")?;
    std::fs::write(root.join("bin.dat"), b"\x00\x01\x02binary\xff")?;
    std::fs::write(root.join("empty.txt"), "")?;
    let long: String = (1..=2500).map(|n| format!("line {n}\n")).collect();
    std::fs::write(root.join("long.txt"), long)
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// Checks one JSON-RPC message the daemon sent; returns (responses, errors, notifications).
fn check_message(value: &Value, in_batch: bool) -> (usize, usize, usize) {
    let Some(object) = value.as_object() else {
        panic!("daemon sent a message that is not an object: {value}");
    };
    assert_eq!(object.get("jsonrpc"), Some(&Value::from("2.0")), "{value}");
    if let Some(method) = object.get("method") {
        assert!(!in_batch, "notification inside a batch answer: {value}");
        assert!(method.is_string() && object.get("id").is_none(), "{value}");
        return (0, 0, 1);
    }
    let id = object.get("id").unwrap_or_else(|| panic!("response without id: {value}"));
    assert!(id.is_null() || id.is_number() || id.is_string(), "bad id: {value}");
    match (object.get("result"), object.get("error")) {
        (Some(_), None) => (1, 0, 0),
        (None, Some(error)) => {
            assert!(error["code"].is_i64(), "error without integer code: {value}");
            assert!(error["message"].is_string(), "error without message: {value}");
            (1, 1, 0)
        }
        _ => panic!("a response needs exactly one of result and error: {value}"),
    }
}

/// Checks everything the daemon wrote: complete frames of JSON-RPC 2.0 messages, the first of
/// them the answer to the harness's `initialize`.
fn check_output(output: &[u8]) -> DispatchRun {
    let mut run = DispatchRun { output_bytes: output.len(), ..DispatchRun::default() };
    let mut codec = LspCodec::new(usize::MAX);
    let mut buf = BytesMut::from(output);
    let mut first = true;
    loop {
        let frame = match codec.decode_eof(&mut buf) {
            Ok(Some(Frame::Message(body))) => body,
            Ok(None) => break,
            Ok(Some(Frame::Oversized { .. })) => unreachable!("no cap on the client side"),
            Err(err) => panic!("daemon output is not well framed: {err}"),
        };
        let value: Value = serde_json::from_slice(&frame).unwrap_or_else(|err| {
            panic!("daemon sent invalid JSON ({err}): {:?}", String::from_utf8_lossy(&frame))
        });
        if first {
            assert!(value["result"]["sessionId"].is_string(), "harness initialize failed: {value}");
            first = false;
        }
        let (responses, errors, notes) = match &value {
            Value::Array(entries) => {
                assert!(!entries.is_empty(), "empty batch answer");
                entries.iter().fold((1, 0, 0), |acc, entry| {
                    let (_, e, _) = check_message(entry, true);
                    (acc.0, acc.1 + e, acc.2)
                })
            }
            _ => check_message(&value, false),
        };
        run.responses += responses;
        run.errors += errors;
        run.notifications += notes;
    }
    assert!(!first, "daemon answered nothing, not even initialize");
    run
}

/// One fuzz execution: `data` is what a client sends after its session is initialized.
/// Panics when the daemon hangs, lets a panic escape, or sends anything but valid frames.
pub fn dispatch(data: &[u8]) -> DispatchRun {
    let harness = harness();
    let n = harness.next.fetch_add(1, Ordering::Relaxed);
    let root = harness.base.join(n.to_string());
    if let Err(err) = make_root(&root) {
        panic!("fuzz harness: cannot prepare {}: {err}", root.display());
    }
    let init = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"roots": [&root], "clientInfo": {"name": "fuzz"}},
    });
    let mut input = frame(init.to_string().as_bytes());
    input.extend_from_slice(data);

    let output = harness.runtime.block_on(async {
        let (client, server) =
            UnixStream::pair().unwrap_or_else(|err| panic!("fuzz harness: socketpair: {err}"));
        let serve =
            tokio::spawn(connection::serve(server, harness.shared.clone(), n, CancellationToken::new()));
        let (mut read, mut write) = client.into_split();
        // Write and read at once: a client that only writes would stall on a full queue.
        let writer = tokio::spawn(async move {
            // The daemon may close first (a stream it cannot resynchronise): not an error here.
            let _ = write.write_all(&input).await;
            let _ = write.shutdown().await;
        });
        let mut output = Vec::new();
        let read = tokio::time::timeout(TIME_BOUND, read.read_to_end(&mut output)).await;
        match read {
            Ok(Ok(_)) => {}
            // The daemon closed a stream it could not resynchronise while input was still
            // unread: the kernel resets the connection. What arrived before is checked below.
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::ConnectionReset => {}
            Ok(Err(err)) => panic!("reading the daemon's answers: {err}"),
            Err(_) => panic!("the connection was not finished {TIME_BOUND:?} after its input ended"),
        }
        let _ = writer.await;
        match tokio::time::timeout(TIME_BOUND, serve).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => panic!("the connection driver failed: {err}"),
            Err(_) => panic!("the connection driver did not end after closing its socket"),
        }
        output
    });
    let _ = std::fs::remove_dir_all(&root);
    check_output(&output)
}

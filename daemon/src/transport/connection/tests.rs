//! Tests of the connection driver.

use super::*;
use bytes::BytesMut;
use filectx_protocol::LspCodec;
use filectx_protocol::error::INTERNAL_ERROR;
use tokio::io::AsyncReadExt;
use tokio_util::codec::Decoder;

use super::conn::{Conn, Shared};
use super::dispatch::OwnedCall;
use super::writer::{WriteSide, frame_header, write_loop};
use crate::config::Config;
use crate::context::ledger::Ledgers;
use crate::session::budget::OutgoingBudget;
use crate::stats::Stats;
use crate::watch::WatchHub;

use jsonrpsee::core::server::RpcModule;
use jsonrpsee::types::ErrorObjectOwned;

#[tokio::test]
async fn a_panicking_handler_is_answered_as_an_internal_error_for_that_call_alone() {
    let mut module = RpcModule::new(());
    module
        .register_method("boom", |_, _, _| -> Result<(), ErrorObjectOwned> { panic!("handler bug") })
        .unwrap();
    module
        .register_async_method("boom/async", |_, _, _| async {
            if std::hint::black_box(true) {
                panic!("async handler bug");
            }
            Ok::<(), ErrorObjectOwned>(())
        })
        .unwrap();
    module.register_method("fine", |_, _, _| Ok::<u32, ErrorObjectOwned>(7)).unwrap();
    let stats = Arc::new(Stats::new());
    let files = crate::context::Files::new(Default::default());
    let shared = Arc::new(Shared::new(
        module.into(),
        Config::default(),
        stats.clone(),
        WatchHub::start(&files),
        Ledgers::new(1 << 20, 1 << 20),
    ));
    let (tx, _rx) = mpsc::channel(4);
    let (sink_tx, _sink_rx) = mpsc::channel(4);
    let out = Outgoing::new(tx, shared.outgoing.open());
    let limits = OwnerLimits { max_owners: 4, max_observed: 16 };
    let owners = Owners::new("t".into(), limits, None, stats.clone());
    let session = Arc::new(Session::new("t".into(), out.clone(), 4, owners, stats));
    let inflight = Arc::new(Semaphore::new(4));
    let (socket, _peer) = UnixStream::pair().unwrap();
    let (_read, write) = socket.into_split();
    let conn = Conn {
        shared,
        session,
        conn_id: 1,
        sink: MethodSink::new(sink_tx),
        out,
        write_side: Arc::new(WriteSide::new(write)),
        inflight,
        cancels: Default::default(),
        gone: CancellationToken::new(),
    };
    let call = |method: &str| OwnedCall { id: Id::Number(1), method: method.to_owned(), params: None };
    for method in ["boom", "boom/async"] {
        let reply = conn.run(call(method)).await;
        let json: serde_json::Value = serde_json::from_slice(reply.json.as_bytes()).unwrap();
        assert_eq!(json["error"]["code"], INTERNAL_ERROR, "{json}");
        assert_eq!(json["id"], 1);
    }
    let reply = conn.run(call("fine")).await;
    assert_eq!(reply.json.as_str(), r#"{"jsonrpc":"2.0","id":1,"result":7}"#);
}

/// What a connection to `shared` answers to `input` after a session `initialize` with
/// `root` (whose answer, with its random session id, is left out).
async fn answers(shared: Arc<Shared>, root: &std::path::Path, input: &[u8]) -> Vec<Bytes> {
    let frame = |body: &[u8]| {
        let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        out.extend_from_slice(body);
        out
    };
    let init = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"roots": [root]},
    });
    let mut bytes = frame(init.to_string().as_bytes());
    bytes.extend_from_slice(input);
    let (server, mut client) = UnixStream::pair().unwrap();
    let serve = tokio::spawn(serve(server, shared, 1, CancellationToken::new()));
    tokio::io::AsyncWriteExt::write_all(&mut client, &bytes).await.unwrap();
    tokio::io::AsyncWriteExt::shutdown(&mut client).await.unwrap();
    let mut output = Vec::new();
    client.read_to_end(&mut output).await.unwrap();
    serve.await.unwrap();
    let mut codec = LspCodec::new(1 << 24);
    let mut buf = BytesMut::from(output.as_slice());
    let mut frames = Vec::new();
    while let Some(Frame::Message(body)) = codec.decode_eof(&mut buf).unwrap() {
        frames.push(body);
    }
    assert!(frames.len() > 1, "no answer after initialize");
    frames.split_off(1)
}

#[tokio::test]
async fn file_read_through_the_method_table_answers_every_request_as_the_wire_says() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("a.txt"), "alpha\n\tbeta \"q\" \\ é\ngamma\n").unwrap();
    std::fs::write(root.join("bin.dat"), b"\x00\x01binary").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    let config = Config { max_frame_bytes: 300, ..Config::default() };
    let shared = || {
        let stats = Arc::new(Stats::new());
        let files = crate::context::Files::new(config.files.clone());
        let watch = WatchHub::start(&files);
        let policy = crate::session::SessionPolicy::default();
        let handlers =
            crate::rpc::methods(config.clone(), stats.clone(), files, watch.clone(), policy).unwrap();
        Arc::new(Shared::new(handlers.methods, config.clone(), stats, watch, handlers.records))
    };
    let long = "x".repeat(400);
    std::fs::write(root.join("long.txt"), format!("{long}\n")).unwrap();
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"file/read","params":{"path":"a.txt"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":"s","method":"file/read","params":{"path":"a.txt","offset":2,"limit":1}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":"e\"s","method":"file/read","params":{"path":"a.txt","offset":3}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":-4,"method":"file/read","params":{"path":"a.txt","offset":9}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":5,"method":"file/read","params":{"path":"a.txt","offset":0}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":6,"method":"file/read","params":{"path":"missing.txt"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":7,"method":"file/read","params":{"path":"../outside.txt"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":8,"method":"file/read","params":{"path":"sub"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":9,"method":"file/read","params":{"path":"bin.dat"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":10,"method":"file/read"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":11,"method":"file/read","params":["a.txt"]}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":12,"method":"file/read","params":{"path":7}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":13,"method":"file/read","params":{"path":"a.txt","owner":"bad name!"}}"#.to_owned(),
        // Over the frame limit: the same -32008.
        r#"{"jsonrpc":"2.0","id":14,"method":"file/read","params":{"path":"long.txt"}}"#.to_owned(),
        // A notification is run and not answered.
        r#"{"jsonrpc":"2.0","method":"file/read","params":{"path":"a.txt"}}"#.to_owned(),
        r#"[{"jsonrpc":"2.0","id":15,"method":"file/read","params":{"path":"a.txt","limit":1}},{"jsonrpc":"2.0","id":16,"method":"file/read","params":{"path":"nope"}}]"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":17,"method":"file/stat","params":{"path":"a.txt"}}"#.to_owned(),
    ];
    let mut input = Vec::new();
    for request in &requests {
        input.extend_from_slice(format!("Content-Length: {}\r\n\r\n{request}", request.len()).as_bytes());
    }
    let table = answers(shared(), &root, &input).await;
    assert_eq!(table.len(), requests.len() - 1, "every request answered, the notification not");
    let text = table.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect::<Vec<_>>().join("\n");
    for needle in ["\\tbeta \\\"q\\\" \\\\ é", "-32008", "FS_NOT_FOUND", "FS_OUTSIDE_ROOT", "FS_NOT_TEXT"] {
        assert!(text.contains(needle), "{needle} not in {text}");
    }
}

#[test]
fn frame_headers_are_what_the_codec_writes() {
    for len in [0usize, 1, 9, 10, 99, 100, 1763, 65_536, 123_456_789, usize::MAX] {
        let (header, used) = frame_header(len);
        assert_eq!(&header[..used], format!("Content-Length: {len}\r\n\r\n").as_bytes());
    }
}

/// Reads frames off `peer` until `n` have arrived.
async fn frames(peer: &mut UnixStream, n: usize) -> Vec<Bytes> {
    let mut codec = LspCodec::new(1 << 24);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    while out.len() < n {
        match codec.decode(&mut buf).unwrap() {
            Some(Frame::Message(body)) => out.push(body),
            Some(Frame::Oversized { .. }) => panic!("oversized frame"),
            None => assert_ne!(peer.read_buf(&mut buf).await.unwrap(), 0, "socket closed early"),
        }
    }
    assert!(buf.is_empty(), "half a frame left over");
    out
}

#[tokio::test]
async fn a_direct_write_taken_in_part_goes_out_first_whole_and_stays_in_the_budget() {
    let global = OutgoingBudget::new(1 << 24, 1 << 24, 4);
    let budget = global.open();
    let (socket, mut peer) = UnixStream::pair().unwrap();
    let (_read, write) = socket.into_split();
    let side = Arc::new(WriteSide::new(write));
    let (tx, rx) = mpsc::channel::<Json>(8);
    let out = Outgoing::new(tx, budget.clone());
    // Larger than any socket buffer: the socket takes only part of it, and nobody reads.
    let big = format!(r#"{{"id":1,"pad":"{}"}}"#, "x".repeat(4 << 20));
    assert!(side.try_direct(big.as_bytes(), &budget), "the socket took a first part");
    assert!(side.rest_pending());
    assert_eq!(global.queued(), big.len(), "the rest is still counted");
    // While the connection holds bytes, nothing is written directly: it queues behind.
    let small = r#"{"id":2}"#;
    assert!(!side.try_direct(small.as_bytes(), &budget));
    assert_eq!(global.queued(), big.len(), "a refused direct write holds nothing");
    assert!(out.send(Json::from(RawValue::from_string(small.to_owned()).unwrap())).await);
    let (stop, kill) = (CancellationToken::new(), CancellationToken::new());
    let writer = tokio::spawn(write_loop(side.clone(), rx, budget.clone(), stop.clone(), kill));
    let got = frames(&mut peer, 2).await;
    assert_eq!(got[0], big.as_bytes(), "the direct write arrives whole, first");
    assert_eq!(got[1], small.as_bytes());
    tokio::time::timeout(Duration::from_secs(5), budget.wait_empty()).await.unwrap();
    assert_eq!(global.queued(), 0, "every byte came back once written");
    // Idle again: the next answer goes straight out, and gives its bytes back at once.
    assert!(side.try_direct(br#"{"id":3}"#, &budget));
    assert_eq!(global.queued(), 0);
    assert_eq!(frames(&mut peer, 1).await[0], br#"{"id":3}"#.as_slice());
    drop(out);
    stop.cancel();
    writer.await.unwrap();
    drop(side);
    let mut rest = Vec::new();
    assert_eq!(peer.read_to_end(&mut rest).await.unwrap(), 0, "the writer closed the socket cleanly");
}

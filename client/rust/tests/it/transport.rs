//! End-to-end tests of the client library against a fake daemon on a Unix socket: what goes on
//! the wire, what comes back, and how a broken connection surfaces.

use std::time::Duration;

use filectx_client::{Client, ClientError, ConnectOptions};
use filectx_protocol::{
    ClientInfo, EditParams, FsEditParams, FsErrorCode, FsWriteParams, InitializeParams, ReadParams,
    WriteExpectation, WriteOperation, WriteParams, methods,
};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::{self, FakeDaemon, Out, TestResult};

fn params() -> InitializeParams {
    InitializeParams {
        client_info: Some(ClientInfo { name: "test".to_owned(), version: Some("1".to_owned()) }),
        read_only: Some(true),
        ..InitializeParams::new(vec!["/tmp/project".to_owned()])
    }
}

#[tokio::test]
async fn a_session_round_trips_over_the_codec() -> TestResult {
    let daemon = FakeDaemon::start(|request| {
        let mut out = Vec::new();
        match request["method"].as_str() {
            Some("daemon/status") => {
                // A notification ahead of the answer must reach the notification stream.
                out.push(support::notification(
                    methods::FILE_DID_CHANGE,
                    json!({"path": "/tmp/project/a.rs", "displayPath": "a.rs", "version": null}),
                ));
            }
            Some("file/read") => {
                return vec![support::error(
                    request,
                    FsErrorCode::NotFound.rpc_code(),
                    "no such file: b.rs",
                    Some(json!({"code": "FS_NOT_FOUND", "path": "/tmp/project/b.rs"})),
                )];
            }
            _ => {}
        }
        out.extend(support::standard(request));
        out
    })?;

    let client = Client::connect(&daemon.socket).await?;
    assert_eq!(client.socket(), daemon.socket.as_path());
    // Calls can be spawned on a multi-threaded runtime.
    fn send_and_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    send_and_sync(&client);
    send(&client.status());
    send(&client.request::<Value>("m", json!({})));
    let mut changes = client.notifications(methods::FILE_DID_CHANGE).await?;
    let session = client.initialize(params()).await?;
    assert_eq!(session, support::initialize_result());
    assert_eq!(client.status().await?, support::status());
    let change = tokio::time::timeout(Duration::from_secs(5), changes.next()).await?;
    assert_eq!(change, Some(json!({"path": "/tmp/project/a.rs", "displayPath": "a.rs", "version": null})));
    assert_eq!(client.tools_list().await?.tools.len(), 3);

    let error = client.request::<Value>(methods::FILE_READ, json!({"path": "b.rs"})).await.err();
    let Some(error) = error else { return Err("file/read should fail".into()) };
    assert_eq!(error.fs_code(), Some(FsErrorCode::NotFound));
    assert!(
        matches!(&error, ClientError::Rpc { code: -31002, message, data: Some(_) } if message == "no such file: b.rs"),
        "{error:?}"
    );
    client.close().await?;
    drop(changes);

    let received = daemon.received().await?;
    let methods_seen: Vec<&str> = received.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods_seen, ["initialize", "daemon/status", "tools/list", "file/read", "shutdown", "exit"]);
    // Params go on the wire as the object itself, never wrapped.
    assert_eq!(received[0]["params"], serde_json::to_value(params())?);
    assert_eq!(received[0]["params"]["roots"], json!(["/tmp/project"]));
    assert_eq!(received[3]["params"], json!({"path": "b.rs"}));
    // Methods without params send no params member at all.
    for index in [1, 2, 4, 5] {
        assert!(received[index].get("params").is_none(), "{}", received[index]);
    }
    for message in &received {
        assert_eq!(message["jsonrpc"], "2.0");
    }
    // `exit` is a notification: no id.
    assert!(received[5].get("id").is_none());
    assert!(received[4].get("id").is_some());
    Ok(())
}

#[tokio::test]
async fn connect_session_initializes() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let (client, session) = Client::connect_session(&daemon.socket, params()).await?;
    assert_eq!(session.session_id, "s-1");
    client.close().await?;
    assert_eq!(daemon.received().await?.len(), 3);
    Ok(())
}

#[tokio::test]
async fn a_missing_socket_is_a_connect_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("none.sock");
    let error = Client::connect(&path).await.err();
    match error {
        Some(ClientError::Connect { path: p, source }) => {
            assert_eq!(p, path);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => return Err(format!("expected Connect, got {other:?}").into()),
    }
    Ok(())
}

#[tokio::test]
async fn the_daemon_hanging_up_is_a_transport_error() -> TestResult {
    let daemon = FakeDaemon::start(|_| vec![Out::HangUp])?;
    let client = Client::connect(&daemon.socket).await?;
    let error = client.status().await.err();
    assert!(matches!(&error, Some(ClientError::Transport(_))), "{error:?}");
    assert!(error.is_some_and(|e| e.is_disconnected()));
    // Every later call fails the same way.
    assert!(matches!(client.tools_list().await, Err(ClientError::Transport(_))));
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn a_lost_connection_ends_notifications_and_disconnected_says_why() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("daemon/status") => vec![Out::HangUp],
        _ => support::standard(request),
    })?;
    let client = Client::connect(&daemon.socket).await?;
    let mut changes = client.notifications(methods::FILE_DID_CHANGE).await?;
    client.initialize(params()).await?;
    assert!(client.status().await.is_err());
    let end = tokio::time::timeout(Duration::from_secs(5), changes.next()).await?;
    assert_eq!(end, None);
    assert!(!changes.lagged());
    let reason = tokio::time::timeout(Duration::from_secs(5), client.disconnected()).await?;
    assert!(
        matches!(&reason, ClientError::Transport(m) if m == "the daemon closed the connection"),
        "{reason:?}"
    );
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn an_oversized_frame_from_the_daemon_is_a_transport_error() -> TestResult {
    let daemon = FakeDaemon::start(|request| {
        let body =
            json!({"jsonrpc": "2.0", "id": request["id"].clone(), "result": "x".repeat(4096)}).to_string();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body.as_bytes());
        vec![Out::Raw(frame)]
    })?;
    let client =
        Client::connect_with(&daemon.socket, ConnectOptions::default().max_frame_bytes(1024)).await?;
    match client.request::<Value>("daemon/status", ()).await {
        Err(ClientError::Transport(message)) => assert!(message.contains("limit of 1024 bytes"), "{message}"),
        other => return Err(format!("expected Transport, got {other:?}").into()),
    }
    drop(client);
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn frames_with_a_content_type_header_are_accepted() -> TestResult {
    let daemon = FakeDaemon::start(|request| {
        let body = json!({"jsonrpc": "2.0", "id": request["id"].clone(), "result": {"ok": true}}).to_string();
        let frame = format!(
            "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        vec![Out::Raw(frame.into_bytes())]
    })?;
    let client = Client::connect(&daemon.socket).await?;
    let answer: Value = client.request("anything", json!({})).await?;
    assert_eq!(answer, json!({"ok": true}));
    drop(client);
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn a_silent_daemon_times_out_and_bad_shapes_are_decode_errors() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("daemon/status") => vec![support::result(request, json!({"version": 1}))],
        _ => Vec::new(),
    })?;
    let options = ConnectOptions::default().request_timeout(Duration::from_millis(200));
    let client = Client::connect_with(&daemon.socket, options).await?;
    let error = client.tools_list().await.err();
    assert!(matches!(error, Some(ClientError::Timeout(t)) if t == Duration::from_millis(200)), "{error:?}");
    let error = client.status().await.err();
    assert!(matches!(error, Some(ClientError::Decode(_))), "{error:?}");
    let error = client.request::<Value>("x", "scalar").await.err();
    assert!(matches!(error, Some(ClientError::Encode(_))), "{error:?}");
    drop(client);
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn the_file_and_fs_methods_send_their_wire_names_and_params() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;

    let tool = client.call_tool("read", json!({"file_path": "a.rs", "limit": 5})).await?;
    assert_eq!(tool, support::tool_result(support::READ_TEXT));
    assert_eq!(tool.text(), support::READ_TEXT);

    let read =
        ReadParams { path: "a.rs".to_owned(), offset: Some(2), limit: Some(1), ..ReadParams::default() };
    assert_eq!(client.file_read(read.clone()).await?, support::read_result("a.rs"));
    let write = WriteParams { path: "b.rs".to_owned(), content: "x\n".to_owned(), owner: None };
    assert_eq!(client.file_write(write).await?, support::write_result("b.rs", WriteOperation::Update));
    let edit = EditParams {
        path: "a.rs".to_owned(),
        old_string: "fn".to_owned(),
        new_string: "pub fn".to_owned(),
        replace_all: Some(true),
        owner: None,
    };
    assert_eq!(client.file_edit(edit).await?, support::edit_result("a.rs", 2, true));
    assert_eq!(client.file_stat("a.rs").await?, support::file_stat("a.rs", true));

    assert_eq!(client.fs_resolve("c/../a.rs").await?, support::resolve_result("c/../a.rs"));
    assert_eq!(client.fs_stat("a.rs").await?, support::fs_stat("a.rs"));
    let window = ReadParams { path: "/tmp/project/a.rs".to_owned(), ..ReadParams::default() };
    assert_eq!(client.fs_read_text(window).await?, support::read_result("/tmp/project/a.rs"));
    let write = FsWriteParams {
        path: "d.rs".to_owned(),
        content: String::new(),
        expect: WriteExpectation::ReplaceIfVersion { version: support::VERSION.to_owned() },
        keep_conventions: None,
    };
    assert_eq!(client.fs_write_text(write).await?, support::write_result("d.rs", WriteOperation::Create));
    let edit = FsEditParams {
        path: "a.rs".to_owned(),
        old_string: "main".to_owned(),
        new_string: "start".to_owned(),
        replace_all: None,
        expected_version: support::VERSION.to_owned(),
    };
    assert_eq!(client.fs_edit_text(edit).await?, support::edit_result("a.rs", 1, false));
    client.close().await?;

    let received = daemon.received().await?;
    assert_eq!(
        support::method_names(&received),
        [
            "initialize",
            "tools/call",
            "file/read",
            "file/write",
            "file/edit",
            "file/stat",
            "fs/resolve",
            "fs/stat",
            "fs/readText",
            "fs/writeText",
            "fs/editText",
            "shutdown",
            "exit",
        ]
    );
    let sent: Vec<&Value> = received[1..11].iter().map(|m| &m["params"]).collect();
    assert_eq!(
        sent,
        [
            &json!({"name": "read", "arguments": {"file_path": "a.rs", "limit": 5}}),
            &json!({"path": "a.rs", "offset": 2, "limit": 1}),
            &json!({"path": "b.rs", "content": "x\n"}),
            &json!({"path": "a.rs", "oldString": "fn", "newString": "pub fn", "replaceAll": true}),
            &json!({"path": "a.rs"}),
            &json!({"path": "c/../a.rs"}),
            &json!({"path": "a.rs"}),
            &json!({"path": "/tmp/project/a.rs"}),
            &json!({"path": "d.rs", "content": "", "expect": {"kind": "replaceIfVersion", "version": support::VERSION}}),
            &json!({"path": "a.rs", "oldString": "main", "newString": "start", "expectedVersion": support::VERSION}),
        ]
    );
    for request in &received[1..11] {
        assert!(request["id"].is_number(), "{request}");
    }
    Ok(())
}

#[tokio::test]
async fn file_method_failures_carry_their_fs_code_and_tool_failures_are_results() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("file/edit") => vec![support::fs_error(request, FsErrorCode::NotObserved, "read a.rs first")],
        Some("fs/writeText") => vec![support::fs_error(request, FsErrorCode::NotObserved, "d.rs exists")],
        Some("tools/call") if request["params"]["name"] == "read" => vec![support::result(
            request,
            json!({
                "content": [{"type": "text", "text": "File not found: "}, {"type": "text", "text": "x.rs"}],
                "isError": true,
                "error": {"name": "FsError", "code": "FS_NOT_FOUND"},
            }),
        )],
        Some("tools/call") => vec![support::error(request, -32602, "unknown tool: grep", None)],
        _ => support::standard(request),
    })?;
    let (client, _) = Client::connect_session(&daemon.socket, params()).await?;

    let edit = EditParams {
        path: "a.rs".to_owned(),
        old_string: "a".to_owned(),
        new_string: "b".to_owned(),
        replace_all: None,
        owner: None,
    };
    let error = client.file_edit(edit).await.err();
    assert_eq!(error.as_ref().and_then(ClientError::fs_code), Some(FsErrorCode::NotObserved), "{error:?}");
    assert!(
        matches!(&error, Some(ClientError::Rpc { code: -31008, message, .. }) if message == "read a.rs first"),
        "{error:?}"
    );
    let write = FsWriteParams {
        path: "d.rs".to_owned(),
        content: "x".to_owned(),
        expect: WriteExpectation::CreateIfAbsent,
        keep_conventions: Some(true),
    };
    let error = client.fs_write_text(write).await.err();
    assert_eq!(error.as_ref().and_then(ClientError::fs_code), Some(FsErrorCode::NotObserved), "{error:?}");

    // A failed tool is a result, with the code in `error`; an unknown tool is a JSON-RPC error.
    let tool = client.call_tool("read", json!({"file_path": "x.rs"})).await?;
    assert!(tool.is_error);
    assert_eq!(tool.text(), "File not found: x.rs");
    assert_eq!(tool.error.map(|e| e.code), Some(FsErrorCode::NotFound));
    let error = client.call_tool("grep", json!({})).await.err();
    assert!(matches!(error, Some(ClientError::Rpc { code: -32602, data: None, .. })), "{error:?}");

    client.close().await?;
    let received = daemon.received().await?;
    assert_eq!(received[4]["params"], json!({"name": "grep", "arguments": {}}));
    assert_eq!(received[2]["params"]["expect"], json!({"kind": "createIfAbsent"}));
    assert_eq!(received[2]["params"]["keepConventions"], true);
    Ok(())
}

#[tokio::test]
async fn a_cancelled_request_is_named_in_cancel_request_when_the_daemon_has_the_feature() -> TestResult {
    for (features, expect_cancel) in [(vec!["cancelRequest"], true), (vec![], false)] {
        let (heard, mut seen) = tokio::sync::mpsc::unbounded_channel();
        let daemon = FakeDaemon::start(move |request| {
            let _ = heard.send(request.clone());
            match request["method"].as_str() {
                Some("initialize") => {
                    let mut result = serde_json::to_value(support::initialize_result()).unwrap_or_default();
                    result["capabilities"]["features"] = json!(features);
                    vec![support::result(request, result)]
                }
                // Never answered: it is cancelled first.
                Some("tools/call") => Vec::new(),
                _ => support::standard(request),
            }
        })?;
        let client = Client::connect(&daemon.socket).await?;
        client.initialize(params()).await?;
        let _initialize = seen.recv().await.ok_or("the fake daemon is gone")?;
        let mut received = None;
        let call = client.request_cancellable::<Value>(
            methods::TOOLS_CALL,
            json!({"name": "read", "arguments": {"file_path": "a"}}),
            async {
                // Called off once the daemon has the request.
                received = seen.recv().await;
            },
        );
        let outcome = tokio::time::timeout(Duration::from_secs(10), call).await?;
        assert!(matches!(outcome, Err(ClientError::Cancelled)), "{outcome:?}");
        let request = received.ok_or("the daemon never got the request")?;
        assert_eq!(request["method"], "tools/call");
        client.close().await?;
        let methods_after: Vec<Value> =
            daemon.received().await?.into_iter().skip(2).map(|m| json!([m["method"], m["params"]])).collect();
        let mut expected = Vec::new();
        if expect_cancel {
            expected.push(json!(["$/cancelRequest", {"id": request["id"]}]));
        }
        expected.extend([json!(["shutdown", null]), json!(["exit", null])]);
        assert_eq!(methods_after, expected);
    }
    Ok(())
}

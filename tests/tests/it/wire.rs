//! The wire contract through the real socket: framing, JSON-RPC validation, batches,
//! session lifecycle, and every kind of bad input, each answered with the right error or a
//! clean close of that connection alone.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use filectx_tests::{Daemon, PATIENCE, Raw, error_code, wait_for_sessions};
use serde_json::{Value, json};

/// Initialize and `daemon/status` with hand-written bytes: the wire format, pinned.
#[test]
fn raw_bytes_initialize_and_status() {
    let daemon = Daemon::start(&[]);
    let root = daemon.dir.path().display().to_string();
    let mut stream = UnixStream::connect(&daemon.socket).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"clientInfo":{{"name":"raw"}},"roots":["{root}"]}}}}"#
    );
    let status = r#"{"jsonrpc":"2.0","id":"two","method":"daemon/status"}"#;
    // Both frames in one write, the second with an ignored Content-Type header.
    let bytes = format!(
        "Content-Length: {}\r\n\r\n{init}Content-Length: {}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{status}",
        init.len(),
        status.len()
    );
    stream.write_all(bytes.as_bytes()).unwrap();

    let mut read_frame = || -> Value {
        let mut header = Vec::new();
        let mut byte = [0u8];
        while !header.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).unwrap();
            header.push(byte[0]);
        }
        let header = String::from_utf8(header).unwrap();
        assert!(header.starts_with("Content-Length: "), "{header:?}");
        let length: usize = header["Content-Length: ".len()..].trim_end().parse().unwrap();
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).unwrap();
        serde_json::from_slice(&body).unwrap()
    };
    let first = read_frame();
    assert_eq!(first["jsonrpc"], "2.0");
    assert_eq!(first["id"], 1);
    let result = &first["result"];
    assert_eq!(result["serverInfo"]["name"], "filectxd");
    assert_eq!(result["protocolVersion"], 2);
    assert!(result["sessionId"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(result["instructions"].as_str().is_some_and(|s| s.contains("read")));
    assert_eq!(result["capabilities"]["tools"], json!(["read", "write", "edit"]));
    assert_eq!(result["capabilities"]["readOnly"], false);
    assert_eq!(result["limits"]["readLineLimit"], 2000);
    assert_eq!(result["limits"]["maxFrameBytes"], 64 * 1024 * 1024);

    let second = read_frame();
    assert_eq!(second["id"], "two");
    let status = &second["result"];
    for field in ["version", "uptimeMs", "sessions", "cachedFiles", "mappedBytes", "watchedPaths", "requests"]
    {
        assert!(status.get(field).is_some(), "daemon/status lacks {field}: {status}");
    }
    // This session, and maybe for a moment the readiness probe's (counted until its task ends).
    assert!(status["sessions"].as_u64().is_some_and(|n| n >= 1), "{status}");
    assert_eq!(status["requests"], 2);
}

#[test]
fn requests_before_initialize_are_refused_and_notifications_ignored() {
    let daemon = Daemon::start(&[]);
    let mut raw = Raw::connect(&daemon.socket);
    raw.send(&json!({"jsonrpc": "2.0", "method": "something/happened"}));
    let response = raw.request("daemon/status", None);
    assert_eq!(error_code(&response), -32002);
    assert!(response["error"]["message"].as_str().unwrap().contains("initialize"));
    raw.initialize(daemon.dir.path());
    wait_for_sessions(&mut raw, 1);
}

#[test]
fn initialize_is_validated() {
    let daemon = Daemon::start(&[]);
    let root = daemon.dir.path();
    let file = root.join("file.txt");
    std::fs::write(&file, "x").unwrap();
    let cases = [
        (json!({"roots": 5}), -32602, None),
        (json!({"roots": ["/tmp"], "readonly": true}), -32602, None),
        (json!({"roots": []}), -31001, Some("FS_INVALID_ARGUMENT")),
        (json!({"roots": ["relative/path"]}), -31001, Some("FS_INVALID_ARGUMENT")),
        (json!({"roots": [root.join("missing")]}), -31002, Some("FS_NOT_FOUND")),
        (json!({"roots": [file]}), -31001, Some("FS_INVALID_ARGUMENT")),
        (json!({"roots": [root], "cwd": "/"}), -31007, Some("FS_OUTSIDE_ROOT")),
        (json!({"roots": [root], "tools": ["read", "delete"]}), -32602, None),
    ];
    for (params, code, fs_code) in cases {
        let mut raw = Raw::connect(&daemon.socket);
        let response = raw.request("initialize", Some(params.clone()));
        assert_eq!(error_code(&response), code, "{params}: {response}");
        if let Some(fs_code) = fs_code {
            assert_eq!(response["error"]["data"]["code"], fs_code, "{response}");
        }
        // The session is still uninitialized and usable.
        assert_eq!(error_code(&raw.request("tools/list", None)), -32002);
        raw.initialize(root);
    }
    let mut raw = daemon.session();
    let again = raw.request("initialize", Some(json!({"roots": [root]})));
    assert_eq!(again["error"]["data"]["code"], "FS_INVALID_ARGUMENT", "{again}");
}

#[test]
fn session_options_shape_tools_list_and_capabilities() {
    let daemon = Daemon::start(&[]);
    let sub = daemon.dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let mut raw = Raw::connect(&daemon.socket);
    let init = raw.call(
        "initialize",
        Some(json!({"roots": [daemon.dir.path()], "cwd": sub, "tools": ["edit", "read"], "readOnly": true})),
    );
    assert_eq!(init["capabilities"]["tools"], json!(["read", "edit"]));
    assert_eq!(init["capabilities"]["readOnly"], true);
    let methods = init["capabilities"]["methods"].as_array().unwrap();
    for m in ["initialize", "shutdown", "daemon/status", "tools/list"] {
        assert!(methods.contains(&json!(m)), "{m} missing from {methods:?}");
    }
    assert!(init["instructions"].as_str().unwrap().contains("read-only"));
    let tools = raw.call("tools/list", None);
    let names: Vec<&str> =
        tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["read", "edit"]);
    let edit = &tools["tools"][1];
    assert_eq!(edit["inputSchema"]["required"], json!(["file_path", "old_string", "new_string"]));
    assert_eq!(edit["inputSchema"]["properties"]["replace_all"]["type"], "boolean");
}

#[test]
fn invalid_messages_get_standard_errors_and_the_connection_stays_usable() {
    let daemon = Daemon::start(&[]);
    let mut raw = daemon.session();
    let cases: &[(&[u8], i64, Value)] = &[
        (b"{not json", -32700, Value::Null),
        (b"\xff\xfe{}", -32700, Value::Null),
        (b"", -32700, Value::Null),
        (b"42", -32600, Value::Null),
        (b"\"a string\"", -32600, Value::Null),
        (b"null", -32600, Value::Null),
        (b"[]", -32600, Value::Null),
        (br#"{"jsonrpc":"1.0","id":7,"method":"daemon/status"}"#, -32600, json!(7)),
        (br#"{"id":8,"method":"daemon/status"}"#, -32600, json!(8)),
        (br#"{"jsonrpc":"2.0","id":9,"method":5}"#, -32600, json!(9)),
        (br#"{"jsonrpc":"2.0","id":10,"method":"no/such/method"}"#, -32601, json!(10)),
        (br#"{"jsonrpc":"2.0","id":11,"method":"initialize","params":[1,2]}"#, -32602, json!(11)),
    ];
    for (body, code, id) in cases {
        raw.send_body(body);
        let response = raw.recv();
        assert_eq!(error_code(&response), *code, "{}: {response}", String::from_utf8_lossy(body));
        assert_eq!(&response["id"], id, "{}: {response}", String::from_utf8_lossy(body));
        assert_eq!(response["jsonrpc"], "2.0");
    }
    wait_for_sessions(&mut raw, 1);
}

#[test]
fn batches_answer_requests_only() {
    let daemon = Daemon::start(&[]);
    let mut raw = daemon.session();
    raw.send(&json!([
        {"jsonrpc": "2.0", "id": 1, "method": "daemon/status"},
        {"jsonrpc": "2.0", "method": "some/notification"},
        {"jsonrpc": "2.0", "id": 2, "method": "no/such/method"},
        {"foo": "bar"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]));
    let response = raw.recv();
    let entries = response.as_array().unwrap_or_else(|| panic!("a batch answer is an array: {response}"));
    assert_eq!(entries.len(), 4, "{response}");
    let by_id = |id: Value| entries.iter().find(|e| e["id"] == id).unwrap_or_else(|| panic!("{id} missing"));
    assert!(by_id(json!(1))["result"]["sessions"].is_number());
    assert_eq!(error_code(by_id(json!(2))), -32601);
    assert_eq!(error_code(by_id(Value::Null)), -32600);
    assert_eq!(by_id(json!(3))["result"]["tools"].as_array().unwrap().len(), 3);

    // A batch of notifications gets no answer at all: the next frame is the next response.
    raw.send(&json!([{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "method": "b"}]));
    assert!(raw.call("daemon/status", None)["requests"].is_number());
}

#[test]
fn batch_over_the_cap_is_refused() {
    let daemon = Daemon::start(&["--max-batch", "3"]);
    let mut raw = daemon.session();
    let entry = json!({"jsonrpc": "2.0", "id": 1, "method": "daemon/status"});
    raw.send(&json!([entry, entry, entry, entry]));
    assert_eq!(error_code(&raw.recv()), -32010);
    raw.send(&json!([entry, entry, entry]));
    assert_eq!(raw.recv().as_array().unwrap().len(), 3);
}

#[test]
fn pipelined_requests_are_all_answered() {
    let daemon = Daemon::start(&[]);
    let mut raw = daemon.session();
    let mut frames = Vec::new();
    for id in 0..500 {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "daemon/status"}).to_string();
        frames.extend_from_slice(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }
    raw.send_bytes(&frames);
    let mut seen: Vec<i64> = (0..500).map(|_| raw.recv()["id"].as_i64().unwrap()).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..500).collect::<Vec<_>>());
}

#[test]
fn unframeable_headers_close_only_that_connection() {
    let daemon = Daemon::start(&[]);
    let mut bystander = daemon.session();
    let mut huge_header = b"X-Padding: ".to_vec();
    huge_header.extend(std::iter::repeat_n(b'a', 10 * 1024));
    let cases: Vec<Vec<u8>> = vec![
        b"hello there\r\n\r\n{}".to_vec(),
        b"Content-Type: application/json\r\n\r\n{}".to_vec(),
        b"Content-Length: -5\r\n\r\n{}".to_vec(),
        b"Content-Length: abc\r\n\r\n{}".to_vec(),
        b"Content-Length: 99999999999999999999999\r\n\r\n{}".to_vec(),
        huge_header,
    ];
    for case in cases {
        let mut raw = daemon.session();
        raw.send_bytes(&case);
        let last = raw.recv_opt();
        if let Some(response) = &last {
            assert_eq!(error_code(response), -32700, "{response}");
            assert!(response["error"]["message"].as_str().unwrap().contains("closing"));
        }
        assert!(raw.closed(), "connection must close after {:?}", String::from_utf8_lossy(&case[..20]));
        assert!(bystander.call("daemon/status", None)["sessions"].is_number());
    }
    let log = daemon.log_text();
    assert!(log.contains("cannot be resynchronised"), "{log}");
}

#[test]
fn oversized_frame_is_skipped_and_the_connection_stays_usable() {
    let daemon = Daemon::start(&["--max-frame-bytes", "4096"]);
    let mut raw = daemon.session();
    let big =
        json!({"jsonrpc": "2.0", "id": 1, "method": "daemon/status", "params": {"pad": "x".repeat(10_000)}});
    raw.send(&big);
    let response = raw.recv();
    assert_eq!(error_code(&response), -32007, "{response}");
    assert_eq!(response["id"], Value::Null);
    assert_eq!(response["error"]["data"]["limit"], 4096);
    wait_for_sessions(&mut raw, 1);
}

#[test]
fn large_answers_serialized_by_their_handlers_stay_within_the_frame_limit() {
    // file/read and tools/call serialize their answers themselves (no second parse): their
    // windows are still cut to the frame limit, and each answer is a whole, valid response.
    let daemon = Daemon::start(&["--max-frame-bytes", "4096"]);
    let root = filectx_tests::root_of(&daemon);
    std::fs::write(root.join("big.txt"), "a line of \"text\"\t\u{e9}\n".repeat(1_000)).unwrap();
    let mut raw = daemon.session();
    let read = filectx_tests::rpc(&mut raw, "file/read", json!({"path": "big.txt"}));
    assert_eq!(read["id"], 2, "{read}");
    let lines = read["result"]["lines"].as_array().unwrap();
    assert!(lines.len() > 10 && lines.len() < 1_000, "{read}");
    assert!(lines.iter().all(|l| l == "a line of \"text\"\t\u{e9}"), "{read}");
    assert_eq!(read["result"]["truncatedByBytes"], true, "{read}");
    assert!(serde_json::to_string(&read).unwrap().len() <= 4096);
    let call = json!({"name": "read", "arguments": {"file_path": "big.txt"}});
    let tool = filectx_tests::rpc(&mut raw, "tools/call", call);
    assert_eq!(tool["id"], 3, "{tool}");
    let text = tool["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("1\ta line of \"text\"\t\u{e9}\n2\t"), "{text}");
    assert!(serde_json::to_string(&tool).unwrap().len() <= 4096);
}

#[test]
fn answers_written_by_their_handlers_carry_every_character_under_any_id() {
    // The read tool's text and file/read's lines are escaped by the daemon's own escaper
    // straight into the response: control characters, quotes, backslashes, non-ASCII, CRLF
    // and a lone CR come back as the file has them, under a string id that needs escaping
    // too, alone and in a batch.
    let daemon = Daemon::start(&[]);
    let root = filectx_tests::root_of(&daemon);
    let controls: String = (1u8..0x20).filter(|&b| b != b'\n' && b != b'\r').map(char::from).collect();
    let lines = [
        format!("ctl {controls} end"),
        "\"quoted\" \\back\\slash\\".to_owned(),
        "é日✓\u{7f}\u{2028}".to_owned(),
        String::new(),
        "\tindented".to_owned(),
        "cr\rinside".to_owned(),
    ];
    std::fs::write(root.join("odd.txt"), lines.join("\r\n") + "\r\n").unwrap();
    let mut raw = daemon.session();
    let id = "a \"quoted\"\tid\\";
    raw.send(&json!({"jsonrpc": "2.0", "id": id, "method": "file/read", "params": {"path": "odd.txt"}}));
    let read = raw.recv();
    assert_eq!(read["id"], id, "{read}");
    assert_eq!(read["result"]["lines"], json!(lines), "{read}");
    assert_eq!(read["result"]["totalLines"], 6, "{read}");
    let call = json!({"name": "read", "arguments": {"file_path": "odd.txt"}});
    raw.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": call}));
    let tool = raw.recv();
    assert_eq!(tool["id"], id, "{tool}");
    let numbered: String = lines.iter().zip(1..).map(|(line, n)| format!("{n}\t{line}\n")).collect();
    let expected = format!("{numbered}\n(End of file - total 6 lines)");
    assert_eq!(tool["result"]["content"][0]["text"], expected.as_str(), "{tool}");
    assert_eq!(tool["result"]["isError"], false, "{tool}");
    raw.send(&json!([
        {"jsonrpc": "2.0", "id": 7, "method": "file/read", "params": {"path": "odd.txt", "offset": 2, "limit": 1}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
         "params": {"name": "read", "arguments": {"file_path": "odd.txt", "offset": 3, "limit": 1}}},
    ]));
    let batch = raw.recv();
    assert_eq!(batch[0]["id"], 7, "{batch}");
    assert_eq!(batch[0]["result"]["lines"], json!([lines[1]]), "{batch}");
    assert_eq!(batch[1]["id"], 8, "{batch}");
    let text = format!("3\t{}\n\n(Showing lines 3-3 of 6. Use offset=4 to continue.)", lines[2]);
    assert_eq!(batch[1]["result"]["content"][0]["text"], text.as_str(), "{batch}");
}

#[test]
fn absurd_content_length_is_answered_without_buffering() {
    let daemon = Daemon::start(&[]);
    let mut bystander = daemon.session();
    let mut raw = daemon.session();
    let rss_before = daemon.rss_kib();
    raw.send_bytes(b"Content-Length: 1000000000000000\r\n\r\n");
    assert_eq!(error_code(&raw.recv()), -32007);
    // Stream 32 MiB of body: the daemon must discard it, not keep it.
    let chunk = vec![b'x'; 1024 * 1024];
    for _ in 0..32 {
        raw.send_bytes(&chunk);
    }
    assert_eq!(bystander.call("daemon/status", None)["sessions"], 2);
    let grown = daemon.rss_kib().saturating_sub(rss_before);
    assert!(grown < 16 * 1024, "daemon RSS grew by {grown} KiB while discarding a body");
}

#[test]
fn half_sent_frame_then_disconnect_leaves_others_unaffected() {
    let daemon = Daemon::start(&[]);
    let mut bystander = daemon.session();
    {
        let mut raw = daemon.session();
        raw.send_bytes(b"Content-Length: 100\r\n\r\n{\"jsonrpc\":\"2.0\",");
    }
    {
        let mut raw = Raw::connect(&daemon.socket);
        raw.send_bytes(b"Content-Len");
    }
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let sessions = bystander.call("daemon/status", None)["sessions"].as_u64().unwrap();
        if sessions == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "sessions stuck at {sessions}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(daemon.log_text().contains("disconnected in the middle of a frame"));
}

#[test]
fn shutdown_then_exit_ends_the_session_politely() {
    let daemon = Daemon::start(&[]);
    let mut raw = daemon.session();
    assert_eq!(raw.call("shutdown", None), Value::Null);
    assert_eq!(error_code(&raw.request("daemon/status", None)), -32600);
    raw.send(&json!({"jsonrpc": "2.0", "method": "exit"}));
    assert!(raw.closed());
}

#[test]
fn pipelined_reads_answered_while_the_client_is_not_reading_arrive_whole_and_once() {
    // Warm reads are answered from the connection's reader and written straight to the socket
    // while nothing of the connection is queued; once the client stops reading, a frame the
    // socket takes only in part is finished by the writer before anything queued behind it.
    // Every answer must still arrive whole, as a valid frame, exactly once.
    let daemon = Daemon::start(&[]);
    let root = filectx_tests::root_of(&daemon);
    let text: String = (0..2_000).map(|i| format!("line {i} with \"quotes\" and \u{e9}\n")).collect();
    std::fs::write(root.join("f.txt"), &text).unwrap();
    let mut raw = daemon.session();
    let warm = filectx_tests::rpc(&mut raw, "file/read", json!({"path": "f.txt", "limit": 10}));
    assert_eq!(warm["result"]["lines"][0], "line 0 with \"quotes\" and \u{e9}", "{warm}");
    let ids = 100..400u64;
    let mut frames = Vec::new();
    for id in ids.clone() {
        let offset = (id % 50) * 30 + 1;
        let params = json!({"path": "f.txt", "offset": offset, "limit": 400});
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "file/read", "params": params}).to_string();
        frames.extend_from_slice(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }
    // ~300 answers of ~14 KB: far more than the socket holds while nobody reads them.
    let mut writer = raw.stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&frames).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut seen = Vec::new();
    for _ in ids.clone() {
        let answer = raw.recv();
        let id = answer["id"].as_u64().unwrap_or_else(|| panic!("{answer}"));
        let lines = answer["result"]["lines"].as_array().unwrap_or_else(|| panic!("{answer}"));
        let first = (id % 50) * 30;
        assert_eq!(lines.len(), 400, "{id}");
        assert_eq!(lines[0], format!("line {first} with \"quotes\" and \u{e9}"), "{id}");
        assert_eq!(lines[399], format!("line {} with \"quotes\" and \u{e9}", first + 399), "{id}");
        seen.push(id);
    }
    sender.join().unwrap();
    seen.sort_unstable();
    assert_eq!(seen, ids.collect::<Vec<_>>());
    assert!(raw.call("daemon/status", None)["sessions"].is_number(), "the connection stays usable");
}

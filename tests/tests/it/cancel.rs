//! `$/cancelRequest`: a request still waiting for a file-work slot gives up its place and
//! answers -32800 (`tools/call`: an `FS_ABORTED` result); one that started runs to its end; a
//! cancel for an unknown id changes nothing.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, PATIENCE, Raw, error_code, ok};
use serde_json::json;

fn hooked() -> Daemon {
    // Two slots: one session may hold one, so its second file request waits.
    Daemon::start_configured(&["--file-slots", "2"], |_, mut command| {
        command.env("FILECTX_TEST_HOOKS", "1");
        command
    })
}

fn waiting(daemon: &Daemon) -> u64 {
    daemon.status()["fileSlotsWaiting"].as_u64().unwrap()
}

fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn cancel(raw: &mut Raw, id: u64) {
    raw.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
}

#[test]
fn a_waiting_request_is_cancelled_and_a_running_one_finishes() {
    let daemon = hooked();
    let root = daemon.dir.path().canonicalize().unwrap();
    let gates = root.join("gates");
    fs::create_dir(&gates).unwrap();
    // Over 64 KiB, so that its first read is file work (a smaller one is read at once on the
    // async worker, without a slot).
    fs::write(root.join("notes.txt"), format!("one\ntwo\n{}", "pad\n".repeat(20_000))).unwrap();
    let mut raw = Raw::connect(&daemon.socket);
    let init = raw.initialize(&root);
    assert!(init["capabilities"]["features"].as_array().unwrap().contains(&json!("cancelRequest")), "{init}");
    let hold = raw.send_request("debug/hold", Some(json!({"dir": gates, "name": "h"})));
    until("the hold runs", || gates.join("h.started").exists());

    // A tool read and a file/write wait for the session's second slot; both are cancelled.
    let read = raw
        .send_request("tools/call", Some(json!({"name": "read", "arguments": {"file_path": "notes.txt"}})));
    let write = raw.send_request("file/write", Some(json!({"path": "new.txt", "content": "x\n"})));
    until("both wait for a slot", || waiting(&daemon) == 2);
    cancel(&mut raw, read);
    cancel(&mut raw, write);
    cancel(&mut raw, 999_999);
    let mut answers = [raw.recv(), raw.recv()];
    answers.sort_by_key(|a| a["id"].as_u64());
    let (read_answer, write_answer) = (&answers[0], &answers[1]);
    assert_eq!(read_answer["id"].as_u64(), Some(read), "{read_answer}");
    assert_eq!(read_answer["result"]["isError"], true, "{read_answer}");
    assert_eq!(read_answer["result"]["error"]["code"], "FS_ABORTED", "{read_answer}");
    assert_eq!(write_answer["id"].as_u64(), Some(write), "{write_answer}");
    assert_eq!(error_code(write_answer), -32800, "{write_answer}");
    assert!(!Path::new(&root.join("new.txt")).exists(), "a cancelled write never lands");
    assert_eq!(waiting(&daemon), 0, "the cancelled requests left the queue");

    // The running request is not interrupted: it answers when it is done.
    cancel(&mut raw, hold);
    fs::write(gates.join("h.go"), "").unwrap();
    let held = raw.recv();
    assert_eq!((held["id"].as_u64(), held["result"].as_str()), (Some(hold), Some("h")), "{held}");

    // The session goes on as before.
    let text = ok(&mut raw, "tools/call", json!({"name": "read", "arguments": {"file_path": "notes.txt"}}));
    assert_eq!(text["isError"], false, "{text}");
}

#[test]
fn a_cancel_right_behind_its_request_in_the_same_write_is_never_lost() {
    // The reader polls each call once before it reads the next frame, so a waiting request's
    // cancellation exists before the cancel behind it can be read.
    let daemon = hooked();
    let root = daemon.dir.path().canonicalize().unwrap();
    let gates = root.join("gates");
    fs::create_dir(&gates).unwrap();
    let mut raw = Raw::connect(&daemon.socket);
    raw.initialize(&root);
    let hold = raw.send_request("debug/hold", Some(json!({"dir": gates, "name": "h"})));
    until("the hold runs", || gates.join("h.started").exists());
    let frame = |message: serde_json::Value| {
        let body = message.to_string();
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    };
    for n in 0..20u64 {
        let id = 1_000 + n;
        let path = format!("new{n}.txt");
        let write = json!({"jsonrpc": "2.0", "id": id, "method": "file/write",
            "params": {"path": path, "content": "x\n"}});
        let cancel = json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}});
        raw.send_bytes((frame(write) + &frame(cancel)).as_bytes());
        let answer = raw.recv();
        assert_eq!(answer["id"].as_u64(), Some(id), "{answer}");
        assert_eq!(error_code(&answer), -32800, "{answer}");
        assert!(!root.join(&path).exists(), "a cancelled write never lands");
    }
    fs::write(gates.join("h.go"), "").unwrap();
    let held = raw.recv();
    assert_eq!(held["id"].as_u64(), Some(hold), "{held}");
}

//! Our client library and the `filectx` CLI against the real daemon, plus the daemon run
//! in-process through its library entry point.

use std::process::Command;

use filectx_client::{Client, ClientError};
use filectx_daemon::listen::{self, FolderPolicy};
use filectx_protocol::{FsErrorCode, InitializeParams, ToolName};
use filectx_tests::{Daemon, PATIENCE, bin};
use serde_json::Value;

fn params(root: &std::path::Path) -> InitializeParams {
    InitializeParams::new(vec![root.display().to_string()])
}

#[tokio::test]
async fn library_client_opens_a_session_and_reads_status() {
    let daemon = Daemon::start(&[]);
    let (client, session) = Client::connect_session(&daemon.socket, params(daemon.dir.path())).await.unwrap();
    assert_eq!(session.server_info.name, "filectxd");
    // A session that names no tools keeps the three it always had.
    assert_eq!(session.capabilities.tools, ToolName::DEFAULT.to_vec());
    // This session alone, once the readiness probe's has ended (it counts until its task ends).
    let deadline = std::time::Instant::now() + PATIENCE;
    let mut status = client.status().await.unwrap();
    while status.sessions != 1 {
        assert!(std::time::Instant::now() < deadline, "sessions stuck at {}", status.sessions);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        status = client.status().await.unwrap();
    }
    assert_eq!(status.pid, daemon.child.id());
    let tools = client.tools_list().await.unwrap();
    assert_eq!(tools.tools.len(), 3);
    client.close().await.unwrap();

    // FS_* failures arrive typed.
    let client = Client::connect(&daemon.socket).await.unwrap();
    let err = client.initialize(params(&daemon.dir.path().join("missing"))).await.unwrap_err();
    assert_eq!(err.fs_code(), Some(FsErrorCode::NotFound), "{err}");
    let err = client.status().await.unwrap_err();
    assert!(matches!(err, ClientError::Rpc { code: -32002, .. }), "{err}");
}

#[tokio::test]
async fn the_library_resumes_a_session_and_keeps_owners_apart() {
    let daemon = Daemon::start(&[]);
    let root = daemon.dir.path().canonicalize().unwrap();
    let file = root.join("lib.txt");
    std::fs::write(&file, "one\n").unwrap();
    let path = file.display().to_string();
    let resumable = InitializeParams { resumable: Some(true), ..params(&root) };
    let (client, _) = Client::connect_session(&daemon.socket, resumable).await.unwrap();
    for feature in ["owners", "dedupReads", "contextReset", "resume"] {
        assert!(client.has_feature(feature), "{feature}: {:?}", client.features());
    }
    let token = client.resume_token().expect("a resume token").to_owned();
    let read = filectx_protocol::ReadParams {
        path: path.clone(),
        owner: Some("sub".into()),
        ..filectx_protocol::ReadParams::default()
    };
    client.file_read(read).await.unwrap();
    assert!(client.file_stat_as(Some("sub"), &path).await.unwrap().fresh);
    assert!(!client.file_stat(&path).await.unwrap().fresh, "the default owner read nothing");
    client.context_reset(None).await.unwrap();
    drop(client);

    let resume = InitializeParams { resume: Some(token.clone()), ..params(&root) };
    let (client, _) = Client::connect_session(&daemon.socket, resume).await.unwrap();
    let edit = filectx_protocol::EditParams {
        path: path.clone(),
        old_string: "one".into(),
        new_string: "two".into(),
        replace_all: None,
        owner: Some("sub".into()),
    };
    client.file_edit(edit).await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "two\n");
    drop(client);
    let client = Client::connect(&daemon.socket).await.unwrap();
    let err = client.initialize(InitializeParams { resume: Some(token), ..params(&root) }).await.unwrap_err();
    assert!(err.is_resume_refused(), "{err}");
}

#[tokio::test]
async fn concurrent_calls_on_one_client_are_all_answered() {
    let daemon = Daemon::start(&[]);
    let (client, _) = Client::connect_session(&daemon.socket, params(daemon.dir.path())).await.unwrap();
    let calls = (0..200).map(|_| client.status());
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(Result::is_ok));
}

#[tokio::test]
async fn daemon_runs_in_process_through_its_library() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("filectx.sock");
    let bound = listen::bind(&socket, FolderPolicy::AsGiven).unwrap();
    let listener = tokio::net::UnixListener::from_std(bound.listener).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(filectx_daemon::run(listener, filectx_daemon::Config::default(), async move {
        let _ = stopped.await;
    }));
    let (client, _) = Client::connect_session(&socket, params(dir.path())).await.unwrap();
    assert_eq!(client.status().await.unwrap().sessions, 1);
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    drop(bound.guard);
    assert!(!socket.exists());
}

fn filectx(daemon_socket: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(bin("filectx"))
        .env("FILECTX_NO_AUTOSTART", "1")
        .arg("--socket")
        .arg(daemon_socket)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn cli_status_and_tools_against_a_running_daemon() {
    let daemon = Daemon::start(&[]);
    let out = filectx(&daemon.socket, &["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sessions") && text.contains("uptime"), "{text}");
    assert!(text.contains(&daemon.child.id().to_string()), "{text}");

    let out = filectx(&daemon.socket, &["--json", "status"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["sessions"], 1);
    assert!(json["uptimeMs"].is_u64());

    let out = filectx(&daemon.socket, &["tools"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["read", "write", "edit", "file_path", "old_string", "replace_all"] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    // Every CLI call ended its session politely.
    assert!(daemon.log_text().matches("shutdown requested").count() >= 3);
}

#[test]
fn cli_without_a_daemon_says_so_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let out = filectx(&dir.path().join("none.sock"), &["status"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no daemon is listening") && stderr.contains("filectxd"), "{stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

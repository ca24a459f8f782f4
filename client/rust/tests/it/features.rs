//! Protocol-2 features in the library and `filectx mcp`, against a fake daemon: `owner`,
//! `session/contextReset` and the `initialize` options go on the wire only when the daemon
//! announces their feature; an older daemon that refuses an unknown `initialize` field is a typed
//! `ClientError::Unsupported` (and the session can still be opened without it); `filectx mcp`
//! (deduplicated re-reads on by default, a read budget for a client that cuts) on such a daemon
//! says so on stderr and serves without them.

use filectx_client::{Client, ClientError};
use filectx_protocol::{InitializeParams, ReadParams, features};
use serde_json::{Value, json};

use crate::support::{self, FakeDaemon, TestResult, text};

fn params() -> InitializeParams {
    InitializeParams::new(vec!["/tmp/project".to_owned()])
}

/// A fake protocol-2 daemon announcing `features` (and a resume token when asked for one).
fn daemon_with(features: &'static [&'static str]) -> TestResult<FakeDaemon> {
    FakeDaemon::start(move |request| match request["method"].as_str() {
        Some("initialize") => {
            let mut result = support::initialize_result();
            result.capabilities.features = features.iter().map(|f| (*f).to_owned()).collect();
            if request["params"]["resumable"] == true {
                result.resume_token = Some("0123abcd".to_owned());
            }
            vec![support::answer(request, result)]
        }
        Some("session/contextReset") => vec![support::result(request, Value::Null)],
        _ => support::standard(request),
    })
}

/// A fake daemon of an older build: it refuses unknown `initialize` fields, as filectxd does.
fn old_daemon() -> TestResult<FakeDaemon> {
    FakeDaemon::start(|request| {
        let new_field = ["resumable", "resume", "dedupReads", "readMaxBytes", "jsonBudget"]
            .into_iter()
            .find(|field| request["method"] == "initialize" && request["params"].get(*field).is_some());
        // The first tool it does not know, as serde names it.
        let search_tool = request["params"]["tools"]
            .as_array()
            .filter(|_| request["method"] == "initialize")
            .and_then(|tools| {
                tools.iter().filter_map(Value::as_str).find(|t| ["glob", "grep", "diagnostics"].contains(t))
            });
        if let Some(tool) = search_tool {
            return vec![support::error(
                request,
                -32602,
                &format!(
                    "Invalid params for initialize: unknown variant `{tool}`, expected one of `read`, \
                     `write`, `edit` at line 1 column 90"
                ),
                None,
            )];
        }
        match new_field {
            Some(field) => vec![support::error(
                request,
                -32602,
                &format!(
                    "Invalid params for initialize: unknown field `{field}`, expected one of `clientInfo`, \
                     `roots`, `cwd`, `tools`, `readOnly`, `deny` at line 1 column 60"
                ),
                None,
            )],
            None => support::standard(request),
        }
    })
}

fn methods_of(received: &[Value]) -> Vec<&str> {
    received.iter().filter_map(|m| m["method"].as_str()).collect()
}

#[tokio::test]
async fn owner_and_context_reset_wait_for_their_features() -> TestResult {
    let daemon = daemon_with(&[])?;
    let client = Client::connect(&daemon.socket).await?;
    assert_eq!(client.features(), None, "nothing known before initialize");
    client.initialize(params()).await?;
    assert_eq!(client.features(), Some(&[][..]));
    assert!(!client.has_feature(features::OWNERS));

    let unsupported = |error: Option<ClientError>, want: &str| match error {
        Some(ClientError::Unsupported { feature }) => assert_eq!(feature, want),
        other => panic!("expected Unsupported({want}), got {other:?}"),
    };
    unsupported(client.call_tool_as(Some("sub"), "read", json!({"file_path": "a.rs"})).await.err(), "owners");
    let read = ReadParams { path: "a.rs".into(), owner: Some("sub".into()), ..ReadParams::default() };
    unsupported(client.file_read(read).await.err(), "owners");
    unsupported(client.file_stat_as(Some("sub"), "a.rs").await.err(), "owners");
    unsupported(client.context_reset(None).await.err(), "contextReset");
    let message = client.context_reset(None).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("contextReset") && message.contains("older filectxd"), "{message}");
    // Without an owner nothing needs the feature.
    client.call_tool_as(None, "read", json!({"file_path": "a.rs"})).await?;
    drop(client);
    let received = daemon.received().await?;
    assert_eq!(methods_of(&received), ["initialize", "tools/call"], "nothing refused was sent");
    assert!(received[1]["params"].get("owner").is_none(), "{}", received[1]);
    Ok(())
}

#[tokio::test]
async fn announced_features_put_owner_and_reset_on_the_wire() -> TestResult {
    let daemon = daemon_with(&[features::OWNERS, features::CONTEXT_RESET, features::RESUME])?;
    let client = Client::connect(&daemon.socket).await?;
    let result = client.initialize(InitializeParams { resumable: Some(true), ..params() }).await?;
    assert_eq!(result.resume_token.as_deref(), Some("0123abcd"));
    assert_eq!(client.resume_token(), Some("0123abcd"));
    client.call_tool_as(Some("sub"), "read", json!({"file_path": "a.rs"})).await?;
    client.file_stat_as(Some("sub"), "a.rs").await?;
    client.context_reset(Some("sub")).await?;
    client.context_reset(None).await?;
    drop(client);
    let received = daemon.received().await?;
    assert_eq!(received[0]["params"]["resumable"], true);
    assert_eq!(
        received[1]["params"],
        json!({"name": "read", "arguments": {"file_path": "a.rs"}, "owner": "sub"})
    );
    assert_eq!(received[2]["params"], json!({"path": "a.rs", "owner": "sub"}));
    assert_eq!(received[3]["method"], "session/contextReset");
    assert_eq!(received[3]["params"], json!({"owner": "sub"}));
    assert!(received[4].get("params").is_none() || received[4]["params"] == json!({}), "{}", received[4]);
    Ok(())
}

#[tokio::test]
async fn an_old_daemon_refusing_a_new_initialize_field_is_unsupported() -> TestResult {
    let daemon = old_daemon()?;
    let client = Client::connect(&daemon.socket).await?;
    for (asked, feature) in [
        (InitializeParams { dedup_reads: Some(true), ..params() }, features::DEDUP_READS),
        (InitializeParams { resumable: Some(true), ..params() }, features::RESUME),
        (InitializeParams { resume: Some("t".into()), ..params() }, features::RESUME),
        (InitializeParams { read_max_bytes: Some(4096), ..params() }, features::READ_MAX_BYTES),
    ] {
        match client.initialize(asked).await {
            Err(ClientError::Unsupported { feature: got }) => assert_eq!(got, feature),
            other => panic!("expected Unsupported({feature}), got {other:?}"),
        }
    }
    // The session was left uninitialized: it opens without the option.
    client.initialize(params()).await?;
    assert_eq!(client.resume_token(), None);
    drop(client);
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn max_line_chars_waits_for_whole_lines_and_read_max_bytes_goes_on_the_wire() -> TestResult {
    let daemon = daemon_with(&[])?;
    let client = Client::connect(&daemon.socket).await?;
    client.initialize(params()).await?;
    let cut = ReadParams { path: "a.rs".into(), max_line_chars: Some(80), ..ReadParams::default() };
    match client.file_read(cut.clone()).await {
        Err(ClientError::Unsupported { feature }) => assert_eq!(feature, features::WHOLE_LINES),
        other => panic!("expected Unsupported(wholeLines), got {other:?}"),
    }
    drop(client);
    assert_eq!(methods_of(&daemon.received().await?), ["initialize"], "nothing refused was sent");

    let daemon = daemon_with(&[features::WHOLE_LINES, features::READ_MAX_BYTES])?;
    let client = Client::connect(&daemon.socket).await?;
    client.initialize(InitializeParams { read_max_bytes: Some(4096), ..params() }).await?;
    client.file_read(cut).await?;
    drop(client);
    let received = daemon.received().await?;
    assert_eq!(received[0]["params"]["readMaxBytes"], 4096);
    assert_eq!(received[1]["params"], json!({"path": "a.rs", "maxLineChars": 80}));
    Ok(())
}

#[test]
fn a_refused_resume_is_recognisable() {
    let refused = ClientError::Rpc {
        code: -32602,
        message: "this session cannot be resumed".into(),
        data: Some(json!({"resume": "refused"})),
    };
    assert!(refused.is_resume_refused());
    let other = ClientError::Rpc { code: -32602, message: "bad".into(), data: None };
    assert!(!other.is_resume_refused());
}

#[tokio::test]
async fn mcp_on_an_old_daemon_says_what_it_lacks_and_serves_without_it() -> TestResult {
    let daemon = old_daemon()?;
    let cwd = tempfile::tempdir()?;
    // Codex: a read budget is asked for.
    let input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "codex-mcp-client", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read", "arguments": {"file_path": "a.rs"}}}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect::<String>();
    let socket = daemon.socket.display().to_string();
    let root = cwd.path().display().to_string();
    let args = [
        "--socket",
        socket.as_str(),
        "mcp",
        "--root",
        root.as_str(),
        "--dedup-reads",
        "--name",
        "claude-code",
    ];
    let output = tokio::task::spawn_blocking({
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let cwd = cwd.path().to_owned();
        let input = input.into_bytes();
        move || -> std::io::Result<std::process::Output> {
            use std::io::Write as _;
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_filectx"))
                .args(&args)
                .current_dir(cwd)
                .env_remove("FILECTX_SOCKET")
                .env("FILECTX_NO_AUTOSTART", "1")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(&input)?;
            }
            child.wait_with_output()
        }
    })
    .await??;
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("does not support dedupReads") && stderr.contains("without it"), "{stderr}");
    assert!(stderr.contains("does not support readMaxBytes"), "{stderr}");
    assert!(stderr.contains("does not support jsonBudget"), "{stderr}");
    assert!(stderr.contains("does not offer glob and grep"), "{stderr}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("fn main() {}"), "the read was served: {stdout}");
    let received = daemon.received().await?;
    let inits: Vec<&Value> = received.iter().filter(|m| m["method"] == "initialize").collect();
    // Refused for its search tools, then for diagnostics, then for each option it does not
    // know, then opened with none of them.
    assert_eq!(inits.len(), 6, "{received:?}");
    assert_eq!(inits[0]["params"]["dedupReads"], true);
    assert_eq!(inits[0]["params"]["readMaxBytes"], 9500);
    assert_eq!(inits[0]["params"]["jsonBudget"], true);
    assert_eq!(inits[0]["params"]["tools"], json!(["read", "write", "edit", "glob", "grep", "diagnostics"]));
    assert_eq!(inits[1]["params"]["tools"], json!(["read", "write", "edit", "diagnostics"]));
    assert_eq!(inits[2]["params"]["tools"], json!(["read", "write", "edit"]));
    let last = &inits[5]["params"];
    for option in ["dedupReads", "readMaxBytes", "jsonBudget"] {
        assert!(last.get(option).is_none(), "{last}");
    }
    assert_eq!(last["tools"], json!(["read", "write", "edit"]));
    // --name is the agent's name at the daemon (what a write gate shows).
    assert_eq!(last["clientInfo"]["name"], "claude-code");
    Ok(())
}

//! In-process tests of [`serve`]: an MCP client scripted over `tokio::io::duplex` pipes, and a
//! tiny fake daemon (one connection on a temporary Unix socket, the protocol crate's LSP codec)
//! standing in for `filectxd`, so the whole server runs without any binary. Every wait is
//! bounded, so a broken server fails a test instead of hanging it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use filectx_protocol::{Frame, LspCodec, ToolName, methods, tools};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream, Lines};
use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::timeout;
use tokio_util::codec::{FramedRead, FramedWrite};

use super::{McpError, McpOptions, serve};
use crate::{Client, ClientError};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The longest any one step may take.
const PATIENCE: Duration = Duration::from_secs(10);

/// The instructions the server is given, and must hand to the client.
const INSTRUCTIONS: &str = "Read a file before editing it.";

/// What a test makes the fake daemon do, between its answers.
enum Push {
    /// Send this notification.
    Notify(Value),
    /// Close the connection.
    HangUp,
}

/// A fake daemon serving one connection: it answers `initialize` (refused for a root named
/// `/refused`), `shutdown`, `tools/list` (the real tool descriptors) and `tools/call` (a text
/// result that echoes the arguments' names; never for a tool named `slow`), refuses any other
/// request with -32601, records every message it receives, and ends at `exit`.
struct FakeDaemon {
    socket: PathBuf,
    push: mpsc::UnboundedSender<Push>,
    /// The method of each message, as it is received.
    heard: mpsc::UnboundedReceiver<String>,
    task: JoinHandle<TestResult<Vec<Value>>>,
    _dir: tempfile::TempDir,
}

impl FakeDaemon {
    fn start() -> TestResult<Self> {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("fake.sock");
        let listener = UnixListener::bind(&socket)?;
        let (push, mut pushed) = mpsc::unbounded_channel();
        let (hear, heard) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let (stream, _) = listener.accept().await?;
            let (read, write) = stream.into_split();
            let mut reader = FramedRead::new(read, LspCodec::default());
            let mut writer = FramedWrite::new(write, LspCodec::default());
            let mut seen = Vec::new();
            loop {
                let out = tokio::select! {
                    frame = reader.next() => {
                        let Some(frame) = frame else { break };
                        let Frame::Message(body) = frame? else {
                            return Err("oversized frame from the client".into());
                        };
                        let message: Value = serde_json::from_slice(&body)?;
                        seen.push(message.clone());
                        let _ = hear.send(message["method"].as_str().unwrap_or("?").to_owned());
                        if message["method"] == methods::EXIT {
                            break;
                        }
                        answer(&message)
                    }
                    Some(push) = pushed.recv() => match push {
                        Push::Notify(notification) => Some(notification),
                        Push::HangUp => break,
                    },
                };
                if let Some(out) = out {
                    writer.send(out.to_string()).await?;
                }
            }
            Ok(seen)
        });
        Ok(Self { socket, push, heard, task, _dir: dir })
    }

    /// Sends a `file/didChange` for `path`: changed (with `version`) or deleted.
    fn change(&self, path: &str, version: Option<&str>) -> TestResult {
        let params = json!({"path": format!("/project/{path}"), "displayPath": path, "version": version});
        let notification = json!({"jsonrpc": "2.0", "method": methods::FILE_DID_CHANGE, "params": params});
        self.push.send(Push::Notify(notification)).map_err(|_| "the fake daemon is gone".into())
    }

    fn hang_up(&self) -> TestResult {
        self.push.send(Push::HangUp).map_err(|_| "the fake daemon is gone".into())
    }

    /// Waits until a message of `method` arrives (skipping any other).
    async fn hear(&mut self, method: &str) -> TestResult {
        loop {
            let heard = timeout(PATIENCE, self.heard.recv()).await?.ok_or("the fake daemon is gone")?;
            if heard == method {
                return Ok(());
            }
        }
    }

    /// The method of every message the fake daemon received, once its connection ended.
    async fn received(self) -> TestResult<Vec<String>> {
        let seen = self.messages().await?;
        Ok(seen.iter().map(|message| message["method"].as_str().unwrap_or("?").to_owned()).collect())
    }

    /// Every message the fake daemon received, once its connection ended.
    async fn messages(self) -> TestResult<Vec<Value>> {
        timeout(PATIENCE, self.task).await??
    }
}

/// The fake daemon's answer to one message, if any.
fn answer(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let params = &message["params"];
    let result = match message["method"].as_str() {
        Some(methods::INITIALIZE) if params["roots"] == json!(["/refused"]) => {
            let error = json!({
                "code": -31007,
                "message": "root /refused is outside what this daemon serves",
                "data": {"code": "FS_OUTSIDE_ROOT"},
            });
            return Some(json!({"jsonrpc": "2.0", "id": id, "error": error}));
        }
        Some(methods::INITIALIZE) => initialize_result(),
        Some(methods::SHUTDOWN) => Value::Null,
        Some(methods::TOOLS_LIST) => {
            let tools: Vec<_> = ToolName::ALL.into_iter().map(tools::descriptor).collect();
            json!({"tools": tools})
        }
        Some(methods::TOOLS_CALL) if params["name"] == "slow" => return None,
        Some(methods::TOOLS_CALL) if params["name"] == "failing" => json!({
            "content": [{"type": "text", "text": "You have not read a.txt yet. Read it first."}],
            "isError": true,
            "error": {"name": "FsError", "code": "FS_NOT_OBSERVED"},
        }),
        Some(methods::TOOLS_CALL) => {
            let names: Vec<&str> =
                params["arguments"].as_object().into_iter().flatten().map(|(k, _)| k.as_str()).collect();
            json!({"content": [{"type": "text", "text": format!("1\tok {}\n", names.join(","))}], "isError": false})
        }
        _ => {
            let error = json!({"code": -32601, "message": "no such method"});
            return Some(json!({"jsonrpc": "2.0", "id": id, "error": error}));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// What the fake daemon answers `initialize` with.
fn initialize_result() -> Value {
    json!({
        "serverInfo": {"name": "filectxd", "version": "9.9.9"},
        "protocolVersion": 1,
        "sessionId": "s-1",
        "instructions": "Opened by the server.",
        "capabilities": {
            "tools": ["read", "write", "edit", "glob", "grep"],
            "readOnly": false,
            "methods": ["initialize"],
            "batches": true,
            "features": ["dedupReads", "readMaxBytes"],
        },
        "limits": {
            "readLineLimit": 2000,
            "readLineMaxChars": 2000,
            "readMaxBytes": 8500,
            "maxWindowBytes": 8_388_608,
            "maxFrameBytes": 67_108_864,
            "maxBatchLen": 100,
            "maxConcurrentRequests": 16,
        },
    })
}

/// [`serve`] running in a task over the fake daemon's session, and the MCP client's ends of its
/// input and output.
struct Mcp {
    input: DuplexStream,
    output: Lines<BufReader<DuplexStream>>,
    server: JoinHandle<Result<(), McpError>>,
    diagnostics: Arc<Mutex<Vec<String>>>,
}

impl Mcp {
    async fn start(daemon: &FakeDaemon) -> TestResult<Self> {
        Self::start_with(daemon, |options| options).await
    }

    async fn start_with(
        daemon: &FakeDaemon,
        configure: impl FnOnce(McpOptions) -> McpOptions,
    ) -> TestResult<Self> {
        Self::start_opening(daemon, McpOptions::new(INSTRUCTIONS), configure).await
    }

    /// [`serve`] with `options` as `configure` leaves them (and the diagnostics collected).
    async fn start_opening(
        daemon: &FakeDaemon,
        options: McpOptions,
        configure: impl FnOnce(McpOptions) -> McpOptions,
    ) -> TestResult<Self> {
        let client = Client::connect(&daemon.socket).await?;
        let (input, server_input) = tokio::io::duplex(1 << 16);
        let (server_output, output) = tokio::io::duplex(1 << 16);
        let diagnostics = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&diagnostics);
        let options = configure(options).diagnostics(move |message| {
            sink.lock().unwrap_or_else(PoisonError::into_inner).push(message.to_owned());
        });
        let server = tokio::spawn(serve(client, options, BufReader::new(server_input), server_output));
        Ok(Self { input, output: BufReader::new(output).lines(), server, diagnostics })
    }

    /// Writes one line (a newline added).
    async fn send(&mut self, line: &str) -> TestResult {
        self.input.write_all(line.as_bytes()).await?;
        self.input.write_all(b"\n").await?;
        Ok(())
    }

    /// The next message the server wrote.
    async fn recv(&mut self) -> TestResult<Value> {
        let line =
            timeout(PATIENCE, self.output.next_line()).await??.ok_or("the server closed its output")?;
        Ok(serde_json::from_str(&line)?)
    }

    /// Sends a request and returns the next message, checked to be its answer.
    async fn call(&mut self, id: u64, method: &str, params: Value) -> TestResult<Value> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
            .await?;
        let answer = self.recv().await?;
        assert_eq!(answer["id"], id, "{answer}");
        Ok(answer)
    }

    async fn notify(&mut self, method: &str, params: Value) -> TestResult {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()).await
    }

    /// `initialize` with `version`; returns its result.
    async fn initialize(&mut self, version: &str) -> TestResult<Value> {
        self.initialize_as(version, "test").await
    }

    /// `initialize` with `version` by a client named `name`; returns its result.
    async fn initialize_as(&mut self, version: &str, name: &str) -> TestResult<Value> {
        let client_info = json!({"name": name, "version": "0.169.0"});
        let params = json!({"protocolVersion": version, "capabilities": {}, "clientInfo": client_info});
        let answer = self.call(0, "initialize", params).await?;
        Ok(answer["result"].clone())
    }

    /// `initialize`, `notifications/initialized`, then a `ping` answered: the server now sends
    /// notifications.
    async fn initialized(&mut self, version: &str) -> TestResult {
        self.initialize(version).await?;
        self.notify("notifications/initialized", json!({})).await?;
        self.call(1, "ping", json!({})).await?;
        Ok(())
    }

    /// Ends the input; returns what [`serve`] returned, the messages not read yet, and the
    /// diagnostics.
    async fn finish(self) -> TestResult<(Result<(), McpError>, Vec<Value>, Vec<String>)> {
        let Self { input, mut output, server, diagnostics } = self;
        drop(input);
        let result = timeout(PATIENCE, server).await??;
        let mut rest = Vec::new();
        while let Some(line) = timeout(PATIENCE, output.next_line()).await?? {
            rest.push(serde_json::from_str(&line)?);
        }
        let diagnostics = diagnostics.lock().unwrap_or_else(PoisonError::into_inner).clone();
        Ok((result, rest, diagnostics))
    }
}

/// The `error.code` of an answer.
fn code(answer: &Value) -> Option<i64> {
    answer["error"]["code"].as_i64()
}

#[tokio::test]
async fn initialize_negotiates_the_version_and_only_ping_comes_before_it() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    assert_eq!(mcp.call(1, "ping", json!({})).await?["result"], json!({}));
    let early = mcp.call(2, "tools/list", json!({})).await?;
    assert_eq!(code(&early), Some(-32600), "{early}");
    assert!(early["error"]["message"].as_str().unwrap_or_default().contains("not initialized"), "{early}");
    let missing = mcp.call(3, "initialize", json!({})).await?;
    assert_eq!(code(&missing), Some(-32602), "{missing}");

    let result = mcp.initialize("2024-11-05").await?;
    assert_eq!(result["protocolVersion"], "2024-11-05");
    assert_eq!(result["instructions"], INSTRUCTIONS);
    assert_eq!(result["serverInfo"]["name"], "filectx");
    assert!(result["serverInfo"].get("title").is_none(), "{result}");
    assert_eq!(result["capabilities"], json!({"tools": {"listChanged": false}, "logging": {}}));
    let again = mcp.call(4, "initialize", json!({"protocolVersion": "2024-11-05"})).await?;
    assert_eq!(code(&again), Some(-32600), "{again}");

    let (result, rest, diagnostics) = mcp.finish().await?;
    assert!(result.is_ok(), "{result:?}");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    // The end of the input closed the daemon session politely.
    assert_eq!(daemon.received().await?, ["shutdown", "exit"]);
    Ok(())
}

#[tokio::test]
async fn an_unknown_version_gets_the_newest() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    let result = mcp.initialize("2099-01-01").await?;
    assert_eq!(result["protocolVersion"], super::PROTOCOL_VERSIONS[0]);
    assert_eq!(result["serverInfo"]["title"], "filectx file tools");
    assert!(mcp.finish().await?.0.is_ok());
    Ok(())
}

#[tokio::test]
async fn malformed_lines_get_json_rpc_errors_and_the_server_goes_on() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start_with(&daemon, |options| options.max_line_bytes(200)).await?;
    mcp.send("{not json").await?;
    let parse = mcp.recv().await?;
    assert_eq!((code(&parse), &parse["id"]), (Some(-32700), &Value::Null), "{parse}");

    // Over the cap: skipped, answered -32600 with id null; the next line is served.
    mcp.send(&format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(200)
    ))
    .await?;
    let long = mcp.recv().await?;
    assert_eq!((code(&long), &long["id"]), (Some(-32600), &Value::Null), "{long}");
    assert!(
        long["error"]["message"].as_str().unwrap_or_default().contains("longer than 200 bytes"),
        "{long}"
    );

    // A blank line is ignored; a message without "jsonrpc" keeps its id.
    mcp.send("   ").await?;
    mcp.send(r#"{"id":5,"method":"ping"}"#).await?;
    let invalid = mcp.recv().await?;
    assert_eq!((code(&invalid), &invalid["id"]), (Some(-32600), &json!(5)), "{invalid}");
    let pong = mcp.call(6, "ping", json!({})).await?;
    assert_eq!(pong["result"], json!({}));

    mcp.initialize("2025-06-18").await?;
    let unknown = mcp.call(7, "resources/list", json!({})).await?;
    assert_eq!(code(&unknown), Some(-32601), "{unknown}");
    let level = mcp.call(8, "logging/setLevel", json!({"level": "loud"})).await?;
    assert_eq!(code(&level), Some(-32602), "{level}");
    assert!(mcp.finish().await?.0.is_ok());
    Ok(())
}

#[tokio::test]
async fn batches_are_refused_except_in_2025_03_26() -> TestResult {
    let ping = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "ping"});

    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    mcp.send(&json!([ping(1)]).to_string()).await?;
    let early = mcp.recv().await?;
    assert_eq!((code(&early), &early["id"]), (Some(-32600), &Value::Null), "{early}");
    mcp.initialize("2025-06-18").await?;
    mcp.send(&json!([ping(2)]).to_string()).await?;
    let refused = mcp.recv().await?;
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("has no JSON-RPC batches"));
    assert!(mcp.finish().await?.0.is_ok());

    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    mcp.initialize("2025-03-26").await?;
    mcp.send("[]").await?;
    assert_eq!(code(&mcp.recv().await?), Some(-32600));
    let initialize = json!({"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {}});
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    mcp.send(&json!([ping(3), note, initialize]).to_string()).await?;
    let answers = mcp.recv().await?;
    let answers = answers.as_array().ok_or("a batch is answered with an array")?;
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0], json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    assert_eq!((code(&answers[1]), &answers[1]["id"]), (Some(-32600), &json!(4)));
    assert!(mcp.finish().await?.0.is_ok());
    Ok(())
}

#[tokio::test]
async fn tools_are_forwarded_as_text_without_the_arguments_no_schema_names() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    mcp.initialize("2025-06-18").await?;
    let list = mcp.call(1, "tools/list", json!({})).await?;
    let tools = list["result"]["tools"].as_array().ok_or("tools/list answers tools")?;
    let names: Vec<_> = tools.iter().map(|tool| tool["name"].as_str().unwrap_or_default()).collect();
    // The fake daemon's session has every tool, the opt-in undo and diagnostics too.
    assert_eq!(names, ["read", "write", "edit", "glob", "grep", "undo", "diagnostics"]);
    assert_eq!(tools[6]["annotations"]["readOnlyHint"], true);
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
    assert_eq!(tools[5]["annotations"]["destructiveHint"], true);
    assert_eq!(tools[5]["title"], "Undo last change");
    assert_eq!(tools[4]["annotations"]["readOnlyHint"], true);
    assert_eq!(tools[3]["title"], "Find files");
    assert_eq!(tools[2]["title"], "Edit file");
    for tool in tools {
        // Text only, and schemas that let a harness add its own arguments.
        assert!(tool.get("outputSchema").is_none(), "{tool}");
        assert!(tool["inputSchema"].get("additionalProperties").is_none(), "{tool}");
        assert!(tool["inputSchema"]["properties"].is_object(), "{tool}");
    }

    let arguments = json!({"file_path": "a", "wait_for_previous": true, "offset": 2});
    let call = mcp.call(2, "tools/call", json!({"name": "read", "arguments": arguments})).await?;
    assert_eq!(
        call["result"],
        json!({"content": [{"type": "text", "text": "1\tok file_path,offset\n"}], "isError": false})
    );
    // Said once, however often the harness adds it.
    let again = json!({"name": "grep", "arguments": {"pattern": "x", "wait_for_previous": false}});
    assert_eq!(
        mcp.call(3, "tools/call", again.clone()).await?["result"]["content"][0]["text"],
        "1\tok pattern\n"
    );
    mcp.call(4, "tools/call", again).await?;
    let failed = mcp.call(5, "tools/call", json!({"name": "failing", "arguments": {"x": 1}})).await?;
    assert_eq!(
        failed["result"],
        json!({
            "content": [{"type": "text", "text": "Error (FS_NOT_OBSERVED): You have not read a.txt yet. Read it first."}],
            "isError": true,
            "_meta": {"filectx": {"code": "FS_NOT_OBSERVED"}},
        })
    );
    let nameless = mcp.call(6, "tools/call", json!({"arguments": {}})).await?;
    assert_eq!(code(&nameless), Some(-32602), "{nameless}");

    let (result, _, diagnostics) = mcp.finish().await?;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        diagnostics,
        [
            "ignoring the argument \"wait_for_previous\" of read, which its schema does not name (the MCP client added it)",
            "ignoring the argument \"wait_for_previous\" of grep, which its schema does not name (the MCP client added it)",
        ]
    );
    let received = daemon.received().await?;
    assert_eq!(
        received,
        ["tools/list", "tools/call", "tools/call", "tools/call", "tools/call", "shutdown", "exit"]
    );
    Ok(())
}

#[tokio::test]
async fn a_call_before_any_tools_list_learns_the_schemas_first() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    mcp.initialize("2025-03-26").await?;
    let arguments = json!({"file_path": "a", "wait_for_previous": true});
    let call = mcp.call(1, "tools/call", json!({"name": "read", "arguments": arguments})).await?;
    assert_eq!(call["result"]["content"][0]["text"], "1\tok file_path\n", "{call}");
    assert!(mcp.finish().await?.0.is_ok());
    assert_eq!(daemon.received().await?, ["tools/list", "tools/call", "shutdown", "exit"]);
    Ok(())
}

#[tokio::test]
async fn structured_brings_back_structured_content_and_output_schemas() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start_with(&daemon, |options| options.structured(true)).await?;
    mcp.initialize("2025-06-18").await?;
    let list = mcp.call(1, "tools/list", json!({})).await?;
    let tools = list["result"]["tools"].as_array().ok_or("tools/list answers tools")?;
    assert!(tools.iter().all(|tool| tool["outputSchema"]["required"] == json!(["text"])), "{list}");
    let call = mcp.call(2, "tools/call", json!({"name": "read", "arguments": {"file_path": "a"}})).await?;
    assert_eq!(call["result"]["structuredContent"], json!({"text": "1\tok file_path\n"}));
    let failed = mcp.call(3, "tools/call", json!({"name": "failing", "arguments": {}})).await?;
    let shown = &failed["result"]["structuredContent"];
    assert_eq!(shown["error"], json!({"name": "FsError", "code": "FS_NOT_OBSERVED"}), "{failed}");
    assert!(shown["text"].as_str().unwrap_or_default().starts_with("Error (FS_NOT_OBSERVED): "), "{failed}");
    assert!(mcp.finish().await?.0.is_ok());
    Ok(())
}

#[tokio::test]
async fn the_session_opened_at_initialize_fits_the_client() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let mut params = filectx_protocol::InitializeParams::new(vec!["/project".to_owned()]);
    params.dedup_reads = Some(true);
    let mut mcp = Mcp::start_opening(&daemon, McpOptions::open_session(params), |options| options).await?;
    // Nothing reaches the daemon before initialize.
    assert_eq!(mcp.call(1, "ping", json!({})).await?["result"], json!({}));
    let result = mcp.initialize_as("2025-06-18", "codex-mcp-client").await?;
    assert_eq!(result["instructions"], "Opened by the server.", "{result}");
    let (result, _, diagnostics) = mcp.finish().await?;
    assert!(result.is_ok(), "{result:?}");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let messages = daemon.messages().await?;
    let methods: Vec<_> = messages.iter().map(|m| m["method"].as_str().unwrap_or("?")).collect();
    assert_eq!(methods, ["initialize", "shutdown", "exit"]);
    let opened = &messages[0]["params"];
    // Codex keeps 10,000 bytes of a result's JSON: the daemon counts the escapes (jsonBudget).
    assert_eq!(opened["readMaxBytes"], 9500, "{opened}");
    assert_eq!(opened["jsonBudget"], true, "{opened}");
    assert_eq!(opened["clientInfo"], json!({"name": "codex-mcp-client", "version": "0.169.0"}));
    assert_eq!(opened["dedupReads"], true);

    // --max-output, for a client that cuts at another length.
    let daemon = FakeDaemon::start()?;
    let options =
        McpOptions::open_session(filectx_protocol::InitializeParams::new(vec!["/project".to_owned()]));
    let mut mcp = Mcp::start_opening(&daemon, options, |options| options.max_output(Some(20_000))).await?;
    mcp.initialize_as("2025-06-18", "claude-code").await?;
    assert!(mcp.finish().await?.0.is_ok());
    let messages = daemon.messages().await?;
    assert_eq!(messages[0]["params"]["readMaxBytes"], 19_000, "{}", messages[0]);
    assert_eq!(messages[0]["params"]["jsonBudget"], true, "{}", messages[0]);
    Ok(())
}

#[tokio::test]
async fn a_session_the_daemon_refuses_answers_initialize_and_stops_the_server() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let options =
        McpOptions::open_session(filectx_protocol::InitializeParams::new(vec!["/refused".to_owned()]));
    let mut mcp = Mcp::start_opening(&daemon, options, |options| options).await?;
    let params = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}});
    let answer = mcp.call(1, "initialize", params).await?;
    assert_eq!(code(&answer), Some(-31007), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(
        message,
        "filectx could not open its daemon session: FS_OUTSIDE_ROOT: root /refused is outside what this daemon serves"
    );
    // The server stopped by itself, with the refusal.
    let Mcp { input: _input, output: _output, server, .. } = mcp;
    let result = timeout(PATIENCE, server).await??;
    let refused = matches!(&result, Err(McpError::Client(error)) if error.fs_code().is_some());
    assert!(refused, "{result:?}");
    // No session, so nothing to close.
    assert_eq!(daemon.received().await?, ["initialize"]);
    Ok(())
}

#[tokio::test]
async fn an_input_that_ends_before_initialize_opens_no_session() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let options =
        McpOptions::open_session(filectx_protocol::InitializeParams::new(vec!["/project".to_owned()]));
    let mcp = Mcp::start_opening(&daemon, options, |options| options).await?;
    let (result, rest, diagnostics) = mcp.finish().await?;
    assert!(
        result.is_ok() && rest.is_empty() && diagnostics.is_empty(),
        "{result:?} {rest:?} {diagnostics:?}"
    );
    assert!(daemon.received().await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_cancelled_call_is_never_answered() -> TestResult {
    let mut daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    mcp.initialize("2025-06-18").await?;
    let slow = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "slow"}});
    mcp.send(&slow.to_string()).await?;
    // Cancelled while the daemon works on it.
    daemon.hear("tools/call").await?;
    mcp.notify("notifications/cancelled", json!({"requestId": 5})).await?;
    // The next answer is the ping's: nothing came for the cancelled call.
    mcp.call(6, "ping", json!({})).await?;

    let (result, rest, diagnostics) = mcp.finish().await?;
    assert!(result.is_ok(), "{result:?}");
    assert!(rest.is_empty(), "{rest:?}");
    // It was dropped when cancelled, not left running until the end of the input.
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    // (The first call learns the tools' argument names.)
    assert_eq!(daemon.received().await?, ["tools/list", "tools/call", "shutdown", "exit"]);
    Ok(())
}

#[tokio::test]
async fn a_slow_call_with_a_progress_token_reports_progress_until_cancelled() -> TestResult {
    let mut daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    mcp.initialize("2024-11-05").await?;
    let params = json!({"name": "slow", "_meta": {"progressToken": "t-1"}});
    mcp.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}).to_string())
        .await?;
    daemon.hear("tools/call").await?;
    let progress = mcp.recv().await?;
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    // 2024-11-05 has no progress `message`.
    assert_eq!(progress["params"], json!({"progressToken": "t-1", "progress": 1}));
    mcp.notify("notifications/cancelled", json!({"requestId": 5, "reason": "stop"})).await?;
    // The next message is the ping's answer: no answer and no more progress for the call.
    mcp.call(6, "ping", json!({})).await?;
    let (result, rest, diagnostics) = mcp.finish().await?;
    assert!(result.is_ok(), "{result:?}");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    Ok(())
}

#[tokio::test]
async fn changes_become_warnings_once_initialized() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    mcp.initialized("2025-06-18").await?;
    daemon.change("src/lib.rs", Some("b3-new"))?;
    let notice = mcp.recv().await?;
    assert_eq!(notice["method"], "notifications/message", "{notice}");
    assert_eq!(notice["params"]["level"], "warning");
    assert_eq!(notice["params"]["logger"], "filectx");
    let data = &notice["params"]["data"];
    assert_eq!((&data["path"], &data["displayPath"]), (&json!("/project/src/lib.rs"), &json!("src/lib.rs")));
    assert!(data["message"].as_str().unwrap_or_default().contains("Read it again"), "{data}");

    daemon.change("src/gone.rs", None)?;
    let deleted = mcp.recv().await?;
    assert!(deleted["params"]["data"]["message"].as_str().unwrap_or_default().contains("was deleted"));
    assert!(mcp.finish().await?.0.is_ok());
    Ok(())
}

#[tokio::test]
async fn a_lost_daemon_fails_each_call_and_serve_returns_the_loss() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let mut mcp = Mcp::start(&daemon).await?;
    mcp.initialized("2025-06-18").await?;
    daemon.hang_up()?;
    let notice = mcp.recv().await?;
    assert_eq!(notice["params"]["level"], "error", "{notice}");
    let lost = notice["params"]["data"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(lost.contains("connection was lost") && lost.contains("restarted"), "{lost}");

    let call = mcp.call(2, "tools/call", json!({"name": "read", "arguments": {"file_path": "a"}})).await?;
    assert_eq!(call["result"]["isError"], true, "{call}");
    assert_eq!(call["result"]["content"][0]["text"], format!("Error: {lost}"));
    assert!(call["result"].get("structuredContent").is_none(), "{call}");
    let list = mcp.call(3, "tools/list", json!({})).await?;
    assert_eq!(code(&list), Some(-32603), "{list}");

    let (result, rest, diagnostics) = mcp.finish().await?;
    assert!(matches!(result, Err(McpError::Client(ClientError::Transport(_)))), "{result:?}");
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert!(diagnostics[0].starts_with("the connection to the daemon at "), "{diagnostics:?}");
    // Nothing was sent to a daemon that is gone.
    assert!(daemon.received().await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_closed_output_ends_the_server_without_error() -> TestResult {
    let daemon = FakeDaemon::start()?;
    let Mcp { mut input, output, server, diagnostics } = Mcp::start(&daemon).await?;
    drop(output);
    input.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n").await?;
    let result = timeout(PATIENCE, server).await??;
    assert!(result.is_ok(), "{result:?}");
    // A closed pipe is the client leaving, not a failure worth a diagnostic.
    assert!(diagnostics.lock().unwrap_or_else(PoisonError::into_inner).is_empty());
    assert_eq!(daemon.received().await?, ["shutdown", "exit"]);
    Ok(())
}

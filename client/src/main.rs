//! `filectx`: the command-line client of the filectx daemon — shows the daemon's status and the
//! tools a session gets. Thin: every call goes through `filectx_client`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use filectx_client::{Client, ClientError};
use filectx_protocol::{ClientInfo, DaemonStatus, InitializeParams, ToolsListResult, methods};
use serde_json::Value;

/// Exit code: success.
const EXIT_OK: u8 = 0;
/// Exit code: a local failure (current folder unusable, output not writable, …).
const EXIT_FAILURE: u8 = 1;
/// Exit code: the command line is wrong (clap's own code for usage errors).
const EXIT_USAGE: u8 = 2;
/// Exit code: the daemon is not reachable, or the connection broke before it answered.
const EXIT_UNREACHABLE: u8 = 3;
/// Exit code: the daemon answered with an error, an answer that could not be understood, or
/// not in time.
const EXIT_REQUEST_FAILED: u8 = 4;

const AFTER_HELP: &str = "\
Exit codes:
  0  success
  1  local failure (e.g. the current folder cannot be resolved, output cannot be written)
  2  usage error (unknown subcommand or flag, missing value)
  3  the daemon is not reachable (nothing listens at the socket, or the connection broke)
  4  the request failed (the daemon answered with an error, which is printed, or timed out)

Every command opens a session with the current folder as its only root and closes it
politely (shutdown, then exit) before leaving.";

/// Talk to the filectx daemon (filectxd): show its status and the tools it offers.
#[derive(Debug, Parser)]
#[command(name = "filectx", version, after_help = AFTER_HELP)]
struct Cli {
    // The help text is `socket_help()`: it shows the path the default resolves to.
    #[arg(long, global = true, value_name = "PATH", help = socket_help())]
    socket: Option<PathBuf>,

    /// Print the daemon's raw JSON result instead of readable text (for scripts)
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: Command,
}

/// Help of `--socket`: where the path comes from, and what it resolves to here and now.
fn socket_help() -> String {
    format!(
        "Socket of the daemon [default: ${env} when set and non-empty, else \
         $XDG_RUNTIME_DIR/filectx.sock, else /tmp/filectx-$UID/filectx.sock; here: {here}]",
        env = filectx_protocol::socket::SOCKET_ENV,
        here = filectx_client::socket_path(None).display(),
    )
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the daemon's version, uptime, sessions, cache and request counters (daemon/status)
    Status,
    /// List the model-facing tools with their parameters (tools/list)
    Tools,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // --help and --version print to stdout and succeed; anything else is a usage error.
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("filectx: cannot start the async runtime: {error}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let socket = filectx_client::socket_path(cli.socket.clone());
    match runtime.block_on(run(&cli, &socket)) {
        Ok(output) => print_stdout(&output),
        Err(error) => {
            let (code, message) = describe(&error, &socket);
            eprintln!("filectx: {message}");
            ExitCode::from(code)
        }
    }
}

/// Runs the command and returns what to print on stdout.
async fn run(cli: &Cli, socket: &std::path::Path) -> anyhow::Result<String> {
    let params = session_params()?;
    let (client, _session) = Client::connect_session(socket, params).await?;
    let result = command(cli, &client).await;
    // Leave politely whatever happened, unless the connection is already gone. This is best
    // effort: the answer is already in hand, and the daemon ends the session on hang-up anyway.
    if client.is_connected() {
        let _ = client.close().await;
    }
    result
}

async fn command(cli: &Cli, client: &Client) -> anyhow::Result<String> {
    match (&cli.command, cli.json) {
        (Command::Status, true) => raw(client, methods::DAEMON_STATUS).await,
        (Command::Status, false) => Ok(render_status(&client.status().await?, client.socket())),
        (Command::Tools, true) => raw(client, methods::TOOLS_LIST).await,
        (Command::Tools, false) => Ok(render_tools(&client.tools_list().await?)),
    }
}

async fn raw(client: &Client, method: &str) -> anyhow::Result<String> {
    let value: Value = client.request(method, ()).await?;
    let mut text = serde_json::to_string_pretty(&value)?;
    text.push('\n');
    Ok(text)
}

/// `initialize` parameters: the current folder (canonical) as the only root.
fn session_params() -> anyhow::Result<InitializeParams> {
    let cwd = std::env::current_dir()
        .and_then(|dir| dir.canonicalize())
        .context("cannot resolve the current folder")?;
    let root = cwd
        .to_str()
        .with_context(|| format!("the current folder {} is not valid UTF-8", cwd.display()))?
        .to_owned();
    Ok(InitializeParams {
        client_info: Some(ClientInfo {
            name: "filectx".to_owned(),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        }),
        roots: vec![root],
        cwd: None,
        tools: None,
        read_only: None,
    })
}

/// The exit code and the one-line message for a failure.
fn describe(error: &anyhow::Error, socket: &std::path::Path) -> (u8, String) {
    let Some(client_error) = error.downcast_ref::<ClientError>() else {
        return (EXIT_FAILURE, format!("{error:#}"));
    };
    let path = socket.display();
    match client_error {
        ClientError::Connect { source, .. } => {
            let message = match source.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                    format!("no daemon is listening at {path} (start one with: filectxd)")
                }
                std::io::ErrorKind::PermissionDenied => {
                    format!("permission denied connecting to the daemon at {path}")
                }
                _ => format!("cannot connect to the daemon at {path}: {source}"),
            };
            (EXIT_UNREACHABLE, message)
        }
        ClientError::Transport(reason) => {
            (EXIT_UNREACHABLE, format!("the connection to the daemon at {path} broke: {reason}"))
        }
        ClientError::Rpc { code, message, .. } => {
            let fs = client_error.fs_code().map(|fs| format!(" {fs}")).unwrap_or_default();
            (EXIT_REQUEST_FAILED, format!("the daemon answered error {code}{fs}: {message}"))
        }
        other => (EXIT_REQUEST_FAILED, other.to_string()),
    }
}

/// Writes `output` to stdout; a closed pipe (`filectx tools | head -1`) is not an error.
fn print_stdout(output: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(output.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::from(EXIT_OK),
        Err(error) => {
            eprintln!("filectx: cannot write to stdout: {error}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Aligned `key: value` lines.
fn render_status(status: &DaemonStatus, socket: &std::path::Path) -> String {
    let rows = [
        ("daemon", format!("filectxd {}", status.version)),
        ("pid", status.pid.to_string()),
        ("socket", socket.display().to_string()),
        ("uptime", human_duration(status.uptime_ms)),
        ("sessions", format!("{} (max {})", status.sessions, status.max_sessions)),
        ("refused connections", status.refused_connections.to_string()),
        ("requests", status.requests.to_string()),
        ("cached files", status.cached_files.to_string()),
        ("mapped bytes", human_bytes(status.mapped_bytes)),
        ("watched paths", status.watched_paths.to_string()),
        ("dropped notifications", status.notifications_dropped.to_string()),
    ];
    aligned(&rows)
}

fn aligned(rows: &[(&str, String)]) -> String {
    let width = rows.iter().map(|(key, _)| key.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (key, value) in rows {
        let _ = writeln!(out, "{:<width$} {value}", format!("{key}:"));
    }
    out
}

/// `2h 3m 4s`; days when over 24 hours; milliseconds under one second.
fn human_duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let total = ms / 1000;
    let (days, hours, minutes, seconds) = (total / 86_400, total / 3600 % 24, total / 60 % 60, total % 60);
    if days > 0 {
        format!("{days}d {hours}h {minutes}m {seconds}s")
    } else if hours > 0 {
        format!("{hours}h {minutes}m {seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m {seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `1.5 MiB (1572864)`, or plain bytes under 1 KiB.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // Display only: the precision lost converting to f64 does not show at one decimal.
    #[allow(clippy::cast_precision_loss)]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {} ({bytes})", UNITS[unit])
}

/// Each tool: its name and first sentence, then its parameters (name, type, required or not).
fn render_tools(list: &ToolsListResult) -> String {
    let mut out = String::new();
    for (index, tool) in list.tools.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "{}: {}", tool.name, first_sentence(&tool.description));
        let params = parameters(&tool.input_schema);
        if params.is_empty() {
            let _ = writeln!(out, "  (no parameters)");
            continue;
        }
        let name_width = params.iter().map(|p| p.name.len()).max().unwrap_or(0);
        let type_width = params.iter().map(|p| p.kind.len()).max().unwrap_or(0);
        for p in &params {
            let presence = if p.required { "required" } else { "optional" };
            let line = format!("  {:<name_width$}  {:<type_width$}  {presence}{}", p.name, p.kind, p.note);
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    out
}

/// The text up to and including the first `.` that ends a sentence (followed by whitespace or
/// the end), on one line.
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let end = text
        .char_indices()
        .find(|&(i, c)| c == '.' && text[i + 1..].chars().next().is_none_or(char::is_whitespace))
        .map_or(text.len(), |(i, _)| i + 1);
    text[..end].split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Param {
    name: String,
    kind: String,
    required: bool,
    note: String,
}

/// The properties of a JSON Schema object: required ones first (in `required` order), then the
/// others (in the order the schema lists them).
fn parameters(schema: &Value) -> Vec<Param> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let describe = |name: &str, spec: &Value| {
        let kind = match spec.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|"),
            _ => "any".to_owned(),
        };
        let note = spec.get("default").map(|default| format!(" (default {default})")).unwrap_or_default();
        Param { name: name.to_owned(), kind, required: required.contains(&name), note }
    };
    let mut params: Vec<Param> =
        required.iter().filter_map(|name| properties.get(*name).map(|spec| describe(name, spec))).collect();
    params.extend(
        properties.iter().filter(|(name, _)| !required.contains(&name.as_str())).map(|(n, s)| describe(n, s)),
    );
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_2h_3m_4s() {
        assert_eq!(human_duration(250), "250ms");
        assert_eq!(human_duration(4_000), "4s");
        assert_eq!(human_duration(184_000), "3m 4s");
        assert_eq!(human_duration((2 * 3600 + 3 * 60 + 4) * 1000 + 999), "2h 3m 4s");
        assert_eq!(human_duration((86_400 + 5) * 1000), "1d 0h 0m 5s");
    }

    #[test]
    fn bytes_are_human() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1536), "1.5 KiB (1536)");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.0 MiB (3145728)");
    }

    #[test]
    fn first_sentence_stops_at_a_sentence_end() {
        assert_eq!(first_sentence("Read a text file. Returns lines."), "Read a text file.");
        assert_eq!(first_sentence("Uses `a.b` names.\nMore."), "Uses `a.b` names.");
        assert_eq!(first_sentence("No full stop"), "No full stop");
    }

    #[test]
    fn status_lines_are_aligned() {
        let status = DaemonStatus {
            version: "0.1.0".to_owned(),
            pid: 42,
            uptime_ms: 7_384_000,
            sessions: 1,
            max_sessions: 64,
            refused_connections: 0,
            cached_files: 3,
            mapped_bytes: 0,
            watched_paths: 2,
            requests: 9,
            notifications_dropped: 0,
        };
        let text = render_status(&status, std::path::Path::new("/run/user/1/filectx.sock"));
        assert!(text.contains("uptime:                2h 3m 4s\n"), "{text}");
        assert!(text.contains("dropped notifications: 0\n"), "{text}");
        // Every value starts in the same column, right after the longest key.
        assert_eq!(text.lines().count(), 11);
        assert!(text.lines().all(|l| l.get(22..23) == Some(" ") && l.get(23..24) != Some(" ")), "{text}");
    }

    #[test]
    fn tools_show_name_sentence_and_parameters() {
        let list = ToolsListResult {
            tools: filectx_protocol::ToolName::ALL
                .into_iter()
                .map(filectx_protocol::tools::descriptor)
                .collect(),
        };
        let text = render_tools(&list);
        assert!(text.starts_with("read: Read a text file.\n  file_path  string   required\n"), "{text}");
        assert!(text.contains("  limit      integer  optional\n"), "{text}");
        assert!(text.contains("write: Write a text file, replacing its whole content.\n"), "{text}");
        assert!(text.contains("  replace_all  boolean  optional (default false)\n"), "{text}");
        assert!(text.contains("  old_string   string   required\n"), "{text}");
    }

    #[test]
    fn usage_exit_code_matches_clap() {
        let error = Cli::try_parse_from(["filectx", "frobnicate"]).err();
        assert_eq!(error.map(|e| e.exit_code()), Some(i32::from(EXIT_USAGE)));
    }
}

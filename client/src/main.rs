//! `filectx`: the command-line client of the filectx daemon — shows the daemon's status and the
//! tools a session gets, reads, streams, writes, edits and stats files through the daemon, and
//! watches them for changes. Thin: every call goes through `filectx_client`, which starts the
//! daemon when none answers at the socket (unless `--no-autostart` or `FILECTX_NO_AUTOSTART`).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, CommandFactory as _, Parser, Subcommand};
use filectx_client::{Client, ClientError, SpawnOptions};
use filectx_protocol::tools::{READ_LINE_LIMIT, READ_LINE_MAX_CHARS};
use filectx_protocol::{
    ClientInfo, DaemonStatus, EditParams, FileDidChange, FileKind, FileStatResult, FsErrorCode,
    InitializeParams, PathParams, ReadParams, StreamTextParams, ToolName, ToolsListResult, WriteOperation,
    WriteParams, methods,
};
use futures::StreamExt as _;
use serde_json::Value;
use tokio::signal::unix::{SignalKind, signal};

mod mcp;

/// Exit code: success.
const EXIT_OK: u8 = 0;
/// Exit code: a local failure (current folder unusable, output not writable, …).
const EXIT_FAILURE: u8 = 1;
/// Exit code: the command line is wrong (clap's own code for usage errors).
const EXIT_USAGE: u8 = 2;
/// Exit code: the daemon is not reachable (nothing answers and autostart is off or failed), or
/// the connection broke before it answered.
const EXIT_UNREACHABLE: u8 = 3;
/// Exit code: the daemon answered with an error (a failed tool call included), an answer that
/// could not be understood, or not in time.
const EXIT_REQUEST_FAILED: u8 = 4;
/// Exit code: the socket was refused because another user may control it (its folder is not
/// ours or others may write there, or the process serving it runs as another user). Not 3: a
/// retry, or starting a daemon, would not help; the socket or its folder must be fixed.
const EXIT_UNTRUSTED: u8 = 5;

/// How long leaving politely (`shutdown`, `exit`, the daemon hanging up) may take before the
/// command leaves anyway: a daemon that stopped answering does not hold the command (or a
/// `watch` ended with Ctrl-C) for the whole request timeout.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// How many characters of a version `watch` shows.
const VERSION_SHOWN: usize = 12;

const AFTER_HELP: &str = "\
Files (PATH is absolute, or relative to the current folder):
  filectx read PATH [--offset N] [--limit N]
      numbered lines and a footer, exactly as the model-facing read tool shows them
      (--json: the structured file/read result instead)
  filectx cat PATH [--offset N] [--chunk-lines N]
      a text file of any size, its lines as they are (no numbers), streamed from one version
      of the file and written as they arrive (fs/streamText); a file that changes meanwhile
      fails with FS_STALE_VERSION, after the lines already written
  filectx write PATH [--content TEXT | --from FILE]
      create or replace a file; the content comes from stdin unless given
  filectx edit PATH --old TEXT --new TEXT [--replace-all]
      replace an exact, literal string (once, or every occurrence)
  filectx stat PATH
      whether the path exists, its kind, size and content version
  filectx watch PATH...
      a line each time one of the files changes or is deleted (file/didChange), until no
      watched file is left, or Ctrl-C; the daemon notifies once per version the session read
      (watch reads a changed file again to hear of its next change), and changes within
      ~50 ms arrive as one notice; see `filectx watch --help`

  write (over an existing file) and edit read the file themselves first, so they never refuse
  with FS_NOT_OBSERVED; they only protect against changes between that read and the write.
  A harness that needs the full read-before-write protection keeps one session open instead.

  With --json, each prints the raw result of its last request (file/read for read, file/write,
  file/edit, file/stat), and watch each notice's params as one JSON object per line; cat has no
  --json. A failed file command prints the FS_* code and the daemon's message, e.g.
  `filectx: FS_NOT_FOUND: ...`, and exits 4.

Autostart:
  When nothing answers at the socket, a command starts the daemon itself, detached (its own
  process group, as watchman and sccache do): `filectxd --socket PATH`, its log (stderr)
  appended to $XDG_STATE_HOME/filectx/filectxd.log, else ~/.local/state/filectx/filectxd.log.
  The binary is $FILECTX_DAEMON when set, else the filectxd next to this filectx, else filectxd
  on PATH. The command waits up to 5 s for the daemon to answer. Commands racing to start one
  are safe: one daemon takes the socket's lock file, the others exit, all commands connect.
  --no-autostart (or FILECTX_NO_AUTOSTART=1) starts nothing: no daemon listening is exit 3.
  A daemon that cannot be started, or does not answer in time, is exit 3 too, with a message
  naming the binary, the socket and the log file.

Exit codes:
  0  success
  1  local failure (e.g. the current folder cannot be resolved, output cannot be written)
  2  usage error (unknown subcommand or flag, missing value)
  3  the daemon is not reachable (nothing listens at the socket and autostart is off or
     failed, or the connection broke)
  4  the request failed (the daemon answered with an error, which is printed, or timed out)
  5  the socket was refused: another user may control it (its folder is not yours, or others
     can write there, or the process serving it is not yours); nothing was sent to it and no
     daemon was started; the message says what to fix

Security:
  filectx trusts only a daemon of its own user: the socket's folder must belong to you and be
  closed to writers other than you (group or others with write access are refused, sticky bit
  or not), and the process serving the socket must run as you (SO_PEERCRED). The same holds for
  every command, for `filectx mcp`, and for autostart.

Every command is one session: it opens a session whose roots are the current folder (or the
--root folders, when given), and closes it politely (shutdown, then exit) before leaving.
Relative paths resolve against the current folder, which must then be inside a root.";

/// Environment variable that turns autostart off, as `--no-autostart` does (`1`, `true`, `yes`,
/// `on`; `0`, `false`, `no`, `off` or empty leave it on).
const NO_AUTOSTART_ENV: &str = "FILECTX_NO_AUTOSTART";

/// Help heading of the options every subcommand accepts.
const GLOBAL: &str = "Global options";

/// Help of `edit`, after its one-line summary.
const EDIT_LONG_ABOUT: &str = "\
Replace an exact, literal string in a text file (file/read, then file/edit)

One CLI call is one session, so the CLI reads the file itself first (one line is enough: any \
window records the file's version for the session) and then edits it. It therefore never \
refuses with FS_NOT_OBSERVED (\"not read yet\"), and only protects against changes that happen \
between its own read and the edit (FS_STALE_VERSION). A harness that wants an edit refused when \
the file changed since its agent last read it should keep one long-lived session (the \
filectx_client library) instead.";

/// Help of `cat`, after its one-line summary.
const CAT_LONG_ABOUT: &str = "\
Stream a text file of any size to stdout, its lines as they are, from one version of the file \
(fs/streamText)

Each line is written as the daemon shows it (without \\r, a leading BOM left out), followed by a \
newline, and stdout is flushed after every chunk, so `filectx cat big.log | head` shows the first \
lines at once; a closed stdout stops the stream and is not an error. Lines longer than 2000 \
characters are cut; a note on stderr at the end says how many. All lines come from the version \
the file had when the stream started: if the file changes meanwhile, the stream stops with \
FS_STALE_VERSION (exit 4) after the lines already written.";

/// Help of `write`, after its one-line summary.
const WRITE_LONG_ABOUT: &str = "\
Create a file or replace its whole content (file/stat, then file/read if it exists, then \
file/write)

One CLI call is one session, so when the file exists the CLI reads it itself first (one line is \
enough: any window records the file's version for the session) and then replaces it. It \
therefore never refuses with FS_NOT_OBSERVED, and only protects against changes that happen \
between its own read and the write (FS_STALE_VERSION). A harness that wants a write refused \
when the file changed since its agent last read it should keep one long-lived session (the \
filectx_client library) instead.";

/// Help of `watch`, after its one-line summary.
const WATCH_LONG_ABOUT: &str = "\
Print a line each time one of the files changes or is deleted, until none is left (file/read \
and fs/resolve of each, then file/didChange notices)

The CLI first reads one line of each file: any window records the file's version for the \
session, and the daemon tells a session when a version it recorded is no longer the file's. A \
file that cannot be read is an error before anything is watched (its FS_* code, exit 4). It also \
asks for each file's canonical path (fs/resolve), the key the notices carry.

The daemon tells a session once per recorded version: after a notice it says nothing more about \
that file until the session reads it again. So after each `changed` line the CLI reads the file \
again (one line), which records the new version and re-arms the notice; changes made before \
that read are not reported separately. Changes within about 50 ms of each other (a burst of \
writes, an editor's save) arrive as one notice.";

/// The end of `watch --help`: the output, and how it ends.
const WATCH_AFTER_HELP: &str = "\
Output, one line per notice, flushed at once:
  changed PATH (version 0123456789ab)   new content; the first 12 characters of its version
  deleted PATH                          nothing (or no regular file) is there any more
  With --json, each line is the notice's params as one JSON object instead:
  {\"path\": canonical absolute path, \"displayPath\": PATH as shown, \"version\": string or null}

PATH is shown relative to the current folder when inside it. A symlink is followed when the file \
is read: the notices concern its target, and show the target's path. PATHs that name the same \
file watch it once.

A deleted file is no longer watched (re-creating it prints nothing); a changed file that is gone \
when the CLI reads it again is reported as deleted then. A changed file that can no longer be \
read (e.g. it became binary, or too large) ends the watch with its FS_* code (exit 4).

Exit codes:
  0  no watched file is left, or Ctrl-C (SIGINT) or SIGTERM stopped the watch, or stdout was
     closed; in each case the session is closed politely (shutdown, then exit)
  3  the connection to the daemon was lost
  4  a file could not be read, at the start or again after a change";

/// Help of `mcp`, after its one-line summary.
const MCP_LONG_ABOUT: &str = "\
Serve the file tools to an MCP client (Claude Code, Codex, Cursor, …) over stdio: one daemon \
session for the life of the process

An MCP client starts `filectx mcp` as a stdio server. It opens one session with the daemon \
(starting the daemon when none answers, as every command does; --no-autostart refuses) and \
offers that session's tools, read, write and edit, to the client's model. Everything the model \
reads is recorded in that session, so an edit or overwrite of a file it has not read, or that \
changed since it read it, is refused with a message telling it to read the file again. Sessions \
are isolated: two `filectx mcp` processes (two agents) never authorize each other's edits.

The session's roots are the --root folders, else the current folder (where the MCP client \
starts the server; give --root to be sure). Relative paths resolve against the current folder \
when it is inside a root, else against the first root.";

/// The end of `mcp --help`: the protocol details and the exit codes.
const MCP_AFTER_HELP: &str = "\
Protocol: MCP over stdio, newline-delimited JSON-RPC 2.0; versions 2025-06-18, 2025-03-26 and \
2024-11-05 (a client asking for another gets 2025-06-18). Only JSON-RPC messages go to stdout; \
diagnostics go to stderr. The MCP server's instructions are the daemon session's. Each change \
of a file the session read (by another program or agent) is sent as notifications/message, \
level warning, logger filectx, data {path, displayPath, version, message}; logging/setLevel \
above warning silences them.

If the daemon connection is lost, the server keeps running: every tool call is answered with \
an isError result saying so (restart the MCP server), and stderr says why.

Exit codes:
  0  stdin ended (the MCP client closed it) and the session was closed
  1  a local failure (e.g. a --root that is not a folder, stdin unreadable)
  2  usage error
  3  the daemon is not reachable at start-up, or the connection to it was lost while serving
  4  the daemon refused the session (e.g. a root it cannot use)
  5  the socket was refused: another user may control it (see `filectx --help`, Security)

Example (Claude Code):
  claude mcp add filectx -- filectx mcp --root /path/to/project";

/// Talk to the filectx daemon (filectxd): show its status and the tools it offers, read,
/// stream, write, edit and stat files through it, and watch them for changes.
#[derive(Debug, Parser)]
#[command(name = "filectx", version, after_help = AFTER_HELP)]
struct Cli {
    // The help text is `socket_help()`: it shows the path the default resolves to.
    #[arg(long, global = true, value_name = "PATH", help = socket_help(), help_heading = GLOBAL)]
    socket: Option<PathBuf>,

    /// Print the daemon's raw JSON result instead of readable text (for scripts)
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,

    /// Never start the daemon: when none answers at the socket, fail (exit 3) [default: start
    /// one, see Autostart below]
    #[arg(
        long,
        global = true,
        env = NO_AUTOSTART_ENV,
        value_parser = clap::builder::FalseyValueParser::new(),
        help_heading = GLOBAL,
    )]
    no_autostart: bool,

    #[command(flatten)]
    roots: RootArgs,

    #[command(subcommand)]
    command: Command,
}

/// `--root`, accepted before and after the subcommand. It is not a clap global: a repeated global
/// option given on both sides of the subcommand keeps only the values after it
/// (clap-rs/clap#1570), so the top level and each subcommand have their own, joined in order.
#[derive(Debug, Args)]
struct RootArgs {
    /// A folder the session may touch (repeatable); replaces the default, the current folder
    #[arg(long = "root", value_name = "DIR", help_heading = GLOBAL)]
    roots: Vec<PathBuf>,
}

impl Cli {
    /// Every `--root`, in command-line order.
    fn roots(&self) -> Vec<PathBuf> {
        let after = match &self.command {
            Command::Status(roots) | Command::Tools(roots) => roots,
            Command::Read(args) => &args.roots,
            Command::Cat(args) => &args.roots,
            Command::Write(args) => &args.roots,
            Command::Edit(args) => &args.roots,
            Command::Stat(args) => &args.roots,
            Command::Watch(args) => &args.roots,
            Command::Mcp(args) => &args.roots,
        };
        self.roots.roots.iter().chain(&after.roots).cloned().collect()
    }
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
    Status(RootArgs),
    /// List the model-facing tools with their parameters (tools/list)
    Tools(RootArgs),
    /// Print a window of a text file with numbered lines, as the model's read tool shows it
    /// (tools/call read; with --json: file/read)
    Read(ReadArgs),
    /// Stream a text file of any size to stdout, its lines as they are, from one version of the
    /// file (fs/streamText)
    #[command(long_about = CAT_LONG_ABOUT)]
    Cat(CatArgs),
    /// Create a file or replace its whole content (file/stat, file/read if it exists, file/write)
    #[command(long_about = WRITE_LONG_ABOUT)]
    Write(WriteArgs),
    /// Replace an exact, literal string in a text file (file/read, then file/edit)
    #[command(long_about = EDIT_LONG_ABOUT)]
    Edit(EditArgs),
    /// Show whether a path exists, its kind, size and content version (file/stat)
    Stat(StatArgs),
    /// Print a line each time one of the files changes or is deleted, until none is left
    /// (file/read and fs/resolve of each, then file/didChange notices)
    #[command(long_about = WATCH_LONG_ABOUT, after_help = WATCH_AFTER_HELP)]
    Watch(WatchArgs),
    /// Serve the file tools to an MCP client (Claude Code, Codex, Cursor, …) over stdio: one
    /// daemon session for the life of the process
    #[command(long_about = MCP_LONG_ABOUT, after_help = MCP_AFTER_HELP)]
    Mcp(McpArgs),
}

#[derive(Debug, Args)]
struct ReadArgs {
    /// The file: absolute, or relative to the current folder
    path: String,
    /// 1-based number of the first line to show [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    offset: Option<u64>,
    /// Most lines to show [default and maximum: 2000]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    #[command(flatten)]
    roots: RootArgs,
}

#[derive(Debug, Args)]
struct CatArgs {
    /// The file: absolute, or relative to the current folder
    path: String,
    /// 1-based number of the first line to write [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    offset: Option<u64>,
    /// Lines per chunk the daemon sends (each chunk is written and flushed at once)
    /// [default: 1000, at most 2000]
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..=u64::from(READ_LINE_LIMIT)),
    )]
    chunk_lines: Option<u64>,
    #[command(flatten)]
    roots: RootArgs,
}

#[derive(Debug, Args)]
struct WriteArgs {
    /// The file: absolute, or relative to the current folder
    path: String,
    /// The file's complete new content [default: read from stdin]
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true, conflicts_with = "from")]
    content: Option<String>,
    /// Take the new content from this local file (`-`: stdin)
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
    #[command(flatten)]
    roots: RootArgs,
}

#[derive(Debug, Args)]
struct EditArgs {
    /// The file: absolute, or relative to the current folder
    path: String,
    /// The exact text to replace (without the line-number prefix `read` shows)
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    old: String,
    /// The text to put in its place
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    new: String,
    /// Replace every occurrence instead of exactly one
    #[arg(long)]
    replace_all: bool,
    #[command(flatten)]
    roots: RootArgs,
}

#[derive(Debug, Args)]
struct StatArgs {
    /// The path: absolute, or relative to the current folder
    path: String,
    #[command(flatten)]
    roots: RootArgs,
}

#[derive(Debug, Args)]
struct WatchArgs {
    /// The files to watch: absolute, or relative to the current folder
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<String>,
    #[command(flatten)]
    roots: RootArgs,
}

#[derive(Debug, Args)]
struct McpArgs {
    /// Refuse every write and edit (FS_PERMISSION_DENIED); without --tools, list only `read`
    #[arg(long)]
    read_only: bool,
    /// The tools to offer, comma-separated (read, write, edit) [default: all three; only read
    /// with --read-only]
    #[arg(long, value_name = "TOOLS", value_delimiter = ',', value_parser = parse_tool, num_args = 1..)]
    tools: Option<Vec<ToolName>>,
    #[command(flatten)]
    roots: RootArgs,
}

/// A tool name given on the command line.
fn parse_tool(name: &str) -> Result<ToolName, String> {
    ToolName::from_name(name.trim())
        .ok_or_else(|| format!("unknown tool {name:?}: the tools are read, write and edit"))
}

/// What to ask the daemon, with everything local (paths, content) already checked and read.
#[derive(Debug)]
enum Job {
    Status,
    Tools,
    Read(ReadParams),
    Cat(StreamTextParams),
    Write(WriteParams),
    Edit(EditParams),
    Stat(String),
    Watch(Vec<String>),
}

/// A model-facing tool call that answered `isError: true`.
#[derive(Debug, thiserror::Error)]
#[error("{}", match code {
    Some(code) if !text.trim().is_empty() => format!("{code}: {}", text.trim_end()),
    Some(code) => code.to_string(),
    None => text.trim_end().to_owned(),
})]
struct ToolFailed {
    /// The `FS_*` identifier from the result's `error`, when present.
    code: Option<FsErrorCode>,
    /// The text the tool returned.
    text: String,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse().and_then(check_usage) {
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
    if let Command::Mcp(args) = &cli.command {
        let result = runtime.block_on(run_mcp(&cli, args, &socket));
        // Stdin is read by a blocking thread that cannot be interrupted: do not wait for it.
        runtime.shutdown_background();
        return match result {
            Ok(()) => ExitCode::from(EXIT_OK),
            Err(error) => {
                let (code, message) = describe(&error, &socket, !cli.no_autostart);
                eprintln!("filectx mcp: {message}");
                ExitCode::from(code)
            }
        };
    }
    match runtime.block_on(run(&cli, &socket)) {
        Ok(output) => print_stdout(&output),
        Err(error) => {
            let (code, message) = describe(&error, &socket, !cli.no_autostart);
            eprintln!("filectx: {message}");
            ExitCode::from(code)
        }
    }
}

/// Refuses what clap cannot express: `--json` is global, but `cat` and `mcp` have no JSON
/// output of their own.
fn check_usage(cli: Cli) -> Result<Cli, clap::Error> {
    if cli.json && matches!(cli.command, Command::Cat(_)) {
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "--json cannot be used with cat, which writes the file's lines as they are",
        ));
    }
    if cli.json && matches!(cli.command, Command::Mcp(_)) {
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "--json cannot be used with mcp, which always speaks JSON-RPC on stdout",
        ));
    }
    Ok(cli)
}

/// `filectx mcp`: opens the one daemon session (roots as for every command; the tools and
/// read-only flag from the options), then serves MCP on stdin/stdout until stdin ends.
async fn run_mcp(cli: &Cli, args: &McpArgs, socket: &Path) -> anyhow::Result<()> {
    let mut params = Session::new(&cli.roots())?.params;
    params.client_info = Some(ClientInfo {
        name: "filectx mcp".to_owned(),
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
    });
    params.tools = match &args.tools {
        Some(tools) => Some(tools.clone()),
        // A read-only session lists only what it can do.
        None if args.read_only => Some(vec![ToolName::Read]),
        None => None,
    };
    params.read_only = args.read_only.then_some(true);
    let (client, session) = if cli.no_autostart {
        Client::connect_session(socket, params).await?
    } else {
        Client::connect_session_or_spawn(socket, params, SpawnOptions::default()).await?
    };
    mcp::serve(client, session, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Runs the command and returns what to print on stdout.
async fn run(cli: &Cli, socket: &Path) -> anyhow::Result<String> {
    // Everything local is checked (and the content read) before connecting, so a local failure
    // never opens a session.
    let session = Session::new(&cli.roots())?;
    let job = prepare(&cli.command, &session)?;
    let (client, _session) = if cli.no_autostart {
        Client::connect_session(socket, session.params).await?
    } else {
        Client::connect_session_or_spawn(socket, session.params, SpawnOptions::default()).await?
    };
    let result = execute(job, cli.json, &client).await;
    // Leave politely whatever happened, unless the connection is already gone. This is best
    // effort, and bounded: the answer is already in hand, and the daemon ends the session on
    // hang-up anyway.
    if client.is_connected() {
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, client.close()).await;
    }
    result
}

/// The `initialize` parameters of this call's session, and whether relative paths can be used.
#[derive(Debug)]
struct Session {
    params: InitializeParams,
    /// The current folder (canonical).
    cwd: PathBuf,
    /// Whether the current folder is inside a root, so relative paths resolve against it.
    cwd_in_root: bool,
}

impl Session {
    /// Roots: the `--root` folders (relative ones against the current folder), else the current
    /// folder; all canonical. `cwd` is the current folder when it is inside a root and is not
    /// already the default (`roots[0]`).
    fn new(root_args: &[PathBuf]) -> anyhow::Result<Self> {
        let cwd = std::env::current_dir()
            .and_then(|dir| dir.canonicalize())
            .context("cannot resolve the current folder")?;
        let roots = if root_args.is_empty() {
            vec![cwd.clone()]
        } else {
            root_args.iter().map(|root| canonical_root(&cwd, root)).collect::<anyhow::Result<Vec<_>>>()?
        };
        let cwd_in_root = roots.iter().any(|root| cwd.starts_with(root));
        let explicit_cwd = cwd_in_root && roots.first() != Some(&cwd);
        let params = InitializeParams {
            client_info: Some(ClientInfo {
                name: "filectx".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
            roots: roots.iter().map(|root| utf8(root, "root")).collect::<anyhow::Result<_>>()?,
            cwd: if explicit_cwd { Some(utf8(&cwd, "current folder")?) } else { None },
            tools: None,
            read_only: None,
            deny: None,
        };
        Ok(Self { params, cwd, cwd_in_root })
    }

    /// Refuses a relative `path` when the current folder is outside every root (the daemon
    /// would resolve it against the first root instead).
    fn check_path(&self, path: &str) -> anyhow::Result<()> {
        if Path::new(path).is_relative() && !self.cwd_in_root {
            bail!(
                "the current folder {} is inside no --root, so the relative path {path:?} cannot be \
                 resolved; give an absolute path or a --root that contains the current folder",
                self.cwd.display()
            );
        }
        Ok(())
    }
}

/// `dir` made absolute against `cwd` and canonical; it must be an existing folder.
fn canonical_root(cwd: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    let root =
        cwd.join(dir).canonicalize().with_context(|| format!("cannot resolve the root {}", dir.display()))?;
    if !root.is_dir() {
        bail!("the root {} is not a folder", dir.display());
    }
    Ok(root)
}

/// `path` as the UTF-8 string the wire needs; `what` names it in the error.
fn utf8(path: &Path, what: &str) -> anyhow::Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("the {what} {} is not valid UTF-8", path.display()))
}

/// Checks the command's paths and reads the content to write, before anything is sent.
fn prepare(command: &Command, session: &Session) -> anyhow::Result<Job> {
    let job = match command {
        Command::Status(_) => Job::Status,
        Command::Tools(_) => Job::Tools,
        Command::Read(args) => {
            session.check_path(&args.path)?;
            Job::Read(ReadParams { path: args.path.clone(), offset: args.offset, limit: args.limit })
        }
        Command::Cat(args) => {
            session.check_path(&args.path)?;
            Job::Cat(StreamTextParams {
                path: args.path.clone(),
                offset: args.offset,
                chunk_lines: args.chunk_lines,
            })
        }
        Command::Write(args) => {
            session.check_path(&args.path)?;
            Job::Write(WriteParams { path: args.path.clone(), content: new_content(args)? })
        }
        Command::Edit(args) => {
            session.check_path(&args.path)?;
            Job::Edit(EditParams {
                path: args.path.clone(),
                old_string: args.old.clone(),
                new_string: args.new.clone(),
                replace_all: args.replace_all.then_some(true),
            })
        }
        Command::Stat(args) => {
            session.check_path(&args.path)?;
            Job::Stat(args.path.clone())
        }
        Command::Watch(args) => {
            for path in &args.paths {
                session.check_path(path)?;
            }
            Job::Watch(args.paths.clone())
        }
        // `main` runs `mcp` through `run_mcp`, never through `run`.
        Command::Mcp(_) => bail!("mcp is served by run_mcp"),
    };
    Ok(job)
}

/// The content `write` sends: `--content`, else the `--from` file, else stdin. Must be UTF-8.
fn new_content(args: &WriteArgs) -> anyhow::Result<String> {
    if let Some(content) = &args.content {
        return Ok(content.clone());
    }
    let (bytes, source) = match &args.from {
        Some(file) if file.as_os_str() != "-" => {
            let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            (bytes, file.display().to_string())
        }
        _ => {
            let mut bytes = Vec::new();
            std::io::stdin().lock().read_to_end(&mut bytes).context("cannot read the content from stdin")?;
            (bytes, "stdin".to_owned())
        }
    };
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("the content from {source} is not valid UTF-8"))
}

/// Sends the job's requests and returns what to print on stdout.
async fn execute(job: Job, json: bool, client: &Client) -> anyhow::Result<String> {
    match (job, json) {
        (Job::Status, true) => raw(client, methods::DAEMON_STATUS, ()).await,
        (Job::Status, false) => Ok(render_status(&client.status().await?, client.socket())),
        (Job::Tools, true) => raw(client, methods::TOOLS_LIST, ()).await,
        (Job::Tools, false) => Ok(render_tools(&client.tools_list().await?)),
        (Job::Read(params), true) => raw(client, methods::FILE_READ, &params).await,
        (Job::Read(params), false) => read_tool(client, params).await,
        // `check_usage` refuses --json with cat.
        (Job::Cat(params), _) => cat(client, params).await.map(|()| String::new()),
        (Job::Write(params), json) => write(client, params, json).await,
        (Job::Edit(params), json) => edit(client, params, json).await,
        (Job::Stat(path), true) => raw(client, methods::FILE_STAT, PathParams { path }).await,
        (Job::Stat(path), false) => Ok(render_stat(&client.file_stat(&path).await?)),
        (Job::Watch(paths), json) => watch(client, &paths, json).await.map(|()| String::new()),
    }
}

/// The daemon's result as pretty JSON.
async fn raw(client: &Client, method: &str, params: impl serde::Serialize) -> anyhow::Result<String> {
    let value: Value = client.request(method, params).await?;
    let mut text = serde_json::to_string_pretty(&value)?;
    text.push('\n');
    Ok(text)
}

/// `read` through the model-facing tool: its text as is (a final newline added if it has none).
async fn read_tool(client: &Client, params: ReadParams) -> anyhow::Result<String> {
    let mut arguments = serde_json::Map::new();
    arguments.insert("file_path".to_owned(), Value::String(params.path));
    if let Some(offset) = params.offset {
        arguments.insert("offset".to_owned(), offset.into());
    }
    if let Some(limit) = params.limit {
        arguments.insert("limit".to_owned(), limit.into());
    }
    let result = client.call_tool(ToolName::Read.as_str(), Value::Object(arguments)).await?;
    let mut text = result.text();
    if result.is_error {
        return Err(ToolFailed { code: result.error.map(|error| error.code), text }.into());
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// `fs/streamText`: writes each chunk's lines to stdout as it arrives, one line and a newline
/// each, and flushes; a closed stdout cancels the stream and ends the command successfully. At
/// the end, a note on stderr says how many of the written lines were cut.
async fn cat(client: &Client, params: StreamTextParams) -> anyhow::Result<()> {
    let mut stream = client.stream_text(params).await?;
    let mut cut = 0;
    let mut text = String::new();
    let result = loop {
        let chunk = match stream.next().await {
            Some(Ok(chunk)) => chunk,
            Some(Err(error)) => break Err(error.into()),
            None => break Ok(()),
        };
        text.clear();
        for line in &chunk.lines {
            text.push_str(line);
            text.push('\n');
        }
        // A blocking write, on purpose: while stdout is full, this single-threaded runtime does
        // not read the socket either, so a slow reader holds the daemon back (which buffers only
        // a few chunks) instead of filling the client's buffer until the stream fails as lagged.
        let written = {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush())
        };
        match written {
            Ok(()) => cut += chunk.truncated_lines.len(),
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                stream.cancel().await;
                break Ok(());
            }
            Err(error) => break Err(anyhow::Error::new(error).context("cannot write to stdout")),
        }
    };
    if cut > 0 {
        let (lines, were) = if cut == 1 { ("line", "was") } else { ("lines", "were") };
        eprintln!(
            "filectx: {cut} {lines} {were} longer than {READ_LINE_MAX_CHARS} characters and {were} cut"
        );
    }
    result
}

/// Records the file's current version for this session: a one-line `file/read` (any window
/// counts), so that the write or edit that follows is allowed.
async fn observe(client: &Client, path: &str) -> Result<(), ClientError> {
    client.file_read(ReadParams { path: path.to_owned(), offset: None, limit: Some(1) }).await.map(drop)
}

/// `file/stat`; `file/read` (one line) when the file exists; then `file/write`.
async fn write(client: &Client, params: WriteParams, json: bool) -> anyhow::Result<String> {
    if client.file_stat(&params.path).await?.exists {
        observe(client, &params.path).await?;
    }
    if json {
        return raw(client, methods::FILE_WRITE, &params).await;
    }
    let result = client.file_write(params).await?;
    let done = match result.operation {
        WriteOperation::Create => "created",
        WriteOperation::Update => "updated",
    };
    Ok(format!("{done} {}\n", result.display_path))
}

/// `file/read` (one line), then `file/edit`.
async fn edit(client: &Client, params: EditParams, json: bool) -> anyhow::Result<String> {
    observe(client, &params.path).await?;
    if json {
        return raw(client, methods::FILE_EDIT, &params).await;
    }
    let result = client.file_edit(params).await?;
    let plural = if result.replacements == 1 { "" } else { "s" };
    Ok(format!("edited {}: {} replacement{plural}\n", result.display_path, result.replacements))
}

/// `watch` until no watched file is left, stdout closes, or SIGINT or SIGTERM comes; each ends
/// successfully, and `run` then closes the session politely.
async fn watch(client: &Client, paths: &[String], json: bool) -> anyhow::Result<()> {
    // Listening replaces the signals' default action (ending the process at once) for good.
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    tokio::select! {
        result = watch_changes(client, paths, json) => result,
        _ = interrupt.recv() => Ok(()),
        _ = terminate.recv() => Ok(()),
    }
}

/// Opens the `file/didChange` stream, reads one line of each file (recording its version), then
/// prints each notice as it comes; a changed file is read again, so that its next change is
/// notified too (the daemon notifies once per recorded version).
async fn watch_changes(client: &Client, paths: &[String], json: bool) -> anyhow::Result<()> {
    // First: notices that arrive before the stream is open are dropped.
    let mut notices = client.notifications(methods::FILE_DID_CHANGE).await?;
    // The watched files by canonical path, the key notices carry: PATHs naming one file count
    // once, and a notice for a file no longer watched is recognised (and ignored).
    let mut watched = HashSet::new();
    for path in paths {
        observe(client, path).await?;
        watched.insert(client.fs_resolve(path).await?.path);
    }
    while !watched.is_empty() {
        let Some(params) = notices.next().await else {
            if notices.lagged() {
                bail!("file/didChange notices came faster than they could be written, and some were lost");
            }
            return Err(client.disconnected().await.into());
        };
        let change: FileDidChange = serde_json::from_value(params.clone()).map_err(ClientError::Decode)?;
        // A file deleted earlier (which may notify again when it comes back as it was).
        if !watched.contains(&change.path) {
            continue;
        }
        if print_change(&change, &params, json)?.is_break() {
            return Ok(());
        }
        if change.version.is_none() {
            watched.remove(&change.path);
            continue;
        }
        match observe(client, &change.path).await {
            Ok(()) => {}
            // Gone (or no longer a regular file) before the read: no notice will come for it any
            // more, so it is reported as deleted now.
            Err(error)
                if matches!(error.fs_code(), Some(FsErrorCode::NotFound | FsErrorCode::IsDirectory)) =>
            {
                watched.remove(&change.path);
                let deleted = FileDidChange { version: None, ..change };
                if print_change(&deleted, &serde_json::to_value(&deleted)?, json)?.is_break() {
                    return Ok(());
                }
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// Writes one notice to stdout and flushes: `params` as one line of JSON, or the readable line.
/// Breaks when stdout is closed (nobody reads any more). A blocking write, as in `cat`: while
/// stdout is full the socket is not read either, so notices pile up at the daemon, which bounds
/// them, rather than in this client.
fn print_change(change: &FileDidChange, params: &Value, json: bool) -> anyhow::Result<ControlFlow<()>> {
    let line = if json { format!("{params}\n") } else { render_change(change) };
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(line.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(ControlFlow::Continue(())),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(ControlFlow::Break(())),
        Err(error) => Err(anyhow::Error::new(error).context("cannot write to stdout")),
    }
}

/// `changed PATH (version 0123456789ab)` or `deleted PATH`, and a newline.
fn render_change(change: &FileDidChange) -> String {
    match &change.version {
        Some(version) => {
            let shown = version
                .char_indices()
                .nth(VERSION_SHOWN)
                .map_or(version.as_str(), |(end, _)| &version[..end]);
            format!("changed {} (version {shown})\n", change.display_path)
        }
        None => format!("deleted {}\n", change.display_path),
    }
}

/// The exit code and the one-line message for a failure; `autostart` says whether the command
/// was allowed to start the daemon.
fn describe(error: &anyhow::Error, socket: &Path, autostart: bool) -> (u8, String) {
    if let Some(failed) = error.downcast_ref::<ToolFailed>() {
        return (EXIT_REQUEST_FAILED, failed.to_string());
    }
    let Some(client_error) = error.downcast_ref::<ClientError>() else {
        return (EXIT_FAILURE, format!("{error:#}"));
    };
    let path = socket.display();
    match client_error {
        ClientError::Connect { source, .. } => {
            let message = match source.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused if autostart => {
                    format!("no daemon is listening at {path} (start one with: filectxd)")
                }
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                    format!("no daemon is listening at {path} (autostart is off; start one with: filectxd)")
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
        // It names the socket, what is wrong and how to fix it.
        ClientError::UntrustedSocket { .. } => (EXIT_UNTRUSTED, client_error.to_string()),
        // Both name the daemon binary, the socket and the log file.
        ClientError::Spawn { .. } | ClientError::AutostartTimeout { .. } => {
            (EXIT_UNREACHABLE, client_error.to_string())
        }
        ClientError::Rpc { code, message, .. } => match client_error.fs_code() {
            Some(fs) => (EXIT_REQUEST_FAILED, format!("{fs}: {message}")),
            None => (EXIT_REQUEST_FAILED, format!("the daemon answered error {code}: {message}")),
        },
        ClientError::StreamFailed { code, message, .. } => {
            (EXIT_REQUEST_FAILED, format!("{code}: {message}"))
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

/// `file/stat` as aligned `key: value` lines; size and version only when the daemon gave them.
fn render_stat(stat: &FileStatResult) -> String {
    let kind = match stat.kind {
        FileKind::File => "file",
        FileKind::Directory => "directory",
        FileKind::Other => "other",
        FileKind::None => "none",
    };
    let mut rows = vec![
        ("path", stat.display_path.clone()),
        ("exists", if stat.exists { "yes" } else { "no" }.to_owned()),
        ("kind", kind.to_owned()),
    ];
    if let Some(size) = stat.size {
        rows.push(("size", human_bytes(size)));
    }
    if let Some(version) = &stat.version {
        rows.push(("version", version.clone()));
    }
    aligned(&rows)
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
        ("open files", status.open_files.to_string()),
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
            open_files: 2,
            watched_paths: 2,
            requests: 9,
            notifications_dropped: 0,
            hashed_bytes: 0,
            file_slots: 8,
            file_slots_busy: 0,
            file_slots_waiting: 0,
        };
        let text = render_status(&status, std::path::Path::new("/run/user/1/filectx.sock"));
        assert!(text.contains("uptime:                2h 3m 4s\n"), "{text}");
        assert!(text.contains("dropped notifications: 0\n"), "{text}");
        // Every value starts in the same column, right after the longest key.
        assert_eq!(text.lines().count(), 12);
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
    fn roots_before_and_after_the_subcommand_are_joined() -> Result<(), clap::Error> {
        let cli = Cli::try_parse_from(["filectx", "--root", "a", "stat", "p", "--root", "b", "--root", "c"])?;
        assert_eq!(cli.roots(), [PathBuf::from("a"), PathBuf::from("b"), PathBuf::from("c")]);
        let cli = Cli::try_parse_from(["filectx", "status", "--root", "b"])?;
        assert_eq!(cli.roots(), [PathBuf::from("b")]);
        assert!(Cli::try_parse_from(["filectx", "tools"])?.roots().is_empty());
        Ok(())
    }

    #[test]
    fn stat_lines_leave_out_what_the_daemon_did_not_give() {
        let stat = FileStatResult {
            exists: true,
            kind: FileKind::Directory,
            display_path: "src".to_owned(),
            size: Some(96),
            version: None,
            observed_version: None,
            fresh: false,
        };
        assert_eq!(render_stat(&stat), "path:   src\nexists: yes\nkind:   directory\nsize:   96 B\n");
    }

    #[test]
    fn a_failed_tool_shows_its_code_then_its_text() {
        let failed = ToolFailed { code: Some(FsErrorCode::NotObserved), text: "Read it first.\n".to_owned() };
        assert_eq!(failed.to_string(), "FS_NOT_OBSERVED: Read it first.");
        let failed = ToolFailed { code: None, text: "Invalid arguments.".to_owned() };
        assert_eq!(failed.to_string(), "Invalid arguments.");
    }

    #[test]
    fn changes_show_the_display_path_and_the_start_of_the_version() {
        let change = |version: Option<&str>| FileDidChange {
            path: "/home/me/project/src/lib.rs".to_owned(),
            display_path: "src/lib.rs".to_owned(),
            version: version.map(str::to_owned),
        };
        let long = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_eq!(render_change(&change(Some(long))), "changed src/lib.rs (version 0123456789ab)\n");
        assert_eq!(render_change(&change(Some("b3-1"))), "changed src/lib.rs (version b3-1)\n");
        // Cut at a character, never inside one.
        assert_eq!(
            render_change(&change(Some("ééééééééééééé"))),
            "changed src/lib.rs (version éééééééééééé)\n"
        );
        assert_eq!(render_change(&change(None)), "deleted src/lib.rs\n");
    }

    #[test]
    fn watch_needs_a_path_and_takes_several() -> Result<(), clap::Error> {
        assert!(Cli::try_parse_from(["filectx", "watch"]).is_err());
        let cli = Cli::try_parse_from(["filectx", "--json", "watch", "a", "b", "--root", "r"])?;
        assert!(matches!(&cli.command, Command::Watch(args) if args.paths == ["a", "b"]));
        assert_eq!(cli.roots(), [PathBuf::from("r")]);
        assert!(check_usage(cli).is_ok());
        Ok(())
    }

    #[test]
    fn usage_exit_code_matches_clap() {
        let error = Cli::try_parse_from(["filectx", "frobnicate"]).err();
        assert_eq!(error.map(|e| e.exit_code()), Some(i32::from(EXIT_USAGE)));
    }
}

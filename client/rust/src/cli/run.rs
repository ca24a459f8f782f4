//! From the command line to the daemon: the session's roots and current folder, the job with its
//! local inputs checked (paths, content to write), connecting (or starting the daemon), running
//! the job or `filectx mcp`, and leaving politely.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use filectx_client::mcp::{self, McpError, McpOptions};
use filectx_client::{Client, SpawnOptions};
use filectx_protocol::{
    ClientInfo, DiagnosticsMode, EditParams, InitializeParams, ReadParams, StaleEdits, StreamTextParams,
    ToolName, WriteParams,
};

use serde_json::Map;

use super::args::{Cli, Command, McpArgs, WriteArgs};
use super::commands::{Job, execute};
use super::journal::{History, Undo};
use super::values::canonical_root;

/// How long leaving politely (`shutdown`, `exit`, the daemon hanging up) may take before the
/// command leaves anyway: a daemon that stopped answering does not hold the command (or a
/// `watch` ended with Ctrl-C) for the whole request timeout.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// `filectx mcp`: connects to the daemon (starting it when none answers), then serves MCP on
/// stdin/stdout until stdin ends. The one daemon session (roots as for every command; the
/// tools, read-only flag and deduplicated re-reads from the options) is opened when the MCP
/// client's `initialize` arrives, so its name and read budget can fit that client.
pub(crate) async fn run_mcp(cli: &Cli, args: &McpArgs, socket: &Path) -> anyhow::Result<()> {
    let mut params = Session::new(&cli.roots())?.params;
    params.client_info = args
        .name
        .clone()
        .map(|name| ClientInfo { name, version: Some(env!("CARGO_PKG_VERSION").to_owned()) });
    params.tools = match &args.tools {
        Some(tools) => Some(tools.clone()),
        // A read-only session lists only what it can do.
        None if args.read_only => {
            Some(vec![ToolName::Read, ToolName::Glob, ToolName::Grep, ToolName::Diagnostics])
        }
        None if args.undo => Some(ToolName::ALL.to_vec()),
        None => Some(ToolName::FILE_TOOLS.iter().copied().chain([ToolName::Diagnostics]).collect()),
    };
    // The daemon offers `diagnostics` only where a language server may run.
    if args.no_diagnostics {
        params.diagnostics = Some(DiagnosticsMode::Off);
        params.tools =
            params.tools.map(|tools| tools.into_iter().filter(|t| *t != ToolName::Diagnostics).collect());
    }
    params.read_only = args.read_only.then_some(true);
    // On unless --no-dedup-reads (the last of --dedup-reads and --no-dedup-reads wins).
    params.dedup_reads = (!args.no_dedup_reads).then_some(true);
    params.stale_edits = args.merge_stale_edits.then_some(StaleEdits::Merge);
    let client = if cli.no_autostart {
        Client::connect(socket).await?
    } else {
        Client::connect_or_spawn(socket, SpawnOptions::default()).await?
    };
    let options = McpOptions::open_session(params)
        .fixed_tools(args.tools.is_some())
        .max_output(args.max_output)
        .structured(args.structured);
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    mcp::serve(client, options, input, tokio::io::stdout()).await.map_err(|error| match error {
        McpError::Input(error) => anyhow::Error::new(error).context("cannot read stdin"),
        McpError::Client(error) => error.into(),
        other => other.into(),
    })
}

/// Runs the command and returns what to print on stdout.
pub(crate) async fn run(cli: &Cli, socket: &Path) -> anyhow::Result<String> {
    // Everything local is checked (and the content read) before connecting, so a local failure
    // never opens a session.
    let mut session = Session::new(&cli.roots())?;
    let job = prepare(&cli.command, &session)?;
    if let Job::Tool(..) = job {
        // The search tools are offered only to sessions that ask for them.
        session.params.tools = Some(ToolName::FILE_TOOLS.to_vec());
    }
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
        let root_texts = roots.iter().map(|root| utf8(root, "root")).collect::<anyhow::Result<_>>()?;
        let params = InitializeParams {
            client_info: Some(ClientInfo {
                name: "filectx".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
            cwd: if explicit_cwd { Some(utf8(&cwd, "current folder")?) } else { None },
            ..InitializeParams::new(root_texts)
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
            Job::Read(ReadParams {
                path: args.path.clone(),
                offset: args.offset,
                limit: args.limit,
                max_line_chars: args.max_line_chars,
                owner: None,
            })
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
            Job::Write(WriteParams { path: args.path.clone(), content: new_content(args)?, owner: None })
        }
        Command::Edit(args) => {
            session.check_path(&args.path)?;
            Job::Edit(EditParams {
                path: args.path.clone(),
                old_string: args.old.clone(),
                new_string: args.new.clone(),
                replace_all: args.replace_all.then_some(true),
                owner: None,
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
        Command::Glob(args) => {
            let mut arguments = Map::new();
            arguments.insert("pattern".to_owned(), args.pattern.clone().into());
            if let Some(path) = &args.path {
                session.check_path(path)?;
                arguments.insert("path".to_owned(), path.clone().into());
            }
            Job::Tool(ToolName::Glob, arguments)
        }
        Command::Grep(args) => {
            let mut arguments = Map::new();
            arguments.insert("pattern".to_owned(), args.pattern.clone().into());
            if let Some(path) = &args.path {
                session.check_path(path)?;
                arguments.insert("path".to_owned(), path.clone().into());
            }
            let mode = if args.content {
                "content"
            } else if args.count {
                "count"
            } else {
                "files_with_matches"
            };
            arguments.insert("output_mode".to_owned(), mode.into());
            for (key, value) in [("glob", &args.glob), ("type", &args.file_type)] {
                if let Some(value) = value {
                    arguments.insert(key.to_owned(), value.clone().into());
                }
            }
            for (key, value) in
                [("context", args.context), ("head_limit", args.head_limit), ("offset", args.offset)]
            {
                if let Some(value) = value {
                    arguments.insert(key.to_owned(), value.into());
                }
            }
            if args.ignore_case {
                arguments.insert("case_insensitive".to_owned(), true.into());
            }
            if args.multiline {
                arguments.insert("multiline".to_owned(), true.into());
            }
            Job::Tool(ToolName::Grep, arguments)
        }
        Command::History(args) => {
            for path in &args.paths {
                session.check_path(path)?;
            }
            Job::History(History {
                paths: args.paths.clone(),
                session_id: args.session_id.clone(),
                owner: args.owner.clone(),
                since: args.since,
                limit: args.limit,
            })
        }
        Command::Diff(args) => Job::Diff(args.entry.clone()),
        Command::Undo(args) => {
            let undo = if let Some(path) = &args.last {
                session.check_path(path)?;
                Undo::Last(path.clone())
            } else if let Some(id) = &args.session_id {
                Undo::Session { id: id.clone(), owner: args.owner.clone() }
            } else {
                Undo::Entries(args.entries.clone())
            };
            Job::Undo { undo, force: args.force }
        }
        // `main` runs `mcp`, `gate` and `service` through `run_mcp`, `run_gate` and `run_service`,
        // never through `run`.
        Command::Mcp(_) => bail!("mcp is served by run_mcp"),
        Command::Gate(_) => bail!("gate is served by run_gate"),
        Command::Service(_) => bail!("service is served by run_service"),
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

//! The command line of `filectx`: the clap argument structs, the checks clap cannot express,
//! and the `--root` folders joined from both sides of the subcommand.

use std::path::PathBuf;

use clap::{Args, CommandFactory as _, Parser, Subcommand};
use filectx_client::JOURNAL_MAX_PAGE;
use filectx_client::mcp::MIN_MAX_OUTPUT;
use filectx_protocol::ToolName;
use filectx_protocol::tools::READ_LINE_LIMIT;

use super::help::{
    AFTER_HELP, CAT_LONG_ABOUT, EDIT_LONG_ABOUT, GATE_AFTER_HELP, GATE_LONG_ABOUT, HISTORY_LONG_ABOUT,
    JOURNAL_AFTER_HELP, MCP_AFTER_HELP, MCP_LONG_ABOUT, SERVICE_LONG_ABOUT, UNDO_LONG_ABOUT,
    WATCH_AFTER_HELP, WATCH_LONG_ABOUT, WRITE_LONG_ABOUT, socket_help,
};
use super::journal::{entry_id, parse_since};
use super::values::{OnTimeoutArg, compile_glob, parse_seconds};

/// Environment variable that turns autostart off, as `--no-autostart` does (`1`, `true`, `yes`,
/// `on`; `0`, `false`, `no`, `off` or empty leave it on).
const NO_AUTOSTART_ENV: &str = "FILECTX_NO_AUTOSTART";

/// Help heading of the options every subcommand accepts.
const GLOBAL: &str = "Global options";

/// Talk to the filectx daemon (filectxd): show its status and the tools it offers, read,
/// stream, write, edit and stat files through it, watch them for changes, and list and undo
/// the changes agents made.
#[derive(Debug, Parser)]
#[command(name = "filectx", version, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    // The help text is `socket_help()`: it shows the path the default resolves to.
    #[arg(long, global = true, value_name = "PATH", help = socket_help(), help_heading = GLOBAL)]
    pub(crate) socket: Option<PathBuf>,

    /// Print the daemon's raw JSON result instead of readable text (for scripts)
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub(crate) json: bool,

    /// Never start the daemon: when none answers at the socket, fail (exit 3) [default: start
    /// one, see Autostart below]
    #[arg(
        long,
        global = true,
        env = NO_AUTOSTART_ENV,
        value_parser = clap::builder::FalseyValueParser::new(),
        help_heading = GLOBAL,
    )]
    pub(crate) no_autostart: bool,

    #[command(flatten)]
    pub(crate) roots: RootArgs,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `--root`, accepted before and after the subcommand. It is not a clap global: a repeated global
/// option given on both sides of the subcommand keeps only the values after it
/// (clap-rs/clap#1570), so the top level and each subcommand have their own, joined in order.
#[derive(Debug, Args)]
pub(crate) struct RootArgs {
    /// A folder the session may touch (repeatable); replaces the default, the current folder
    #[arg(long = "root", value_name = "DIR", help_heading = GLOBAL)]
    pub(crate) roots: Vec<PathBuf>,
}

impl Cli {
    /// Every `--root`, in command-line order.
    pub(crate) fn roots(&self) -> Vec<PathBuf> {
        let after = match &self.command {
            Command::Status(roots) | Command::Tools(roots) => roots,
            Command::Read(args) => &args.roots,
            Command::Cat(args) => &args.roots,
            Command::Write(args) => &args.roots,
            Command::Edit(args) => &args.roots,
            Command::Stat(args) => &args.roots,
            Command::Glob(args) => &args.roots,
            Command::Grep(args) => &args.roots,
            Command::Watch(args) => &args.roots,
            Command::Mcp(args) => &args.roots,
            Command::Gate(args) => &args.roots,
            Command::History(args) => &args.roots,
            Command::Diff(args) => &args.roots,
            Command::Undo(args) => &args.roots,
            // No session: the units are the user's, whatever the folders.
            Command::Service(_) => return self.roots.roots.clone(),
        };
        self.roots.roots.iter().chain(&after.roots).cloned().collect()
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    /// List the files matching a glob, newest first, as the model-facing glob tool shows them
    /// (tools/call glob)
    Glob(GlobArgs),
    /// Search file contents with a regular expression, as the model-facing grep tool shows it
    /// (tools/call grep; matching files by default, --content for lines, --count for counts)
    Grep(GrepArgs),
    /// Print a line each time one of the files changes or is deleted, until none is left
    /// (file/read and fs/resolve of each, then file/didChange notices)
    #[command(long_about = WATCH_LONG_ABOUT, after_help = WATCH_AFTER_HELP)]
    Watch(WatchArgs),
    /// Serve the file tools to an MCP client (Claude Code, Codex, Cursor, …) over stdio: one
    /// daemon session for the life of the process
    #[command(long_about = MCP_LONG_ABOUT, after_help = MCP_AFTER_HELP)]
    Mcp(McpArgs),
    /// Review agents' writes and edits in some folders before they land: each is shown as a diff
    /// and waits for allow or deny (gate/register, then gate/writeIntent)
    #[command(long_about = GATE_LONG_ABOUT, after_help = GATE_AFTER_HELP)]
    Gate(GateArgs),
    /// List the changes made to files, newest first, one line each with its diff stat: every
    /// agent's writes, edits and undos through the daemon, and outside changes to files agents
    /// had read (journal/list)
    #[command(long_about = HISTORY_LONG_ABOUT, after_help = JOURNAL_AFTER_HELP)]
    History(HistoryArgs),
    /// Show one change from the history as a unified diff (journal/diff)
    #[command(after_help = JOURNAL_AFTER_HELP)]
    Diff(DiffArgs),
    /// Put files back as they were before a change: one entry, a file's last change, or every
    /// change of a session, newest first (journal/restore)
    #[command(long_about = UNDO_LONG_ABOUT, after_help = JOURNAL_AFTER_HELP)]
    Undo(UndoArgs),
    /// Run the daemon as a systemd user service, started on the first connection: install or
    /// uninstall its units (with this installation's filectxd), or show their state
    #[command(long_about = SERVICE_LONG_ABOUT)]
    Service(ServiceArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ServiceArgs {
    #[command(subcommand)]
    pub(crate) action: ServiceAction,
}

#[derive(Debug, Clone, Copy, Subcommand)]
pub(crate) enum ServiceAction {
    /// Write filectxd.socket and filectxd.service into ~/.config/systemd/user (ExecStart: the
    /// filectxd beside this filectx; PATH: yours), reload systemd and enable the socket
    Install,
    /// Stop and disable the units and remove them
    Uninstall,
    /// Show the installed units, their filectxd and whether systemd runs them
    Status,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Only changes to these files, or to files under these folders [default: every file under
    /// the roots]
    #[arg(value_name = "PATH")]
    pub(crate) paths: Vec<String>,
    /// Only the changes of this session (as the BY column and `filectx status` show it;
    /// `outside`: only changes made outside the daemon)
    #[arg(long = "session", value_name = "ID")]
    pub(crate) session_id: Option<String>,
    /// Only the changes of this owner (an agent within a session)
    #[arg(long, value_name = "NAME")]
    pub(crate) owner: Option<String>,
    /// Only changes made within this span back from now: 90s, 10m, 2h, 3d, 1w
    #[arg(long, value_name = "SPAN", value_parser = parse_since)]
    pub(crate) since: Option<std::time::Duration>,
    /// Most entries to show
    #[arg(
        long,
        value_name = "N",
        default_value_t = 50,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(JOURNAL_MAX_PAGE)),
    )]
    pub(crate) limit: u32,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The entry, as `filectx history` shows it (57 or #57)
    #[arg(value_name = "ENTRY", value_parser = entry_id)]
    pub(crate) entry: String,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["entries", "last", "session_id"])))]
pub(crate) struct UndoArgs {
    /// The entries to undo, in this order (as `filectx history` shows them: 57 or #57)
    #[arg(value_name = "ENTRY", value_parser = entry_id)]
    pub(crate) entries: Vec<String>,
    /// Undo the newest change to this file (or to any file under this folder)
    #[arg(long, value_name = "PATH")]
    pub(crate) last: Option<String>,
    /// Undo every change of this session under the roots, newest first
    #[arg(long = "session", value_name = "ID")]
    pub(crate) session_id: Option<String>,
    /// With --session: only this owner's changes
    #[arg(long, value_name = "NAME", requires = "session_id")]
    pub(crate) owner: Option<String>,
    /// Restore even a file that changed since the entry, overwriting that change (which is
    /// journaled too, so it can be undone in turn)
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    /// The file: absolute, or relative to the current folder
    pub(crate) path: String,
    /// 1-based number of the first line to show [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) offset: Option<u64>,
    /// Most lines to show [default and maximum: 2000]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) limit: Option<u64>,
    /// With --json: cut lines longer than N characters, reading only their first N (listed in
    /// truncatedLines). Needed for a window whose whole lines exceed the daemon's window size.
    /// Without --json, lines are always cut at 2000, as the read tool does
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_line_chars: Option<u32>,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct GlobArgs {
    /// The glob, matched against paths relative to PATH: `**/*.rs`, `src/**/*.{ts,tsx}`
    pub(crate) pattern: String,
    /// The folder to search [default: the current folder]
    pub(crate) path: Option<String>,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct GrepArgs {
    /// The regular expression (Rust regex syntax, like ripgrep)
    pub(crate) pattern: String,
    /// The file or folder to search [default: the current folder]
    pub(crate) path: Option<String>,
    /// Show matching lines, under each file's path and numbered as `read` numbers them
    #[arg(long, conflicts_with = "count")]
    pub(crate) content: bool,
    /// Show the number of matching lines per file (`path:N`)
    #[arg(long)]
    pub(crate) count: bool,
    /// Only files matching this glob, as ripgrep's -g
    #[arg(long, short = 'g', value_name = "GLOB")]
    pub(crate) glob: Option<String>,
    /// Only files of this ripgrep type (rust, py, js, ...)
    #[arg(long = "type", short = 't', value_name = "TYPE")]
    pub(crate) file_type: Option<String>,
    /// Match regardless of case
    #[arg(long, short = 'i')]
    pub(crate) ignore_case: bool,
    /// With --content: lines of context around each match
    #[arg(long, short = 'C', value_name = "N")]
    pub(crate) context: Option<u64>,
    /// Let the pattern span lines
    #[arg(long)]
    pub(crate) multiline: bool,
    /// Show only the first N entries
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) head_limit: Option<u64>,
    /// Skip the first N entries
    #[arg(long, value_name = "N")]
    pub(crate) offset: Option<u64>,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct CatArgs {
    /// The file: absolute, or relative to the current folder
    pub(crate) path: String,
    /// 1-based number of the first line to write [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) offset: Option<u64>,
    /// Lines per chunk the daemon sends (each chunk is written and flushed at once)
    /// [default: 1000, at most 2000]
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..=u64::from(READ_LINE_LIMIT)),
    )]
    pub(crate) chunk_lines: Option<u64>,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct WriteArgs {
    /// The file: absolute, or relative to the current folder
    pub(crate) path: String,
    /// The file's complete new content [default: read from stdin]
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true, conflicts_with = "from")]
    pub(crate) content: Option<String>,
    /// Take the new content from this local file (`-`: stdin)
    #[arg(long, value_name = "FILE")]
    pub(crate) from: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct EditArgs {
    /// The file: absolute, or relative to the current folder
    pub(crate) path: String,
    /// The exact text to replace (without the line-number prefix `read` shows)
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub(crate) old: String,
    /// The text to put in its place
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub(crate) new: String,
    /// Replace every occurrence instead of exactly one
    #[arg(long)]
    pub(crate) replace_all: bool,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct StatArgs {
    /// The path: absolute, or relative to the current folder
    pub(crate) path: String,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// The files to watch: absolute, or relative to the current folder
    #[arg(value_name = "PATH", required = true)]
    pub(crate) paths: Vec<String>,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// Refuse every write and edit (FS_PERMISSION_DENIED); without --tools, list only `read`,
    /// `glob` and `grep`
    #[arg(long)]
    pub(crate) read_only: bool,
    /// The tools to offer, comma-separated (read, write, edit, glob, grep, undo, diagnostics)
    /// [default: read, write, edit, glob, grep and diagnostics (and undo with --undo); read, glob,
    /// grep and diagnostics with --read-only; diagnostics only when the daemon has a language
    /// server]
    #[arg(long, value_name = "TOOLS", value_delimiter = ',', value_parser = parse_tool, num_args = 1..)]
    pub(crate) tools: Option<Vec<ToolName>>,
    /// Send a repeated read of unchanged lines in full every time, instead of one short line
    /// saying the model already has them (the default: dedupReads)
    #[arg(long, overrides_with = "dedup_reads")]
    pub(crate) no_dedup_reads: bool,
    /// The default, kept for old command lines: a repeated read of unchanged lines is answered
    /// with one short line (the next identical read gets the text)
    #[arg(long, overrides_with = "no_dedup_reads")]
    pub(crate) dedup_reads: bool,
    /// Results also carry structuredContent, and tools/list declares their outputSchema (from
    /// MCP 2025-06-18) [default: text content only, which is what clients show their model]
    #[arg(long)]
    pub(crate) structured: bool,
    /// The most characters of one tool result the MCP client keeps for its model, counted in the
    /// result's JSON (a control character's escape is 6): read, glob and grep answers are sized
    /// to fit, footer included [default: by the client's clientInfo.name: 10000 for Codex,
    /// 40000 for Gemini CLI; else no limit of the client's, the daemon's 51200-byte budget]
    #[arg(long, value_name = "CHARS", value_parser = clap::value_parser!(u64).range(MIN_MAX_OUTPUT..))]
    pub(crate) max_output: Option<u64>,
    /// Apply an edit whose file changed since it was read when the change keeps away from the
    /// edited lines (staleEdits "merge"), saying so and showing the change, instead of refusing
    /// it; a change in or next to them is still refused
    #[arg(long)]
    pub(crate) merge_stale_edits: bool,
    /// Also offer the `undo` tool: the model may put a file back as it was before its own last
    /// change to it (refused, showing what changed, if anyone changed the file since)
    #[arg(long, conflicts_with_all = ["tools", "read_only"])]
    pub(crate) undo: bool,
    /// Writes and edits do not wait for their file's language server, and the `diagnostics`
    /// tool is not offered [default: a write's or edit's answer ends with the errors it
    /// introduced, when the daemon has a language server for the file]
    #[arg(long)]
    pub(crate) no_diagnostics: bool,
    /// The agent's name, as the daemon knows the session (clientInfo.name; `filectx gate` shows
    /// it with each write) [default: the MCP client's clientInfo.name, else filectx mcp]
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

#[derive(Debug, Args)]
pub(crate) struct GateArgs {
    /// The folders to gate [default: the current folder]; the session's roots are these, unless
    /// --root gives others that contain them
    #[arg(value_name = "FOLDER")]
    pub(crate) folders: Vec<PathBuf>,
    /// The gate's name, shown in daemon/status
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// Seconds the daemon waits for each decision [default: the daemon's, 50]
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub(crate) timeout: Option<std::time::Duration>,
    /// What the daemon does with an intent nobody decided in time [default: deny]
    #[arg(long, value_name = "WHAT", value_enum)]
    pub(crate) on_timeout: Option<OnTimeoutArg>,
    /// Allow every file creation without asking (overwrites and edits are still asked)
    #[arg(long)]
    pub(crate) allow_create: bool,
    /// Deny, without asking, every write or edit of a path matching GLOB (repeatable; checked
    /// before the allowing rules)
    #[arg(long = "deny", value_name = "GLOB", value_parser = check_glob)]
    pub(crate) deny: Vec<String>,
    /// Allow, without asking, every write or edit of a path matching GLOB (repeatable)
    #[arg(long = "auto-allow", value_name = "GLOB", value_parser = check_glob)]
    pub(crate) auto_allow: Vec<String>,
    #[command(flatten)]
    pub(crate) roots: RootArgs,
}

/// A `--deny` or `--auto-allow` glob, checked to compile.
fn check_glob(glob: &str) -> Result<String, String> {
    compile_glob(glob).map(|_| glob.to_owned())
}

/// A tool name given on the command line.
fn parse_tool(name: &str) -> Result<ToolName, String> {
    ToolName::from_name(name.trim()).ok_or_else(|| {
        format!("unknown tool {name:?}: the tools are read, write, edit, glob, grep, undo and diagnostics")
    })
}

/// Refuses what clap cannot express: `--json` is global, but `cat` and `mcp` have no JSON
/// output of their own, and `read --max-line-chars` is a `file/read` option (`--json` only).
pub(crate) fn check_usage(cli: Cli) -> Result<Cli, clap::Error> {
    if cli.json && matches!(cli.command, Command::Cat(_)) {
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "--json cannot be used with cat, which writes the file's lines as they are",
        ));
    }
    if !cli.json && matches!(&cli.command, Command::Read(args) if args.max_line_chars.is_some()) {
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "--max-line-chars needs --json: without it, read shows lines as the read tool does, cut at \
             2000 characters",
        ));
    }
    if cli.json && matches!(cli.command, Command::Mcp(_)) {
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "--json cannot be used with mcp, which always speaks JSON-RPC on stdout",
        ));
    }
    if matches!(cli.command, Command::Service(_)) && (cli.json || !cli.roots.roots.is_empty()) {
        return Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "service takes neither --json nor --root: it sets up the daemon, which serves every folder",
        ));
    }
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn watch_needs_a_path_and_takes_several() -> Result<(), clap::Error> {
        assert!(Cli::try_parse_from(["filectx", "watch"]).is_err());
        let cli = Cli::try_parse_from(["filectx", "--json", "watch", "a", "b", "--root", "r"])?;
        assert!(matches!(&cli.command, Command::Watch(args) if args.paths == ["a", "b"]));
        assert_eq!(cli.roots(), [PathBuf::from("r")]);
        assert!(check_usage(cli).is_ok());
        Ok(())
    }

    #[test]
    fn service_has_three_actions_and_no_session_options() -> Result<(), clap::Error> {
        for (word, action) in [
            ("install", ServiceAction::Install),
            ("uninstall", ServiceAction::Uninstall),
            ("status", ServiceAction::Status),
        ] {
            let cli = Cli::try_parse_from(["filectx", "service", word])?;
            assert!(
                matches!(&cli.command, Command::Service(args) if std::mem::discriminant(&args.action) == std::mem::discriminant(&action))
            );
            assert!(check_usage(cli).is_ok());
        }
        assert!(Cli::try_parse_from(["filectx", "service"]).is_err());
        let cli = Cli::try_parse_from(["filectx", "--json", "service", "status"])?;
        assert!(check_usage(cli).is_err());
        Ok(())
    }

    #[test]
    fn max_line_chars_is_for_the_json_read_only() -> Result<(), clap::Error> {
        let cli = Cli::try_parse_from(["filectx", "--json", "read", "p", "--max-line-chars", "80"])?;
        assert!(matches!(&cli.command, Command::Read(args) if args.max_line_chars == Some(80)));
        assert!(check_usage(cli).is_ok());
        let cli = Cli::try_parse_from(["filectx", "read", "p", "--max-line-chars", "80"])?;
        let refused = check_usage(cli).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(refused.contains("--max-line-chars needs --json"), "{refused}");
        assert!(Cli::try_parse_from(["filectx", "--json", "read", "p", "--max-line-chars", "0"]).is_err());
        Ok(())
    }
}

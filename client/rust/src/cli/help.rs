//! The long help texts of `filectx` and its subcommands: what `--help` shows after the one-line
//! summaries clap takes from the argument structs in `args.rs`.

/// The end of `filectx --help`: the file commands, autostart, exit codes, security, sessions.
pub(crate) const AFTER_HELP: &str = "\
Files (PATH is absolute, or relative to the current folder):
  filectx read PATH [--offset N] [--limit N] [--json [--max-line-chars N]]
      numbered lines and a footer, exactly as the model-facing read tool shows them
      (--json: the structured file/read result instead, its lines whole unless
      --max-line-chars cuts them)
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
  filectx glob PATTERN [PATH]
      the files matching a glob (`**/*.rs`), newest first, as the model-facing glob tool
      lists them (ignored and hidden files skipped)
  filectx grep PATTERN [PATH] [--content | --count] [-g GLOB] [-t TYPE] [-i] [-C N]
               [--multiline] [--head-limit N] [--offset N]
      a regex search, as the model-facing grep tool shows it: matching files (default),
      matching lines (--content) or counts per file (--count)
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

Agents:
  filectx mcp [--root DIR] [--read-only] [--tools LIST] [--undo]
      serve the file tools to an MCP client (Claude Code, Codex, Cursor, ...) over stdio
  filectx gate [FOLDER...] [--allow-create] [--deny GLOB] [--auto-allow GLOB]
      review agents' writes and edits in FOLDERs before they land: allow or deny each diff
  filectx service install | uninstall | status
      run the daemon as a systemd user service, started on the first connection

Undo (every change through the daemon is journaled, and outside changes to files agents read):
  filectx history [PATH...] [--session ID] [--owner NAME] [--since 1h] [--limit N]
      the changes, newest first, one line each: entry, when, what, path, +added -removed, by
  filectx diff ENTRY
      one change as a unified diff
  filectx undo ENTRY... | --last PATH | --session ID [--owner NAME] [--force]
      put files back as they were before; refused (exit 4, the change shown) if the file
      changed since; see `filectx undo --help`

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

/// Help of `edit`, after its one-line summary.
pub(crate) const EDIT_LONG_ABOUT: &str = "\
Replace an exact, literal string in a text file (file/read, then file/edit)

One CLI call is one session, so the CLI reads the file itself first (one line is enough: any \
window records the file's version for the session) and then edits it. It therefore never \
refuses with FS_NOT_OBSERVED (\"not read yet\"), and only protects against changes that happen \
between its own read and the edit (FS_STALE_VERSION). A harness that wants an edit refused when \
the file changed since its agent last read it should keep one long-lived session (the \
filectx_client library) instead.";

/// Help of `cat`, after its one-line summary.
pub(crate) const CAT_LONG_ABOUT: &str = "\
Stream a text file of any size to stdout, its lines as they are, from one version of the file \
(fs/streamText)

Each line is written as the daemon shows it (without \\r, a leading BOM left out), followed by a \
newline, and stdout is flushed after every chunk, so `filectx cat big.log | head` shows the first \
lines at once; a closed stdout stops the stream and is not an error. Lines are written whole, \
however long; a single line longer than the daemon's --max-window-bytes (8 MiB by default) stops \
the stream with FS_TOO_LARGE (exit 4) after the lines already written. All lines come from the \
version the file had when the stream started: if the file changes meanwhile, the stream stops \
with FS_STALE_VERSION (exit 4) after the lines already written.";

/// Help of `write`, after its one-line summary.
pub(crate) const WRITE_LONG_ABOUT: &str = "\
Create a file or replace its whole content (file/stat, then file/read if it exists, then \
file/write)

One CLI call is one session, so when the file exists the CLI reads it itself first (one line is \
enough: any window records the file's version for the session) and then replaces it. It \
therefore never refuses with FS_NOT_OBSERVED, and only protects against changes that happen \
between its own read and the write (FS_STALE_VERSION). A harness that wants a write refused \
when the file changed since its agent last read it should keep one long-lived session (the \
filectx_client library) instead.";

/// Help of `watch`, after its one-line summary.
pub(crate) const WATCH_LONG_ABOUT: &str = "\
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
pub(crate) const WATCH_AFTER_HELP: &str = "\
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
pub(crate) const MCP_LONG_ABOUT: &str = "\
Serve the file tools to an MCP client (Claude Code, Codex, Cursor, Gemini CLI, …) over stdio: \
one daemon session for the life of the process

An MCP client starts `filectx mcp` as a stdio server. It connects to the daemon (starting it \
when none answers, as every command does; --no-autostart refuses) and, when the client's \
initialize arrives, opens one session, named after the client, and offers that session's \
tools, read, write, edit, glob and grep, to the client's model. Everything the model reads is \
recorded in that session, so an edit or overwrite of a file it has not read, or that changed \
since it read it, is refused with a message telling it what to do. Sessions are isolated: two \
`filectx mcp` processes (two agents) never authorize each other's edits.

The session's roots are the --root folders, else the current folder (where the MCP client \
starts the server; give --root to be sure). Relative paths resolve against the current folder \
when it is inside a root, else against the first root.";

/// The end of `mcp --help`: the protocol details and the exit codes.
pub(crate) const MCP_AFTER_HELP: &str = "\
Protocol: MCP over stdio, newline-delimited JSON-RPC 2.0; versions 2025-06-18, 2025-03-26 and \
2024-11-05 (a client asking for another gets 2025-06-18). Only JSON-RPC messages go to stdout; \
diagnostics go to stderr. The MCP server's instructions are the daemon session's. Each change \
of a file the session read (by another program or agent) is sent as notifications/message, \
level warning, logger filectx, data {path, displayPath, version, message}; logging/setLevel \
above warning silences them.

Results are text: the tool's text content, isError on a failure, and a failure's text starts \
with Error (FS_CODE): (Error: for one made here, e.g. a lost daemon), its code also in \
_meta.filectx.code. --structured adds structuredContent {text, error?} and the tools' \
outputSchema (from 2025-06-18), which Claude Code and Codex show their model as JSON instead of \
the text. Arguments a tool's schema does not name (a harness's own, e.g. wait_for_previous) are \
dropped, and stderr names each once (at most 64 names, each cut to its first 64 bytes, \
escaped).

Re-reads: a read of exactly the lines this session already received, of the same version, is \
answered with one short line (saying so, and that asking again returns the text); the next \
identical read, any change of the file and any other window get the text. --no-dedup-reads \
sends the text every time (for a client that drops old tool results from the model's context); \
--dedup-reads is the default, kept for old command lines. A daemon without it (an older \
filectxd) gets a note on stderr and the session runs without it.

--max-output CHARS: clients cut a longer tool result out of the middle (Codex keeps 10000 bytes \
of its JSON unless tool_output_token_limit is raised: then 4 bytes a token; Gemini CLI 40000 \
characters), so read, glob and grep answers are sized to fit, ending with filectx's own footer \
(e.g. Use offset=N to continue) instead of a hole: CHARS less 5 % for what the client adds (15 \
% for Codex, whose count includes the JSON escapes). Without it, a client named like Codex or \
Gemini CLI (clientInfo.name) gets its own default, and others the daemon's budget (51200 bytes).

notifications/cancelled cancels the call at the daemon too ($/cancelRequest): a call still waiting for its turn never runs, and no answer is sent. A tools/call with _meta.progressToken that waits more than a second (a write gate may be reviewing the change) gets notifications/progress every 3 s until it is answered.

--merge-stale-edits: an edit whose file changed since the session read it (another program, \
an editor, a formatter) is applied anyway when its old_string matches as many times as it did \
in the version read and no changed line is in or next to a matched place; the answer says so \
and shows the change, which then counts as read. Any other stale edit is refused as without \
it (the change shown); write is never merged. It trades a refusal and a retry for a check by \
lines only: a change elsewhere that the edit depends on in meaning (a rename, a moved \
definition) is not caught, only shown in the answer. Off by default.

If the daemon connection is lost, the server keeps running: every tool call is answered with \
an isError result saying so (restart the MCP server), and stderr says why.

Exit codes:
  0  stdin ended (the MCP client closed it) and the session was closed
  1  a local failure (e.g. a --root that is not a folder, stdin unreadable)
  2  usage error
  3  the daemon is not reachable at start-up, or the connection to it was lost while serving
  4  the daemon refused the session (e.g. a root it cannot use): the client's initialize is
     answered with its error, then the server stops
  5  the socket was refused: another user may control it (see `filectx --help`, Security)

Examples:
  claude mcp add filectx -- filectx mcp --root /path/to/project
  codex: in ~/.codex/config.toml,
    [mcp_servers.filectx]
    command = \"filectx\"
    args = [\"mcp\", \"--root\", \"/path/to/project\"]
    default_tools_approval_mode = \"approve\"";

/// Help of `gate`, after its one-line summary.
pub(crate) const GATE_LONG_ABOUT: &str = "\
Review agents' writes and edits in some folders before they land: each is shown as a diff and \
waits for allow or deny (gate/register, then gate/writeIntent)

`filectx gate` registers a write gate for the FOLDERs (default: the current folder). From then \
on, before any session's write or edit of a file under them lands, the daemon asks the gate. \
Each intent is shown with the agent's name, its session (and owner), the path and the change as \
a diff (coloured on a terminal, unless NO_COLOR is set), and waits for an answer: y allows it, n \
denies it, and a reason typed after the n (or on the next line) is passed to the agent. Intents \
that arrive meanwhile are queued and shown in order. An intent the agent cancels is announced as \
withdrawn and skipped; one left undecided for --timeout seconds (at most 600) is settled by the \
daemon as --on-timeout says (deny by default), and the gate says so.

What an agent chose (its name, file names, the lines it writes) is shown with the characters a \
terminal would act on as visible escapes (\\r, \\x1b, \\u{202e}, ...); a diff line that held any \
is marked with a ! before it. Only the daemon's user can register a gate: it reads the daemon's \
gate token from <socket>.gate-token, which the daemon writes at start.

--allow-create, --deny GLOB and --auto-allow GLOB settle routine intents without asking (a line \
says which rule did). --deny is checked first, then --auto-allow, then --allow-create. A GLOB \
without / matches the file name (*.lock), one starting with / the absolute path, any other the \
path relative to the gated folder (src/**/*.rs); * and ? stay within one folder, ** spans folders.

Ctrl-C, SIGTERM or the end of stdin (Ctrl-D) unregisters the gate and exits 0.";

/// The end of `gate --help`: the --json protocol, exit codes and examples.
pub(crate) const GATE_AFTER_HELP: &str = "\
--json: for programs. Each line on stdout is one JSON object; each line on stdin one decision.
  ready      {\"type\":\"ready\",\"gateId\":G,\"paths\":[FOLDER,...]}
             once registered
  intent     {\"type\":\"intent\",\"gateId\":G,\"intentId\":I,\"sessionId\":S,\"clientName\":N,
              \"owner\":O,\"path\":P,\"operation\":\"create\"|\"update\"|\"edit\",\"diff\":D,
              \"oldVersion\":V,\"newVersion\":V,\"bytes\":B}
             to decide; clientName, owner and oldVersion only when known; diff is a unified
             diff, or \"too large\", \"not text\" or \"hidden\" (this gate may not read the
             file); \"links\":L when the file has several hard links (its path may lie outside
             the gated folders); other fields the daemon sends are passed on as they came
  withdrawn  {\"type\":\"withdrawn\",\"intentId\":I,\"path\":P,\"reason\":R}
             do not decide it: R is \"cancelled\" (the agent cancelled it; nothing is
             written) or \"timeout\" (the daemon settled it as --on-timeout says)
  auto       {\"type\":\"auto\",\"intentId\":I,\"path\":P,\"operation\":OP,\"allow\":A,
              \"reason\":R,\"rule\":RULE}
             a rule decided it (reason only for a denial); nothing to answer
  decision   {\"intentId\":I,\"allow\":true|false,\"reason\":\"...\"}
             on stdin; reason optional
A decision line that is not valid, or names no undecided intent, is reported on stderr and \
skipped. A decision after the timeout is ignored by the daemon. The lines are JSON as it is, with \
control and bidirectional characters inside strings written as \\u escapes: escape what you show.

Exit codes:
  0  stopped by Ctrl-C, SIGTERM or the end of stdin; the gate was unregistered
  1  a local failure (e.g. a FOLDER that is not a folder, stdin unreadable)
  2  usage error (e.g. an invalid GLOB)
  3  the daemon is not reachable, or the connection to it was lost
  4  the daemon refused: it has no gate feature (an older filectxd), a FOLDER lies outside the
     session's roots, or no gate token could be read next to the socket (the daemon's log says why)
  5  the socket was refused: another user may control it (see `filectx --help`, Security)

Examples:
  filectx gate                                   review every change in the current folder
  filectx gate ~/src/app --allow-create --deny '*.lock' --auto-allow 'docs/**'
  filectx gate --timeout 120 --on-timeout allow  take your time; silence means yes
  filectx --json gate ~/src/app                  run by a program, which reads its stdout and
                                                 writes decisions to its stdin";

/// Help of `history`, after its one-line summary.
pub(crate) const HISTORY_LONG_ABOUT: &str = "\
List the changes made to files, newest first, one line each with its diff stat: every agent's \
writes, edits and undos through the daemon, and outside changes to files agents had read \
(journal/list)

Columns: ENTRY (the number diff and undo take), WHEN (how long ago), WHAT (create, write, edit, \
delete, restore, outside), PATH (relative to the current folder when inside it), CHANGE (lines \
added and removed; ? when unknown, e.g. not text; \"not restorable\" when the content before it \
was over the daemon's journal_max_file_bytes and was not kept) and BY (the agent's name, /owner \
when one was named, and its session; outside for a change made by a shell, an editor or any \
other program, seen by the daemon's watcher in a file some session had read).

Only changes to files under this command's roots (the current folder, or --root) are listed, \
whoever made them: cd into the project, or give --root. --json prints {\"entries\": [...], \
\"more\": bool}, each entry as journal/list gives it (times in milliseconds since the epoch).";

/// Help of `undo`, after its one-line summary.
pub(crate) const UNDO_LONG_ABOUT: &str = "\
Put files back as they were before a change: one entry, a file's last change, or every change of \
a session, newest first (journal/restore)

An entry is undone only if its file is still as the entry left it: if anyone changed the file \
since, nothing is written, the command prints what changed and exits 4 (--force overwrites that \
change). Undoing a creation removes the file; undoing a removal puts it back. Each undo is a \
change of its own, journaled like any other: its line says the entry that undoes it (undo an \
undo to redo).

With several entries, or --session, the entries are undone one by one, newest first for \
--session, each line printed as it lands; the first one that cannot be undone (changed since, \
not restorable, denied) stops the command, which says which and how far it got, and changes \
nothing after it (exit 4).

An undo is a write like any other: it needs the file inside the roots, passes the daemon's deny \
rules and any write gate (`filectx gate` sees it), and agents that had read the file are told \
it changed.";

/// The end of `history --help`, `diff --help` and `undo --help`: where the journal lives, what
/// it keeps, and examples.
pub(crate) const JOURNAL_AFTER_HELP: &str = "\
The journal: the daemon records each change before it lands, with the content the file had \
before (stored once per distinct content), in $XDG_STATE_HOME/filectx/journal (else \
~/.local/state/filectx/journal), readable by you only. It keeps the last 7 days and at most \
1 GiB (journal_max_age, journal_max_bytes; oldest first out) and survives daemon restarts. A \
file over 16 MiB (journal_max_file_bytes) is listed without its content and cannot be undone. \
journal = false (or filectxd --no-journal) turns it off; then these commands exit 4 saying so. \
See `filectxd --help`.

Examples:
  filectx history                      the last 50 changes under the current folder
  filectx history src/lib.rs --since 1h
  filectx history --session 4242-7     one agent's changes (BY shows the session)
  filectx diff 57                      what entry 57 changed
  filectx undo 57                      put the file back as it was before entry 57
  filectx undo --last src/lib.rs       undo the newest change to src/lib.rs, whoever made it
  filectx undo --session 4242-7        undo all that agent did here, newest first

Exit codes: 0 done; 2 usage error; 3 the daemon is not reachable; 4 the daemon refused (no such \
entry, changed since, not restorable, journal off, ...): the message says which.";

/// Help of `--socket`: where the path comes from, and what it resolves to here and now.
pub(crate) fn socket_help() -> String {
    format!(
        "Socket of the daemon [default: ${env} when set and non-empty, else \
         $XDG_RUNTIME_DIR/filectx.sock, else /tmp/filectx-$UID/filectx.sock; here: {here}]",
        env = filectx_protocol::socket::SOCKET_ENV,
        here = filectx_client::socket_path(None).display(),
    )
}

/// `filectx service --help`: what install writes, what it refuses, and lingering.
pub(crate) const SERVICE_LONG_ABOUT: &str = "\
Run the daemon as a systemd user service: systemd listens on $XDG_RUNTIME_DIR/filectx.sock and
starts filectxd on the first connection; the daemon exits after 10 idle minutes.

install writes filectxd.socket and filectxd.service (the units of the source's systemd/ folder,
built into this binary) into $XDG_CONFIG_HOME/systemd/user (~/.config/systemd/user), with
ExecStart the filectxd beside this filectx (or FILECTX_DAEMON) and PATH yours (without npx's,
uv's and temp folders, with ~/.local/bin, npm's global bin and ~/.cargo/bin added), for the
language servers the daemon starts; then `systemctl --user daemon-reload` and `systemctl --user
enable --now filectxd.socket`. It refuses a filectxd that will not last: in npx's or uv's cache
(npx -y, uvx) or a temp folder; install filectx to stay first (uv tool install filectx, pip
install filectx, npm install -g @filectx/cli, cargo install). Run it again after an upgrade or
a PATH change: it rewrites the units when they differ. Without lingering (loginctl
enable-linger USER) systemd stops the service when you log out; install says which it is.

uninstall stops and disables both units and removes their files; status shows them, their
filectxd and what systemctl says of them. See docs/service.md.";

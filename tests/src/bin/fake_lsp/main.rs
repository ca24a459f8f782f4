//! `fake-lsp`: a scripted language server for the tests, doing on demand what real servers can't
//! be made to do (publish late, crash, never answer, flood, send control bytes or 10 MB frames),
//! and standing in for servers CI cannot install (rust-analyzer, gopls).
//!
//! # Protocol
//! Standard LSP over stdin/stdout: `Content-Length` framing, JSON-RPC 2.0.
//! - `initialize` is answered with `{capabilities: {textDocumentSync: {openClose: true, change: 1
//!   (full), save: {includeText: false}}, diagnosticProvider: {interFileDependencies: true,
//!   workspaceDiagnostics: false} (only with `--pull`)}, serverInfo: {name, version}}`. The
//!   workspace root (for made-up URIs, below) is `workspaceFolders[0].uri`, else `rootUri`, else
//!   `file:///fake-lsp-root`.
//! - Requests before `initialize` was answered get -32002, after `shutdown` -32600; `shutdown`
//!   answers null; `textDocument/diagnostic` is answered with `--pull` only; any other request
//!   gets -32601. Notifications handled: `initialized`, `textDocument/didOpen|didChange|didSave|
//!   didClose`, `workspace/didChangeWatchedFiles` (only logged), `exit`; others are ignored, as
//!   are the client's answers to our requests (they are logged). A frame that is not JSON gets a
//!   -32700 error answer (id null).
//! - `exit` ends the process with code 0 after `shutdown`, 1 without it (as the LSP says); the
//!   end of stdin ends it with 0.
//! - A client breaking the protocol (a didChange with a `range` although sync is full, a version
//!   that does not go up, didOpen of an open document, didChange/didSave/didClose of one not
//!   open) is reported on stderr and in the log as `{"event":"violation","detail":TEXT}`; the
//!   server goes on (a didChange with a range still takes its `text` as the whole document).
//!
//! # Diagnostics
//! Computed over all open documents from their text (never from disk):
//! - A line holding `ERROR[CODE]: MESSAGE` or `ERROR: MESSAGE` (CODE not empty) gives an error (severity 1),
//!   `WARN[CODE]: MESSAGE` or `WARN: MESSAGE` a warning (severity 2): source `"fake"`, `code`
//!   CODE when given (no `code` key otherwise), message the rest of the line after the colon,
//!   trimmed; range from the marker's column to the end of the line (without its line break).
//!   Columns count UTF-16 units, as LSP says; lines end at `\n`, `\r\n` or `\r`. One such
//!   diagnostic a line at most: the leftmost well-formed marker.
//! - Cross-file: `DEF NAME` in a line defines NAME; `USE NAME` in a line of any open document
//!   gives an error, code `"E-USE"`, message `unknown name 'NAME'`, from `USE` to the end of the
//!   line, when no open document defines NAME. NAME is the run of non-blank characters after
//!   the blanks that follow the keyword; the keyword must not follow a letter, digit or `_`. One
//!   DEF and one USE a line at most (the leftmost); a line may give both a marker diagnostic and
//!   a USE one. A document's diagnostics are in line order.
//!
//! When: after every didOpen and didChange (with `--on-save`: after every didSave only) and
//! after a didClose. Then, unless `--pull`, `textDocument/publishDiagnostics {uri, version,
//! diagnostics}` goes for the opened, changed or saved document first (always, even when empty),
//! then for every other open document whose diagnostics changed since the last check, in URI
//! order; version is that document's current version. A closed document whose last diagnostics were not empty gets one
//! empty publish without a version, as pyright does.
//!
//! # Flags (all combinable)
//! - `--name NAME`: `serverInfo.name` (default `fake-lsp`). `--stdio` is accepted and ignored.
//! - `--log FILE`: append one JSON line per message received (the message itself, compact), and
//!   the events `{"event":"start","pid":N,"ppid":N}` at start, `{"event":"grandchild","pid":N}`,
//!   `{"event":"violation","detail":TEXT}`, `{"event":"exit","code":N,"why":"exit"|"eof"|
//!   "crash"}` just before the process ends. Each line is one append write, but give two
//!   servers running at once two logs.
//! - `--late MS`: each publishDiagnostics (and, with `--pull`, each diagnostic answer) goes MS
//!   milliseconds after it was computed; other messages go at once (before a late publish).
//! - `--crash-at N`: the Nth didChange (counted from 1 over the process's life) ends the process
//!   with code 3 before it is applied. With `--crash-once FILE`: only when FILE does not exist,
//!   creating it first, so a restarted server goes on.
//! - `--no-init`: `initialize` is never answered (nor, then, any other request: -32002).
//! - `--flood N`: after each check, N `window/logMessage` notifications and N publishDiagnostics,
//!   each with one error, for made-up unopened files, new ones each time: even ones
//!   `ROOT/fake-lsp-flood/R-K.txt` (R counts the checks, K the message), odd ones
//!   `file:///fake-lsp-outside/R-K.txt`, outside any folder.
//! - `--control-bytes`: every diagnostic message (and flood log message) M is sent as
//!   `"\x1b[31m" + M + "\r\u{202E}\x07"` (ESC, CR, RIGHT-TO-LEFT OVERRIDE, BEL).
//! - `--huge BYTES`: on `initialized`, one publishDiagnostics for `ROOT/fake-lsp-huge.txt` with
//!   one error whose message is BYTES of `x`, then one `window/logMessage` whose frame body is
//!   BYTES long (longer when BYTES cannot hold the envelope).
//! - `--out-of-order`: after the publish of a changed document's version v, its previous set of
//!   diagnostics again, labelled with its previous version (v-1 when versions go up by one).
//! - `--versionless`: publishes carry no `version`.
//! - `--pull`: advertise `diagnosticProvider`, answer `textDocument/diagnostic` with `{kind:
//!   "full", items}` (the last check's diagnostics of that document, empty when it has none or
//!   is not open), and never push.
//! - `--on-save`: check (and publish) on didSave only, like rust-analyzer's `cargo check`;
//!   didOpen and didChange only update the text.
//! - `--grandchild`: at start, run itself again as `fake-lsp --sleeper` (stdin and stderr
//!   /dev/null, stdout a pipe it says "ready" on), a process in the server's process group that
//!   survives SIGTERM, SIGHUP, SIGINT and SIGQUIT, and the server's own end, and exits by itself
//!   after 10 minutes (so a failed test leaves nothing for long); its pid is logged once it is
//!   ready (its signal handlers are in place). `--grandchild-rss MB`: it holds MB of memory.
//! - `--rss MB`: allocate and touch MB mebibytes at start, kept until the end.
//! - `--register`: on `initialized`, send the client `client/registerCapability` (id 1: one
//!   registration `{id: "fake-watch", method: "workspace/didChangeWatchedFiles", registerOptions:
//!   {watchers: [{globPattern: "**/*"}]}}`) and `workspace/configuration` (id 2: items
//!   `[{section: "fake"}]`); the answers are logged with the other messages.
//! - `--garbage`: on `initialized`, write a frame whose body is not JSON (`Content-Length: 13`,
//!   body `{not json at}`) and a header block without `Content-Length` (`Content-Type: ...`, no
//!   body), then behave normally.
//! - `--partial MS`: as pyright does when its check of a file takes more than one slice of its
//!   time, after each check of a changed document: `window/workDoneProgress/create` (token
//!   `fake-check-N`, N counting the checks), `$/progress` `begin`, and a publish of that document's version with no
//!   diagnostics; MS milliseconds later the real publishes and `$/progress` `end`.
//! - `--deaf`: once `initialized`, read nothing more from stdin, alive (for ten minutes at most):
//!   what the client writes piles up.
//!
//! Bad flags end it with code 2 and a usage line on stderr.

mod args;
mod check;
mod frame;
mod log;
mod server;

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

/// How long the `--sleeper` grandchild lives at most.
const SLEEPER_LIFE: Duration = Duration::from_secs(600);

fn main() {
    let opts = match args::parse(std::env::args().skip(1)) {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("fake-lsp: {e}\n{}", args::USAGE);
            std::process::exit(2);
        }
    };
    if opts.sleeper {
        sleep_on(opts.rss_mb);
    }
    if let Some(path) = &opts.log
        && let Err(e) = log::open(path)
    {
        eprintln!("fake-lsp: cannot open the log {}: {e}", path.display());
        std::process::exit(2);
    }
    log::event(
        json!({"event": "start", "pid": std::process::id(), "ppid": std::os::unix::process::parent_id()}),
    );
    // Kept alive until the process ends (server::run never returns).
    let hog = touched(opts.rss_mb);
    std::hint::black_box(&hog);
    if opts.grandchild {
        spawn_sleeper(opts.grandchild_rss_mb);
    }
    server::run(opts);
}

/// MB mebibytes, every page written.
fn touched(mb: usize) -> Vec<u8> {
    let hog = vec![0x5a_u8; mb << 20];
    std::hint::black_box(hog)
}

/// Starts the `--sleeper` grandchild and logs its pid; it is never waited for: it is meant to
/// outlive this process unless its killer takes the whole tree.
#[allow(clippy::zombie_processes)]
fn spawn_sleeper(rss_mb: usize) {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("fake-lsp: cannot find itself to start the grandchild: {e}");
            std::process::exit(2);
        }
    };
    let spawned = Command::new(exe)
        .args(["--sleeper", "--rss", &rss_mb.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            eprintln!("fake-lsp: cannot start the grandchild: {e}");
            std::process::exit(2);
        }
    };
    // Its pid is told once it stands the polite signals: it says so with one line.
    let mut ready = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = BufReader::new(stdout).read_line(&mut ready);
    }
    if ready != "ready\n" {
        eprintln!("fake-lsp: the grandchild did not get ready");
        std::process::exit(2);
    }
    log::event(json!({"event": "grandchild", "pid": child.id()}));
}

/// The `--sleeper`: holds `rss_mb` of memory, survives the polite signals (a handler that does
/// nothing is installed for each), and ends after [`SLEEPER_LIFE`].
fn sleep_on(rss_mb: usize) -> ! {
    let hog = touched(rss_mb);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let code = match runtime {
        Ok(runtime) => runtime.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let kinds =
                [SignalKind::terminate(), SignalKind::hangup(), SignalKind::interrupt(), SignalKind::quit()];
            let mut handlers = Vec::new();
            for kind in kinds {
                match signal(kind) {
                    Ok(handler) => handlers.push(handler),
                    Err(_) => return 2,
                }
            }
            // Tell the server it is ready; then stdout is not used again.
            let mut stdout = std::io::stdout();
            if stdout.write_all(b"ready\n").and_then(|()| stdout.flush()).is_err() {
                return 2;
            }
            tokio::time::sleep(SLEEPER_LIFE).await;
            drop(handlers);
            0
        }),
        Err(_) => 2,
    };
    std::hint::black_box(&hog);
    std::process::exit(code);
}

//! Language servers through filectxd (issue 39): basedpyright on a generated Python project of
//! 200 modules and typescript-language-server (TypeScript 5) on 200 generated TypeScript files
//! (`lsp/project.rs`), run by the daemon as built-ins, against the same servers run the way an
//! agent's own client runs them (OpenCode: one server per agent, a plain LSP client,
//! `filectx_tests::lsp::LspClient`). Four rows, in one sitting:
//!
//! 1. Memory for 1, 2, 4 and 8 agents, each a session reading and editing three files of its
//!    own (a type error, then its fix, in each) at once: shared (one filectxd; the servers'
//!    process trees as `daemon/status` gives them, `languageServers[].rssBytes`) against one
//!    server per agent (each opening and changing its agent's files; the RSS of each server's
//!    process tree from `/proc`, added up). PSS (shared pages split among the processes mapping
//!    them) is printed beside, and one plain server that opened and changed all eight agents'
//!    files (what the server itself takes for them). Goal: 8 agents at most 1.2× the memory of
//!    1, shared.
//! 2. A warm edit's whole answer with its diagnostics (`tools/call` `edit`, the agent having
//!    read the file and one that imports it) against the server's own time for the same change,
//!    by a plain client using the rule the daemon accepts a result by: basedpyright's publish of
//!    the version sent; for typescript-language-server, its tsserver asked
//!    (`workspace/executeCommand` `typescript.tsserverRequest`, `syntacticDiagnosticsSync` and
//!    `semanticDiagnosticsSync`) after the `didChange`. Each change alternates between the two
//!    sides (never at once), a pause after each; p50 and p95 of the timed edits, after warm-up
//!    ones; beside, the server's time until it said its piece of both open files (its last
//!    publish; the importing file asked too). Goal: the daemon within 1.1× the server's time
//!    + 5 ms.
//! 3. A corpus of scripted edits per language with known expected diagnostics
//!    (`lsp/corpus.rs`): false clean, stale, false new and missed counted (goal: all 0), and
//!    the answers still running; then the work of row 1's eight agents (each breaks and fixes
//!    three modules of its own, all at once, on a fresh daemon) judged the same way, where an
//!    error of another agent's named as this edit's counts as unexpected.
//! 4. Characters diagnostics add to an edit's answer (from the line break before their first
//!    line): goal at most 40 when clean, at most 200 with one new error.
//!
//! `cargo build --release -p filectx-daemon && cargo bench -p filectx-tests --bench lsp` (about
//! 4 to 5 minutes on 2 cores; `FILECTX_FILECTXD_BIN` picks another daemon build). The servers are
//! those `tests/run` installs under `target/`
//! (`FILECTX_TEST_BASEDPYRIGHT`, `FILECTX_TEST_TSLS`, `FILECTX_TEST_TSSERVER` name others); a
//! language whose server is missing is skipped, and said so. `FILECTX_LSP_BENCH_ONLY=memory,
//! latency,corpus` runs some rows only, `FILECTX_LSP_BENCH_EDITS` sets the timed edits per
//! language (default 24), `FILECTX_LSP_BENCH_MODULES` grows the projects (200 at least), and
//! `FILECTX_LSP_BENCH_VERBOSE=1` prints each corpus answer. Prints numbers and checks the
//! answers; asserts no time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "lsp/corpus.rs"]
mod corpus;
#[path = "lsp/plain.rs"]
mod plain;
#[path = "lsp/project.rs"]
mod project;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use corpus::{Answer, Tally, Verdict};
use filectx_tests::lsp;
use filectx_tests::{Daemon, Raw, root_of, tool_ok};
use plain::{Plain, tree_memory};
use project::{Lang, stem};
use serde_json::{Value, json};

/// Agent counts of the memory row.
const AGENTS: [usize; 4] = [1, 2, 4, 8];
/// Files each agent of the memory row reads and edits.
const FILES_PER_AGENT: usize = 3;
/// Untimed edits before the timed ones.
const WARM_EDITS: usize = 4;
/// How long a cold server may take (Node starting, the project loaded, on 2 busy cores).
const COLD: Duration = Duration::from_secs(180);
/// How long a warm server's diagnostics may take before the plain client gives up.
const WARM: Duration = Duration::from_secs(30);
/// The pause after each timed change, so that neither side's server still works during the
/// other's (basedpyright goes on to the other open files after publishing the changed one).
const PAUSE: Duration = Duration::from_millis(400);

/// The installed servers.
struct Servers {
    basedpyright: Option<PathBuf>,
    /// The program, and TypeScript's `lib` folder.
    typescript: Option<(PathBuf, PathBuf)>,
}

impl Servers {
    fn langs(&self) -> Vec<Lang> {
        let mut out = Vec::new();
        if self.basedpyright.is_some() {
            out.push(Lang::Python);
        }
        if self.typescript.is_some() {
            out.push(Lang::TypeScript);
        }
        out
    }

    /// The daemon's `PATH`: the servers' folders first.
    fn path(&self) -> OsString {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(program) = &self.basedpyright {
            dirs.push(program.parent().unwrap().to_path_buf());
        }
        if let Some((program, _)) = &self.typescript {
            dirs.push(program.parent().unwrap().to_path_buf());
        }
        dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        std::env::join_paths(dirs).unwrap()
    }

    /// A plain client of `lang`'s server, initialized on `project` as the daemon initializes it.
    fn plain(&self, lang: Lang, project: &Path) -> Plain {
        let (program, options) = match lang {
            Lang::Python => (self.basedpyright.clone().unwrap(), Value::Null),
            Lang::TypeScript => {
                let (program, lib) = self.typescript.clone().unwrap();
                (program, json!({"tsserver": {"path": lib}}))
            }
        };
        Plain::start(lang, &program, &options, project)
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The `p`-th percentile of `samples` (nearest rank).
fn percentile(samples: &[Duration], p: usize) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// A daemon running the built-in servers, with both projects (`modules` modules each) in
/// `work/py` and `work/ts` of its root.
struct Lab {
    daemon: Daemon,
    work: PathBuf,
}

impl Lab {
    fn start(servers: &Servers, modules: usize) -> Lab {
        let daemon = Daemon::start_with_builtin_language_servers(&[], &servers.path());
        let work = root_of(&daemon).join("work");
        for lang in servers.langs() {
            project::write(lang, &work.join(dir_of(lang)), modules);
        }
        Lab { daemon, work }
    }

    fn project(&self, lang: Lang) -> PathBuf {
        self.work.join(dir_of(lang))
    }

    /// A session rooted at the work folder, as an agent's.
    fn session(&self) -> Raw {
        let raw = self.daemon.session_with(json!({
            "roots": [self.work],
            "tools": ["read", "write", "edit", "diagnostics"],
            "clientInfo": {"name": "lsp-bench"},
        }));
        // An edit waits up to 20 s for a server still starting.
        raw.stream.set_read_timeout(Some(COLD)).unwrap();
        raw
    }

    /// The servers as `daemon/status` gives them: (name, rssBytes, server pid).
    fn servers(&self) -> Vec<(String, u64, Option<u32>)> {
        let status = self.daemon.status();
        let servers = status["languageServers"].as_array().cloned().unwrap_or_default();
        servers
            .iter()
            .map(|s| {
                let pid = s["pid"].as_u64().and_then(|p| u32::try_from(p).ok());
                (s["name"].as_str().unwrap_or("?").to_owned(), s["rssBytes"].as_u64().unwrap_or(0), pid)
            })
            .collect()
    }

    /// Waits until the `diagnostics` tool answers for `path` (the server has it and has
    /// checked it): its answer.
    fn settled(&self, raw: &mut Raw, path: &Path) -> String {
        let deadline = Instant::now() + COLD;
        loop {
            let text = tool_ok(raw, "diagnostics", json!({"file_path": path}));
            if !text.contains("still running") || Instant::now() > deadline {
                return text;
            }
        }
    }
}

fn dir_of(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => "py",
        Lang::TypeScript => "ts",
    }
}

fn edit(raw: &mut Raw, path: &Path, old: &str, new: &str) -> (Duration, String) {
    let start = Instant::now();
    let text = tool_ok(raw, "edit", json!({"file_path": path, "old_string": old, "new_string": new}));
    (start.elapsed(), text)
}

/// The line an agent breaks and fixes in module `i`, and its broken form.
fn limit_line(lang: Lang, i: usize) -> (String, String) {
    match lang {
        Lang::Python => (format!("LIMIT_{i:03}: int = {i} * 7"), format!("LIMIT_{i:03}: int = \"{i}\"")),
        Lang::TypeScript => {
            (format!("LIMIT_{i:03}: number = {i} * 7;"), format!("LIMIT_{i:03}: number = \"{i}\";"))
        }
    }
}

/// An agent's work on a plain client: opens each of `files` (clean), then breaks and fixes
/// each one, checking the errors counted after each change.
fn open_break_and_fix(plain: &mut Plain, lang: Lang, project: &Path, files: &[usize]) {
    for &i in files {
        let opened = plain.open(&lang.path(project, &stem(i)), COLD);
        assert_eq!(opened, Some(0), "{}: module {i} opens clean", lang.server());
    }
    for &i in files {
        let path = lang.path(project, &stem(i));
        let text = std::fs::read_to_string(&path).unwrap();
        let (clean, broken) = limit_line(lang, i);
        let (_, _, errors) = plain.change(&path, &text.replace(&clean, &broken), COLD);
        assert_eq!(errors, Some(1), "{}: the broken module {i}", lang.server());
        let (_, _, errors) = plain.change(&path, &text, COLD);
        assert_eq!(errors, Some(0), "{}: the fixed module {i}", lang.server());
    }
}

/// The modules agent `a` edits in the memory row (disjoint between agents).
fn agent_modules(a: usize, modules: usize) -> Vec<usize> {
    (0..FILES_PER_AGENT).map(|k| (20 + a * 15 + k * 5) % modules).collect()
}

/// Memory by agent count: (agents, RSS, PSS).
type Sums = Vec<(usize, u64, u64)>;

/// Memory of one language's servers, shared and one per agent.
#[derive(Default)]
struct Memory {
    shared: Sums,
    own: Sums,
    /// Answers of the agents' edits in the shared runs: fresh and right, fresh and wrong,
    /// still running, else.
    answers: [usize; 4],
    /// Each answer not right: agents, module, expected new errors, the diagnostics' lines.
    wrong: Vec<String>,
    /// RSS of one server a plain client opened and changed all eight agents' files in.
    all_files: u64,
}

/// Row 1.
fn memory(servers: &Servers, modules: usize) -> HashMap<Lang, Memory> {
    let langs = servers.langs();
    let mut out: HashMap<Lang, Memory> = langs.iter().map(|l| (*l, Memory::default())).collect();
    for &n in &AGENTS {
        let start = Instant::now();
        let lab = Lab::start(servers, modules);
        let answers: Vec<([usize; 4], Vec<String>, Lang)> = std::thread::scope(|scope| {
            let lab = &lab;
            let langs = &langs;
            let agents: Vec<_> = (0..n)
                .map(|a| {
                    scope.spawn(move || {
                        let mut raw = lab.session();
                        let mut tally = Vec::new();
                        for &lang in langs {
                            let project = lab.project(lang);
                            let files = agent_modules(a, modules);
                            for &i in &files {
                                tool_ok(
                                    &mut raw,
                                    "read",
                                    json!({"file_path": lang.path(&project, &stem(i))}),
                                );
                            }
                            let mut kinds = [0; 4];
                            let mut wrong = Vec::new();
                            for &i in &files {
                                let path = lang.path(&project, &stem(i));
                                let (clean, broken) = limit_line(lang, i);
                                for (old, new, errors) in [(&clean, &broken, 1), (&broken, &clean, 0)] {
                                    let (_, text) = edit(&mut raw, &path, old, new);
                                    let answer = corpus::read(&text, lang.server());
                                    let kind = match &answer.verdict {
                                        Verdict::Fresh { new, others, .. }
                                            if new.len() == errors && others.is_empty() =>
                                        {
                                            0
                                        }
                                        Verdict::Fresh { .. } => 1,
                                        Verdict::Running => 2,
                                        _ => 3,
                                    };
                                    kinds[kind] += 1;
                                    if kind != 0 {
                                        let tail = &answer.text;
                                        wrong.push(format!(
                                            "{n} agents, agent {a}, {} ({old} → {new}): {errors} new expected, answered {tail:?}",
                                            stem(i)
                                        ));
                                    }
                                }
                            }
                            tally.push((kinds, wrong, lang));
                        }
                        tally
                    })
                })
                .collect();
            agents.into_iter().flat_map(|a| a.join().unwrap()).collect()
        });
        // The servers finish what the last changes started; rssBytes is measured every 2 s.
        std::thread::sleep(Duration::from_secs(5));
        let running = lab.servers();
        for &lang in &langs {
            let memory = out.get_mut(&lang).unwrap();
            let mine: Vec<_> = running.iter().filter(|(name, _, _)| name == lang.server()).collect();
            assert_eq!(mine.len(), 1, "one {} server for the project: {running:?}", lang.server());
            let rss: u64 = mine.iter().map(|(_, rss, _)| rss).sum();
            let pss: u64 = mine.iter().filter_map(|(_, _, pid)| pid.map(|p| tree_memory(p).1)).sum();
            memory.shared.push((n, rss, pss));
            for (kinds, wrong, l) in &answers {
                if *l == lang {
                    for (sum, k) in memory.answers.iter_mut().zip(kinds) {
                        *sum += k;
                    }
                    memory.wrong.extend(wrong.iter().cloned());
                }
            }
        }
        eprintln!("memory: {n} agent(s) through filectxd in {:.1} s", start.elapsed().as_secs_f64());
    }
    // One server per agent: the eight are started together, each doing its agent's work; the
    // first N of them are N agents' servers.
    let max = *AGENTS.iter().max().unwrap();
    for &lang in &langs {
        let start = Instant::now();
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().canonicalize().unwrap().join(dir_of(lang));
        project::write(lang, &project, modules);
        let clients: Vec<Plain> = std::thread::scope(|scope| {
            let project = &project;
            let handles: Vec<_> = (0..max)
                .map(|a| {
                    scope.spawn(move || {
                        let mut plain = servers.plain(lang, project);
                        open_break_and_fix(&mut plain, lang, project, &agent_modules(a, modules));
                        plain
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        std::thread::sleep(Duration::from_secs(3));
        let measured: Vec<(u64, u64)> = clients.iter().map(|c| tree_memory(c.pid())).collect();
        let memory = out.get_mut(&lang).unwrap();
        for &n in &AGENTS {
            let rss = measured[..n].iter().map(|m| m.0).sum();
            let pss = measured[..n].iter().map(|m| m.1).sum();
            memory.own.push((n, rss, pss));
        }
        drop(clients);
        // One plain client with every agent's files: what the server itself takes for them.
        let mut plain = servers.plain(lang, &project);
        let files: Vec<usize> = (0..max).flat_map(|a| agent_modules(a, modules)).collect();
        open_break_and_fix(&mut plain, lang, &project, &files);
        std::thread::sleep(Duration::from_secs(3));
        memory.all_files = tree_memory(plain.pid()).0;
        drop(plain);
        eprintln!(
            "memory: {max} {} servers, one per agent, in {:.1} s",
            lang.server(),
            start.elapsed().as_secs_f64()
        );
    }
    out
}

/// The changes of the timed edits, cycled: (old, new, errors after).
fn cycle(lang: Lang, i: usize) -> [(String, String, usize); 4] {
    let (clean, broken) = limit_line(lang, i);
    let (one, two) = ("(x + 1, label)".to_owned(), "(x + 2, label)".to_owned());
    [(one.clone(), two.clone(), 0), (two, one, 0), (clean.clone(), broken.clone(), 1), (broken, clean, 0)]
}

/// Row 2 for one language.
struct Latency {
    /// The daemon's answers to the timed edits.
    daemon: Vec<Duration>,
    /// The server's own time for the same changes (the changed file's diagnostics).
    server: Vec<Duration>,
    /// The server's time until it said its piece of every open file.
    server_all: Vec<Duration>,
    off: Vec<String>,
    added: corpus::Added,
    open_docs: usize,
}

/// The module of the timed edits, and the one importing it the agent reads too.
const TIMED: usize = 150;

fn latency(servers: &Servers, lab: &Lab, lang: Lang, modules: usize, edits: usize) -> Latency {
    let project = lab.project(lang);
    let (file, caller) = (lang.path(&project, &stem(TIMED)), lang.path(&project, &stem(TIMED + 1)));
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    tool_ok(&mut raw, "read", json!({"file_path": caller}));
    for path in [&file, &caller] {
        let said = lab.settled(&mut raw, path);
        assert!(said.starts_with("No errors in"), "{said}");
    }
    // The plain client's copy of the project.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().canonicalize().unwrap().join(dir_of(lang));
    project::write(lang, &copy, modules);
    let mut plain = servers.plain(lang, &copy);
    let (plain_file, plain_caller) = (lang.path(&copy, &stem(TIMED)), lang.path(&copy, &stem(TIMED + 1)));
    for path in [&plain_file, &plain_caller] {
        assert_eq!(plain.open(path, COLD), Some(0), "{} opens clean", path.display());
    }
    let mut text = std::fs::read_to_string(&plain_file).unwrap();
    let mut out = Latency {
        daemon: Vec::new(),
        server: Vec::new(),
        server_all: Vec::new(),
        off: Vec::new(),
        added: corpus::Added::default(),
        open_docs: 2,
    };
    let changes = cycle(lang, TIMED);
    for n in 0..WARM_EDITS + edits {
        let (old, new, errors) = &changes[n % changes.len()];
        text = text.replacen(old.as_str(), new, 1);
        let mut daemon_side = |out: &mut Latency| {
            let (took, answer) = edit(&mut raw, &file, old, new);
            assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "both sides change the same text");
            let read = corpus::read(&answer, lang.server());
            match &read.verdict {
                Verdict::Fresh { new, .. } if new.len() == *errors => {}
                other => out.off.push(format!("edit {n} ({old:?} → {new:?}): {other:?}")),
            }
            out.added.take(&read);
            if n >= WARM_EDITS {
                out.daemon.push(took);
            }
            std::thread::sleep(PAUSE);
        };
        let mut server_side = |out: &mut Latency| {
            let (sent, took, said) = plain.change(&plain_file, &text, WARM);
            assert_eq!(said, Some(*errors), "{}: the server's own answer to edit {n}", lang.server());
            // Until the server has said its piece of every open file: for basedpyright, its
            // last publish (of the importing file, checked again); for typescript, the
            // importing file asked of its tsserver too, as the daemon asks it.
            let all = match lang {
                Lang::Python => plain.drain(PAUSE).map_or(took, |last| last - sent).max(took),
                Lang::TypeScript => {
                    let caller = plain.errors(&plain_caller, 0, WARM);
                    assert_eq!(caller, Some(0), "the importing file stays clean");
                    let all = sent.elapsed();
                    plain.drain(PAUSE);
                    all
                }
            };
            if n >= WARM_EDITS {
                out.server.push(took);
                out.server_all.push(all);
            }
        };
        // Alternating which side goes first.
        if n % 2 == 0 {
            daemon_side(&mut out);
            server_side(&mut out);
        } else {
            server_side(&mut out);
            daemon_side(&mut out);
        }
    }
    out
}

/// Row 3 for one language, in a session that reads the corpus's two modules first.
fn corpus_run(lab: &Lab, lang: Lang, added: &mut corpus::Added) -> Tally {
    let project = lab.project(lang);
    let mut raw = lab.session();
    for m in ["m170", "m171"] {
        let path = lang.path(&project, m);
        tool_ok(&mut raw, "read", json!({"file_path": path}));
        let said = lab.settled(&mut raw, &path);
        assert!(said.starts_with("No errors in"), "{said}");
    }
    let mut tally = Tally::default();
    let mut known = corpus::Known::default();
    for step in corpus::steps(lang) {
        let path = lang.path(&project, step.file);
        let before = std::fs::read_to_string(&path).unwrap();
        assert_eq!(before.matches(step.old).count(), 1, "{:?}: its old text once", step.what);
        let after = before.replacen(step.old, step.new, 1);
        let (_, text) = edit(&mut raw, &path, step.old, step.new);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), after, "{:?} landed", step.what);
        let answer: Answer = corpus::read(&text, lang.server());
        added.take(&answer);
        corpus::judge(lang, &step, &after, &answer, &mut known, &mut tally);
        if std::env::var_os("FILECTX_LSP_BENCH_VERBOSE").is_some() {
            eprintln!("{} {:?}: {:?}", lang.server(), step.what, answer.text);
        }
    }
    tally
}

/// Prints row 1.
fn print_memory(langs: &[Lang], memory: &HashMap<Lang, Memory>) {
    println!(
        "1. Memory of the servers (process trees, after each agent read 3 files and broke and fixed each)"
    );
    println!(
        "{:<14} {:>7} {:>22} {:>22} {:>14}",
        "server", "agents", "shared RSS (PSS) MiB", "own RSS (PSS) MiB", "shared ÷ 1"
    );
    for &lang in langs {
        let m = &memory[&lang];
        let one = m.shared.first().map_or(1, |s| s.1).max(1);
        for ((n, rss, pss), (_, own_rss, own_pss)) in m.shared.iter().zip(&m.own) {
            println!(
                "{:<14} {:>7} {:>14.0} ({:>5.0}) {:>14.0} ({:>5.0}) {:>13.2}×",
                lang.server(),
                n,
                mib(*rss),
                mib(*pss),
                mib(*own_rss),
                mib(*own_pss),
                *rss as f64 / one as f64
            );
        }
        println!(
            "{:<14} one server with all {} agents' files, opened and changed by a plain client: {:.0} MiB",
            lang.server(),
            AGENTS[AGENTS.len() - 1],
            mib(m.all_files)
        );
        println!(
            "{:<14} the agents' edits through filectxd: {} answered right, {} wrong, {} still running, {} else",
            lang.server(),
            m.answers[0],
            m.answers[1],
            m.answers[2],
            m.answers[3]
        );
        for wrong in m.wrong.iter().take(3) {
            println!("{:<14}   {wrong}", "");
        }
        if m.wrong.len() > 3 {
            println!("{:<14}   … and {} more (row 3 judges the same work)", "", m.wrong.len() - 3);
        }
    }
    let total = |pick: &dyn Fn(&Memory) -> &Sums, n: usize| -> u64 {
        langs.iter().map(|l| pick(&memory[l]).iter().find(|s| s.0 == n).map_or(0, |s| s.1)).sum()
    };
    let (one, eight) = (total(&|m| &m.shared, 1), total(&|m| &m.shared, 8));
    let own_eight = total(&|m| &m.own, 8);
    println!(
        "both servers: shared 1 agent {:.0} MiB, 8 agents {:.0} MiB ({:.2}×; goal ≤ 1.2×: {}); one per agent, 8 agents {:.0} MiB ({:.2}× shared)",
        mib(one),
        mib(eight),
        eight as f64 / one.max(1) as f64,
        if eight as f64 <= 1.2 * one as f64 { "met" } else { "missed" },
        mib(own_eight),
        own_eight as f64 / eight.max(1) as f64,
    );
    println!();
}

/// Prints row 2.
fn print_latency(latencies: &[(Lang, Latency)], edits: usize) {
    println!(
        "2. A warm edit's answer with diagnostics against the server's own time (ms; {edits} timed edits, {WARM_EDITS} warm-up)"
    );
    println!(
        "{:<14} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "server", "daemon p50", "server p50", "daemon p95", "server p95", "goal p50", "goal p95"
    );
    for (lang, l) in latencies {
        let (dp50, sp50, dp95, sp95) = (
            percentile(&l.daemon, 50),
            percentile(&l.server, 50),
            percentile(&l.daemon, 95),
            percentile(&l.server, 95),
        );
        let goal = |d: Duration, s: Duration| {
            let bound = ms(s) * 1.1 + 5.0;
            format!("{} ≤{:.0}", if ms(d) <= bound { "met" } else { "missed" }, bound)
        };
        println!(
            "{:<14} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>12} {:>12}",
            lang.server(),
            ms(dp50),
            ms(sp50),
            ms(dp95),
            ms(sp95),
            goal(dp50, sp50),
            goal(dp95, sp95)
        );
        println!(
            "{:<14} {} documents open; the server until it said its piece of both: p50 {:.1}, p95 {:.1}; daemon answers off: {}",
            "",
            l.open_docs,
            ms(percentile(&l.server_all, 50)),
            ms(percentile(&l.server_all, 95)),
            l.off.len()
        );
        for off in &l.off {
            println!("{:<14}   {off}", "");
        }
    }
    println!();
}

/// Prints row 3.
fn print_corpus(tallies: &[(String, Tally)]) {
    println!("3. Corpus of scripted edits");
    println!(
        "{:<26} {:>6} {:>12} {:>6} {:>10} {:>7} {:>14} {:>12} {:>11}",
        "server",
        "edits",
        "false clean",
        "stale",
        "false new",
        "missed",
        "still running",
        "unavailable",
        "unexpected"
    );
    let mut all = Tally::default();
    for (label, t) in tallies {
        println!(
            "{:<26} {:>6} {:>12} {:>6} {:>10} {:>7} {:>14} {:>12} {:>11}",
            label,
            t.edits,
            t.false_clean,
            t.stale,
            t.false_new,
            t.missed,
            t.running,
            t.unavailable,
            t.unexpected
        );
        all.add(t);
    }
    for note in all.notes.iter().filter(|n| n.counted) {
        println!("  {}", note.text);
    }
    // Those only naming other sessions' errors as this edit's (or saying a count of remaining
    // errors other than expected): a few, then how many.
    let rest: Vec<_> = all.notes.iter().filter(|n| !n.counted).collect();
    for note in rest.iter().take(3) {
        println!("  {}", note.text);
    }
    if rest.len() > 3 {
        println!("  … and {} more answers of that kind (unexpected only)", rest.len() - 3);
    }
    let zero = all.false_clean + all.stale + all.false_new + all.missed == 0;
    println!(
        "all: {} edits, false clean {}, stale {}, false new {}, missed {} (goal all 0: {}); still running {}",
        all.edits,
        all.false_clean,
        all.stale,
        all.false_new,
        all.missed,
        if zero { "met" } else { "missed" },
        all.running
    );
    println!();
}

/// Prints row 4.
fn print_added(added: &corpus::Added) {
    let max = |v: &[usize]| v.iter().max().copied().unwrap_or(0);
    let (clean, one) = (max(&added.clean), max(&added.one));
    println!("4. Characters diagnostics add to an edit's answer (most of each kind)");
    println!(
        "clean: {clean} ({} answers; goal ≤ 40: {}); with errors remaining or other files broken: {} ({} answers)",
        added.clean.len(),
        if clean <= 40 { "met" } else { "missed" },
        max(&added.clean_more),
        added.clean_more.len()
    );
    println!(
        "one new error: {one} ({} answers; goal ≤ 200: {}); with errors remaining or other files broken: {} ({} answers)",
        added.one.len(),
        if one <= 200 { "met" } else { "missed" },
        max(&added.one_more),
        added.one_more.len()
    );
}

/// Sessions of the corpus's concurrent part, and the first of their modules (three each).
const CONCURRENT: usize = 8;
const CONCURRENT_FIRST: usize = 176;

/// Row 3's concurrent part, the agents' work of row 1 judged as the corpus is: a fresh daemon,
/// [`CONCURRENT`] sessions at once, each reading three modules of its own in each language and
/// then (as agents do, while the servers are still starting and checking what was opened)
/// breaking and fixing each in turn (a type error). Another session's error named as this
/// edit's counts as unexpected. The tallies by language.
fn concurrent_run(servers: &Servers, modules: usize, added: &mut corpus::Added) -> Vec<(Lang, Tally)> {
    let lab = Lab::start(servers, modules);
    let langs = servers.langs();
    let barrier = std::sync::Barrier::new(CONCURRENT);
    let results: Vec<Vec<(Lang, Tally, corpus::Added)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CONCURRENT)
            .map(|k| {
                let (lab, langs, barrier) = (&lab, &langs, &barrier);
                scope.spawn(move || {
                    let modules: Vec<usize> = (0..3).map(|j| CONCURRENT_FIRST + 3 * k + j).collect();
                    let mut raw = lab.session();
                    for &lang in langs {
                        for &i in &modules {
                            let path = lang.path(&lab.project(lang), &stem(i));
                            tool_ok(&mut raw, "read", json!({"file_path": path}));
                        }
                    }
                    let what = [
                        format!("{CONCURRENT} at once: a type error, as the others edit theirs"),
                        format!("{CONCURRENT} at once: its fix, as the others edit theirs"),
                    ];
                    barrier.wait();
                    let mut out = Vec::new();
                    for &lang in langs {
                        let (mut tally, mut added) = (Tally::default(), corpus::Added::default());
                        for &i in &modules {
                            let (module, path) = (stem(i), lang.path(&lab.project(lang), &stem(i)));
                            let (clean, broken) = limit_line(lang, i);
                            let broken_at = [broken.as_str()];
                            let step = |what, old, new, errors| corpus::Step {
                                what,
                                file: &module,
                                old,
                                new,
                                new_here: errors,
                                errors_here: errors,
                                breaks: &[],
                                mends: &[],
                            };
                            let steps = [
                                step(&what[0], &clean, &broken, &broken_at[..]),
                                step(&what[1], &broken, &clean, &[]),
                            ];
                            let mut known = corpus::Known::default();
                            for step in &steps {
                                let after =
                                    std::fs::read_to_string(&path).unwrap().replacen(step.old, step.new, 1);
                                let (_, text) = edit(&mut raw, &path, step.old, step.new);
                                let answer = corpus::read(&text, lang.server());
                                added.take(&answer);
                                corpus::judge(lang, step, &after, &answer, &mut known, &mut tally);
                            }
                        }
                        out.push((lang, tally, added));
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    langs
        .iter()
        .map(|&lang| {
            let mut tally = Tally::default();
            for (l, t, a) in results.iter().flatten() {
                if *l == lang {
                    tally.add(t);
                    added.add(a);
                }
            }
            (lang, tally)
        })
        .collect()
}

fn version(program: &Path, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "?".to_owned())
}

fn main() {
    let env =
        |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let modules = env("FILECTX_LSP_BENCH_MODULES", 200).max(CONCURRENT_FIRST + 3 * CONCURRENT);
    let edits = env("FILECTX_LSP_BENCH_EDITS", 24);
    let only = std::env::var("FILECTX_LSP_BENCH_ONLY").unwrap_or_else(|_| "memory,latency,corpus".to_owned());
    let servers =
        Servers { basedpyright: lsp::basedpyright(), typescript: lsp::typescript_language_server() };
    let langs = servers.langs();
    if langs.is_empty() {
        println!(
            "lsp bench skipped: neither basedpyright nor typescript-language-server is installed \
             (tests/run installs both under target/; see the lines above)"
        );
        return;
    }
    let daemon = std::env::var_os("FILECTX_FILECTXD_BIN").map_or_else(
        || std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("filectxd"),
        PathBuf::from,
    );
    if !daemon.exists() {
        println!(
            "lsp bench: {} is missing; build it first: cargo build --release -p filectx-daemon",
            daemon.display()
        );
        std::process::exit(1);
    }
    println!("daemon: {}", daemon.display());
    if let Some(program) = &servers.basedpyright {
        let cli = program.with_file_name("basedpyright");
        println!(
            "basedpyright: {} ({})",
            program.display(),
            version(&cli, &["--version"]).replace('\n', ", ")
        );
    }
    if let Some((program, lib)) = &servers.typescript {
        let package: Value = std::fs::read_to_string(lib.join("../package.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        println!(
            "typescript-language-server: {} ({}), TypeScript {}",
            program.display(),
            version(program, &["--version"]),
            package["version"].as_str().unwrap_or("?")
        );
    }
    println!("projects: {modules} modules each; {} timed edits per language", edits);
    std::io::stdout().flush().unwrap();
    let started = Instant::now();

    let memory = only.contains("memory").then(|| memory(&servers, modules));
    let (mut latencies, mut tallies) = (Vec::new(), Vec::new());
    let mut added = corpus::Added::default();
    if only.contains("latency") || only.contains("corpus") {
        let lab = Lab::start(&servers, modules);
        for &lang in &langs {
            if only.contains("latency") {
                let l = latency(&servers, &lab, lang, modules, edits);
                added.add(&l.added);
                latencies.push((lang, l));
            }
            if only.contains("corpus") {
                tallies.push((lang.server().to_owned(), corpus_run(&lab, lang, &mut added)));
            }
        }
    }
    if only.contains("corpus") {
        for (lang, tally) in concurrent_run(&servers, modules, &mut added) {
            tallies.push((format!("{}, {CONCURRENT} at once", lang.server()), tally));
        }
    }

    println!();
    if let Some(memory) = &memory {
        print_memory(&langs, memory);
    }
    if !latencies.is_empty() {
        print_latency(&latencies, edits);
    }
    if !tallies.is_empty() {
        print_corpus(&tallies);
    }
    if !added.clean.is_empty() || !added.one.is_empty() {
        print_added(&added);
    }
    println!("bench time: {:.0} s", started.elapsed().as_secs_f64());
}

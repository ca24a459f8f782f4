//! `glob` and `grep` at scale against ripgrep (`rg`, run as a process): a generated tree of
//! 100,000 code-like files and about 3 GB (deterministic; folders, a `.gitignore` with ignored
//! folders and files beside the listed ones), and optionally a real tree of the machine
//! (`FILECTX_SCALE_TREES=/usr/lib`, colon-separated). For each tree, in one sitting: the first
//! and the repeated glob `**/*.py`, grep -l of a rare name (in one file) and of a common one
//! (in a few percent of the files), each answer checked equal to rg's (the same files), with
//! medians of the repeated runs alternating with rg; the searches after an agent's write and
//! after a file it creates comes and goes (the kept listing takes them in); the first glob and
//! grep of fresh daemons, medians alternating with rg; then the daemon's RSS and the bytes its
//! search cache keeps per listed file (`daemon/status`).
//!
//! `cargo build --release -p filectx-daemon && cargo bench -p filectx-tests --bench scale`.
//! The tree is written once to `target/scale-tree` (`FILECTX_SCALE_DIR` elsewhere; it is
//! rebuilt when its stamp names other parameters); `FILECTX_SCALE_FILES` and
//! `FILECTX_SCALE_MEAN_BYTES` shrink it for a quick look. The page cache is warmed by rg first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use filectx_tests::versus::{Rng, median, paths_of, time_rg, time_tool};
use filectx_tests::{Daemon, Raw};
use serde_json::{Value, json};

#[path = "scale/restart.rs"]
mod restart;

/// Timed runs of each repeated search, per side.
const RUNS: usize = 5;
/// The rare name: written into exactly one file of the generated tree.
const RARE: &str = "frobnicate_quux_seventy";
/// The common pattern of the generated tree (in about 6 % of its files).
const COMMON: &str = "def __init__";

const WORDS: &[&str] = &[
    "self", "value", "result", "index", "buffer", "count", "name", "path", "config", "state", "error",
    "handle", "request", "response", "session", "cache", "entry", "items", "total", "offset", "limit",
    "reader", "writer", "token", "parser", "node", "tree", "child", "parent", "key", "data", "size", "start",
    "end", "line", "file", "root", "version", "event", "queue", "worker", "task", "stream",
];

/// One code-like line in the style of `ext`, from `rng`.
fn line(rng: &mut Rng, ext: &str, out: &mut String) {
    let w = |rng: &mut Rng| WORDS[rng.below(WORDS.len() as u64) as usize];
    let indent = "    ".repeat(rng.below(4) as usize);
    out.push_str(&indent);
    let (a, b, c) = (w(rng), w(rng), w(rng));
    let n = rng.below(10_000);
    match (ext, rng.below(6)) {
        ("py", 0) => out.push_str(&format!("def {a}_{b}(self, {c}={n}):")),
        ("py", 1) => out.push_str(&format!("{a} = self.{b}.get(\"{c}\", {n})")),
        ("py", 2) => out.push_str(&format!("if {a} is not None and {b} > {n}:")),
        ("py", 3) => out.push_str(&format!("return [{a} for {a} in {b}.{c}()]")),
        ("py", _) => out.push_str(&format!("# {a} {b} {c} {n}")),
        ("rs", 0) => out.push_str(&format!("pub fn {a}_{b}(&mut self, {c}: usize) -> Result<u64, Error> {{")),
        ("rs", 1) => out.push_str(&format!("let {a} = self.{b}.{c}({n})?;")),
        ("rs", 2) => out.push_str(&format!("if {a}.len() > {n} {{ return Err(Error::{b}); }}")),
        ("rs", 3) => out.push_str(&format!("// {a} {b} {c}: {n}")),
        ("rs", _) => out.push_str(&format!("{a}.{b}_{c} += {n};")),
        (_, 0) => out.push_str(&format!("export function {a}{b}({c}: number): string {{")),
        (_, 1) => out.push_str(&format!("const {a} = await this.{b}.{c}({n});")),
        (_, 2) => out.push_str(&format!("if ({a} === undefined) throw new Error(\"{b} {c}\");")),
        (_, _) => out.push_str(&format!("// {a} {b} {c} {n}")),
    }
    out.push('\n');
}

/// The generated tree's parameters.
#[derive(Debug, Clone, Copy)]
struct Shape {
    files: u64,
    mean_bytes: u64,
}

/// Writes the tree under `dir` (100 files a folder, 20 folders a parent): the listed files,
/// plus per top folder an ignored `build/` folder and ignored `*.log` files. Returns the path
/// of the one file holding [`RARE`].
fn generate(dir: &Path, shape: Shape) -> PathBuf {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(".gitignore"), "build/\n*.log\n").unwrap();
    let mut rng = Rng::new(0x5EED_F11E_C7A5_CA1E);
    let rare_at = shape.files / 2 + 17;
    let mut rare = PathBuf::new();
    let mut text = String::new();
    for i in 0..shape.files {
        let (top, mid, leaf) = (i / 2000, (i / 100) % 20, i % 100);
        let folder = dir.join(format!("pkg{top:03}/mod{mid:02}"));
        if leaf == 0 {
            std::fs::create_dir_all(&folder).unwrap();
            if mid == 0 {
                let build = dir.join(format!("pkg{top:03}/build"));
                std::fs::create_dir_all(&build).unwrap();
                std::fs::write(build.join("out.py"), format!("{COMMON}(self):\n{RARE}\n")).unwrap();
                std::fs::write(dir.join(format!("pkg{top:03}/run.log")), format!("{RARE}\n")).unwrap();
            }
        }
        let ext = ["py", "rs", "ts", "rs", "ts"][(i % 5) as usize];
        // Sizes spread from a tenth to twice the mean, some files much bigger.
        let size = if rng.below(100) == 0 {
            shape.mean_bytes * 8
        } else {
            shape.mean_bytes / 10 + rng.below(shape.mean_bytes * 17 / 10)
        };
        text.clear();
        if ext == "py" && rng.below(100) < 30 {
            text.push_str("class Thing:\n    def __init__(self, value):\n        self.value = value\n");
        }
        while (text.len() as u64) < size {
            line(&mut rng, ext, &mut text);
        }
        if i == rare_at {
            text.push_str(&format!("    {RARE}(self.value)\n"));
            rare = folder.join(format!("f{leaf:02}.{ext}"));
        }
        std::fs::write(folder.join(format!("f{leaf:02}.{ext}")), &text).unwrap();
    }
    rare
}

/// The generated tree, written when missing or made with other parameters.
fn generated_tree() -> PathBuf {
    let env =
        |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let shape = Shape {
        files: env("FILECTX_SCALE_FILES", 100_000),
        mean_bytes: env("FILECTX_SCALE_MEAN_BYTES", 30_000),
    };
    let dir = std::env::var_os("FILECTX_SCALE_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap();
        exe.ancestors().nth(3).unwrap().join("scale-tree")
    });
    let stamp_path = dir.with_extension("stamp");
    let stamp = format!("v2 {shape:?}\n");
    if std::fs::read_to_string(&stamp_path).ok().as_deref() != Some(stamp.as_str()) {
        let start = Instant::now();
        eprintln!("writing the tree {} ({shape:?}) ...", dir.display());
        generate(&dir, shape);
        std::fs::write(&stamp_path, &stamp).unwrap();
        eprintln!("written in {:.1} s", start.elapsed().as_secs_f64());
    }
    std::fs::canonicalize(dir).unwrap()
}

/// One search, both ways.
struct Row {
    name: String,
    tool: &'static str,
    arguments: Value,
    rg: Vec<String>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// While one session greps the whole tree with a pattern no filter rules out (each run a
/// fresh daemon's first grep, so every file is read), another reads 50 lines of one file at a
/// time: the reads' p50 and p99. Then a grep cancelled 200 ms in: how long after the
/// `$/cancelRequest` its answer (the cancellation) came.
fn fairness(tree: &Path, probe_file: &Path) {
    let daemon = Daemon::start(&[]);
    let init = json!({"roots": [tree], "tools": ["read", "glob", "grep"]});
    let mut reader = Raw::connect(&daemon.socket);
    reader.call("initialize", Some(init.clone()));
    let mut grepper = Raw::connect(&daemon.socket);
    grepper.call("initialize", Some(init));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let searching = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            // `\w+ \d+;$` needs no literal a filter could rule a file out with.
            let start = Instant::now();
            grepper.call("tools/call", Some(json!({"name": "grep", "arguments": {"pattern": "[a-z]+ \\d{4};$", "output_mode": "count", "head_limit": 1}})));
            done.store(true, std::sync::atomic::Ordering::Release);
            start.elapsed()
        })
    };
    let mut reads = Vec::new();
    let mut line = 1u64;
    while !done.load(std::sync::atomic::Ordering::Acquire) {
        let start = Instant::now();
        let result = reader.call(
            "tools/call",
            Some(
                json!({"name": "read", "arguments": {"file_path": probe_file, "offset": line, "limit": 50}}),
            ),
        );
        reads.push(start.elapsed());
        assert_eq!(result["isError"], false, "{result}");
        line = if line == 1 { 11 } else { 1 };
    }
    let grep = searching.join().unwrap();
    reads.sort();
    let pct = |p: usize| reads[(reads.len() * p / 100).min(reads.len() - 1)];
    println!(
        "another session's 50-line reads during a {:.0} ms whole-tree grep: {} reads, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(grep),
        reads.len(),
        ms(pct(50)),
        ms(pct(99)),
        ms(*reads.last().unwrap()),
    );
    drop(daemon);
    let daemon = Daemon::start(&[]);
    let mut raw = Raw::connect(&daemon.socket);
    raw.call("initialize", Some(json!({"roots": [tree], "tools": ["read", "glob", "grep"]})));
    let id = raw.send_tool("grep", json!({"pattern": "[a-z]+ \\d{4};$", "output_mode": "count"}));
    std::thread::sleep(Duration::from_millis(200));
    let cancelled = Instant::now();
    raw.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    let answer = raw.response(id);
    println!(
        "a whole-tree grep cancelled 200 ms in: answered {:.1} ms after $/cancelRequest ({})",
        ms(cancelled.elapsed()),
        match (answer["error"]["code"].as_i64(), answer["result"]["error"]["code"].as_str()) {
            (Some(code), _) => format!("error {code}"),
            (None, Some(code)) => format!("the tool's {code}"),
            _ => format!("not cancelled: {:.200}", answer.to_string()),
        }
    );
}

/// Runs every row on `tree` with a fresh daemon and prints them.
fn bench_tree(rg: &Path, tree: &Path, rare: &str, common: &str, edited: Option<&Path>) {
    let listed = Command::new(rg).args(["--files", "--no-require-git"]).current_dir(tree).output().unwrap();
    let count = listed.stdout.iter().filter(|b| **b == b'\n').count();
    println!();
    println!("tree: {} ({count} files as rg lists them)", tree.display());
    let rg_args = |extra: &[&str]| -> Vec<String> {
        ["--no-require-git", "--no-messages"].iter().chain(extra).map(|s| (*s).to_owned()).collect()
    };
    let rows = [
        Row {
            name: "glob **/*.py".to_owned(),
            tool: "glob",
            arguments: json!({"pattern": "**/*.py"}),
            rg: rg_args(&["--files", "-g", "**/*.py"]),
        },
        Row {
            name: format!("grep -l {common:?} (common)"),
            tool: "grep",
            arguments: json!({"pattern": common}),
            rg: rg_args(&["-l", common]),
        },
        Row {
            name: format!("grep -l {rare:?} (rare)"),
            tool: "grep",
            arguments: json!({"pattern": rare}),
            rg: rg_args(&["-l", rare]),
        },
    ];
    // Warm the page cache (rg reads every listed file).
    let warm = rg_args(&["-l", "zzqqxxnotthere"]);
    let _ = time_rg(rg, tree, &warm.iter().map(String::as_str).collect::<Vec<_>>());
    let daemon = Daemon::start(&["--max-window-bytes", "16777216"]);
    let mut raw = Raw::connect(&daemon.socket);
    // The glob lists every Python file: a budget that holds them all, so the answers compare.
    raw.call(
        "initialize",
        Some(json!({"roots": [tree], "tools": ["read", "glob", "grep"], "readMaxBytes": 16_777_216})),
    );
    println!("{:<46} {:>7} {:>10} {:>10} {:>8}", "search", "files", "filectxd", "rg", "rg ÷ us");
    for row in &rows {
        let args: Vec<&str> = row.rg.iter().map(String::as_str).collect();
        let (first, text) = time_tool(&mut raw, row.tool, &row.arguments);
        // What the first grep leaves to build off the request path (the trigram filters) is
        // waited for before rg runs (on a machine of two cores rg would share them with the
        // build), and how long it took is shown: the repeated runs are a warm daemon's.
        let built = Instant::now();
        while daemon.status()["cachedFiltersBuilding"] == true {
            std::thread::sleep(Duration::from_millis(50));
        }
        let built = built.elapsed();
        let (rg_first, theirs) = time_rg(rg, tree, &args);
        let ours = if row.tool == "glob" {
            // glob answers at most 200 paths: compare the count its footer gives.
            let shown = paths_of(&text);
            // "(N more matching files not shown; ...)"
            let more: usize =
                text.lines().find_map(|l| l.strip_prefix('(')?.split(' ').next()?.parse().ok()).unwrap_or(0);
            assert!(!text.contains("too many files"), "{}: the listing was cut: {text:.300}", row.name);
            assert!(shown.iter().all(|p| theirs.contains(p)), "{}: a path rg does not list", row.name);
            assert_eq!(
                shown.len() + more,
                theirs.len(),
                "{}: filectxd and rg disagree: {text:.300}",
                row.name
            );
            shown.len() + more
        } else {
            assert!(
                !text.contains("not shown") && !text.contains("Output capped"),
                "not complete: {text:.300}"
            );
            let ours = if text.starts_with("No files") { BTreeSet::new() } else { paths_of(&text) };
            let only_ours: Vec<_> = ours.difference(&theirs).take(10).collect();
            let only_rg: Vec<_> = theirs.difference(&ours).take(10).collect();
            assert!(
                only_ours.is_empty() && only_rg.is_empty(),
                "{}: filectxd and rg disagree ({} and {} files): only filectxd {only_ours:?}, only rg {only_rg:?}",
                row.name,
                ours.len(),
                theirs.len()
            );
            ours.len()
        };
        let (mut daemon_runs, mut rg_runs) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            daemon_runs.push(time_tool(&mut raw, row.tool, &row.arguments).0);
            rg_runs.push(time_rg(rg, tree, &args).0);
        }
        let (ours_med, rg_med) = (median(daemon_runs), median(rg_runs));
        println!(
            "{:<46} {:>7} {:>8.1}ms {:>8.1}ms {:>7.2}×  first",
            row.name,
            ours,
            ms(first),
            ms(rg_first),
            rg_first.as_secs_f64() / first.as_secs_f64()
        );
        let waited = if built > Duration::from_millis(60) {
            format!("; filters built {:.1} s after the first", built.as_secs_f64())
        } else {
            String::new()
        };
        println!(
            "{:<46} {:>7} {:>8.1}ms {:>8.1}ms {:>7.2}×  repeated (medians of {RUNS}, alternating{waited})",
            "",
            ours,
            ms(ours_med),
            ms(rg_med),
            rg_med.as_secs_f64() / ours_med.as_secs_f64()
        );
    }
    if let Some(file) = edited {
        // An agent edits a file (and puts it back): what is kept stands, and the next searches
        // are still warm.
        let mut agent = Raw::connect(&daemon.socket);
        agent.call("initialize", Some(json!({"roots": [tree], "tools": ["read", "write"]})));
        let original = std::fs::read_to_string(file).unwrap();
        time_tool(&mut agent, "read", &json!({"file_path": file, "limit": 1}));
        let changed = json!({"file_path": file, "content": format!("{original}// edited\n")});
        let (edit, _) = time_tool(&mut agent, "write", &changed);
        let (glob, _) = time_tool(&mut raw, "glob", &rows[0].arguments);
        let (grep, _) = time_tool(&mut raw, "grep", &rows[1].arguments);
        time_tool(&mut agent, "write", &json!({"file_path": file, "content": original}));
        println!(
            "after an agent's edit ({:.1} ms): the glob {:.1} ms, the common grep {:.1} ms; {} listing(s) kept",
            ms(edit),
            ms(glob),
            ms(grep),
            daemon.status()["cachedListings"]
        );
        // The agent creates a file holding the rare name, and it is deleted again: the kept
        // listing takes both in (the other files' filters stay), so the next searches are warm
        // and find it, then do not.
        let created = file.with_file_name("filectx_created.py");
        let content = format!("def {rare}():\n    pass\n");
        let (create, _) = time_tool(&mut agent, "write", &json!({"file_path": created, "content": content}));
        let created_rel = created.strip_prefix(tree).unwrap().display().to_string();
        let (glob, grep) = until_found(&mut raw, &rows[0].arguments, &rows[2].arguments, &created_rel, true);
        std::fs::remove_file(&created).unwrap();
        let (glob_gone, grep_gone) =
            until_found(&mut raw, &rows[0].arguments, &rows[2].arguments, &created_rel, false);
        println!(
            "after an agent creates a file ({:.1} ms): the glob {:.1} ms, the rare grep {:.1} ms (both show it); \
             after it is deleted: {:.1} ms, {:.1} ms; {} listing(s) kept",
            ms(create),
            ms(glob),
            ms(grep),
            ms(glob_gone),
            ms(grep_gone),
            daemon.status()["cachedListings"]
        );
    }
    let status = daemon.status();
    let rss = daemon.rss_kib();
    drop(raw);
    drop(daemon);
    fresh_firsts(rg, tree, common);
    let kept = status["cachedListingBytes"].as_u64().unwrap_or(0);
    let files = status["cachedListedFiles"].as_u64().unwrap_or(0);
    let filters = status["cachedFilterBytes"].as_u64().unwrap_or(0);
    println!(
        "daemon RSS {:.1} MiB; {} listing(s) kept of {files} files, {:.1} MiB: {} bytes a listed file ({} of them its filter)",
        rss as f64 / 1024.0,
        status["cachedListings"],
        kept as f64 / f64::from(1 << 20),
        kept.checked_div(files).unwrap_or(0),
        filters.checked_div(files).unwrap_or(0),
    );
    std::io::stdout().flush().unwrap();
}

/// A fresh daemon's first searches, each the median of [`RUNS`] daemons started anew,
/// alternating with rg (one first run alone is at the mercy of the machine): its first glob
/// (the walk), then its first grep of `common` (every file read; the listing is the glob's).
fn fresh_firsts(rg: &Path, tree: &Path, common: &str) {
    let (mut globs, mut greps, mut rg_globs, mut rg_greps) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let daemon = Daemon::start(&["--max-window-bytes", "16777216"]);
        let mut raw = Raw::connect(&daemon.socket);
        raw.call(
            "initialize",
            Some(json!({"roots": [tree], "tools": ["glob", "grep"], "readMaxBytes": 16_777_216})),
        );
        globs.push(time_tool(&mut raw, "glob", &json!({"pattern": "**/*.py"})).0);
        let (grep, ours) = time_tool(&mut raw, "grep", &json!({"pattern": common}));
        greps.push(grep);
        // Stopped before rg runs: its filter build would share the cores with rg.
        drop(raw);
        drop(daemon);
        rg_globs.push(time_rg(rg, tree, &["--no-require-git", "--files", "-g", "**/*.py"]).0);
        let (rg_grep, theirs) = time_rg(rg, tree, &["--no-require-git", "--no-messages", "-l", common]);
        rg_greps.push(rg_grep);
        assert_eq!(paths_of(&ours), theirs, "a fresh daemon's first grep and rg disagree");
    }
    let (glob, rg_glob, grep, rg_grep) = (median(globs), median(rg_globs), median(greps), median(rg_greps));
    println!(
        "first searches of {RUNS} fresh daemons (medians, alternating with rg): glob {:.1} ms (rg {:.1} ms, {:.2}×), \
         grep -l {common:?} {:.1} ms (rg {:.1} ms, {:.2}×)",
        ms(glob),
        ms(rg_glob),
        rg_glob.as_secs_f64() / glob.as_secs_f64(),
        ms(grep),
        ms(rg_grep),
        rg_grep.as_secs_f64() / grep.as_secs_f64()
    );
}

/// Times `glob` then `grep` until both answers hold `rel` (or both lack it, `present` false):
/// the watcher tells the daemon of a change asynchronously, so a first answer may predate it.
/// The times of the pair that showed it.
fn until_found(raw: &mut Raw, glob: &Value, grep: &Value, rel: &str, present: bool) -> (Duration, Duration) {
    std::thread::sleep(Duration::from_millis(20));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (glob_time, globbed) = time_tool(raw, "glob", glob);
        let (grep_time, grepped) = time_tool(raw, "grep", grep);
        // The glob shows the newest first: a new file leads its answer.
        let shown = globbed.lines().next() == Some(rel);
        if shown == present && grepped.lines().any(|line| line == rel) == present {
            return (glob_time, grep_time);
        }
        assert!(Instant::now() < deadline, "{rel} never {}", if present { "came" } else { "went" });
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    let Some(rg) = filectx_tests::find_or_install("rg", "ripgrep") else {
        eprintln!("rg is missing and could not be installed; nothing to compare with");
        return;
    };
    let version = Command::new(&rg).arg("--version").output().unwrap();
    println!(
        "rg: {} ({})",
        rg.display(),
        String::from_utf8_lossy(&version.stdout).lines().next().unwrap_or("?")
    );
    println!("daemon: {}", filectx_tests::bin("filectxd").display());
    let tree = generated_tree();
    // FILECTX_SCALE_ONLY=restart: only the rows of searches after a restart (issue 41).
    let only_restarts = std::env::var("FILECTX_SCALE_ONLY").is_ok_and(|only| only == "restart");
    if !only_restarts {
        bench_tree(&rg, &tree, RARE, COMMON, Some(&tree.join("pkg000/mod00/f06.rs")));
        fairness(&tree, &tree.join("pkg000/mod00/f01.rs"));
    }
    println!();
    println!("tree: {} after a restart", tree.display());
    restart::restarts(&rg, &tree, RARE, COMMON, true);
    if let Some(trees) = std::env::var_os("FILECTX_SCALE_TREES") {
        // A real tree: a name found in one file and a common word, as the issue's.
        let rare =
            std::env::var("FILECTX_SCALE_RARE").unwrap_or_else(|_| "PyUnicode_AsUTF8AndSize".to_owned());
        for tree in std::env::split_paths(&trees) {
            if !only_restarts {
                bench_tree(&rg, &tree, &rare, COMMON, None);
            }
            println!();
            println!("tree: {} after a restart", tree.display());
            restart::restarts(&rg, &tree, &rare, COMMON, false);
        }
    }
    println!();
    println!("rg ÷ us: rg's time over filectxd's (above 1: filectxd is faster)");
}

//! `glob` and `grep` against ripgrep (`rg`, run as a process) on a tree of real source files:
//! the vendored crate sources in the cargo registry (several thousand `.rs` files). Each row
//! compares complete answers: the patterns are chosen so the whole result fits the read budget
//! (the bench raises `readMaxBytes` to its maximum and checks that no footer says something was
//! left out), and the daemon's file set must equal rg's.
//!
//! `cargo build --release -p filectx-daemon && cargo bench -p filectx-tests --bench search`
//! (`FILECTX_FILECTXD_BIN` picks another daemon build, `FILECTX_SEARCH_TREE` another tree). rg
//! is installed with `cargo install ripgrep --locked` when it is not on the PATH. The page cache
//! is warmed first; then the first search of the daemon (its walk) and repeated searches are
//! timed, alternating with rg, and medians are printed with their ratio.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use filectx_tests::versus::{median, paths_of, time_rg, time_tool};
use filectx_tests::{Daemon, Raw};
use serde_json::{Value, json};

/// Timed runs of each repeated search, per side.
const RUNS: usize = 7;

/// The cargo registry's unpacked sources (or `FILECTX_SEARCH_TREE`).
fn tree() -> PathBuf {
    if let Some(tree) = std::env::var_os("FILECTX_SEARCH_TREE") {
        return PathBuf::from(tree);
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let src = home.join("registry/src");
    let index =
        std::fs::read_dir(&src).expect("the cargo registry's sources").flatten().next().expect("one index");
    std::fs::canonicalize(index.path()).unwrap()
}

/// One search, both ways.
struct Row {
    name: &'static str,
    tool: &'static str,
    arguments: Value,
    rg: Vec<&'static str>,
}

fn main() {
    let Some(rg) = filectx_tests::find_or_install("rg", "ripgrep") else {
        eprintln!("rg is missing and could not be installed; nothing to compare with");
        return;
    };
    let tree = tree();
    let files = Command::new(&rg).args(["--files", "--no-require-git"]).current_dir(&tree).output().unwrap();
    let count = files.stdout.iter().filter(|b| **b == b'\n').count();
    println!("tree: {} ({count} files as rg lists them)", tree.display());
    println!("rg: {}", rg.display());
    println!("daemon: {}", filectx_tests::bin("filectxd").display());

    let daemon = Daemon::start(&["--max-window-bytes", "16777216"]);
    let mut raw = Raw::connect(&daemon.socket);
    raw.call(
        "initialize",
        Some(json!({"roots": [tree], "tools": ["read", "glob", "grep"], "readMaxBytes": 16_777_216})),
    );
    let rows = [
        Row {
            name: "glob **/build.rs",
            tool: "glob",
            arguments: json!({"pattern": "**/build.rs"}),
            rg: vec!["--files", "--no-require-git", "-g", "**/build.rs"],
        },
        Row {
            name: "grep -l 'fn poll_ready'",
            tool: "grep",
            arguments: json!({"pattern": "fn poll_ready"}),
            rg: vec!["-l", "--no-require-git", "fn poll_ready"],
        },
    ];
    // Warm the page cache for both.
    for row in &rows {
        let _ = time_rg(&rg, &tree, &row.rg);
    }
    println!();
    println!("{:<34} {:>6} {:>11} {:>11} {:>7}", "search", "files", "filectxd", "rg", "ratio");
    for row in &rows {
        let (first, text) = time_tool(&mut raw, row.tool, &row.arguments);
        let (rg_first, theirs) = time_rg(&rg, &tree, &row.rg);
        let ours = paths_of(&text);
        assert!(
            !text.contains("not shown") && !text.contains("Output capped"),
            "not a complete answer: {text}"
        );
        assert_eq!(ours, theirs, "{}: filectxd and rg disagree", row.name);
        let (mut daemon_runs, mut rg_runs) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            daemon_runs.push(time_tool(&mut raw, row.tool, &row.arguments).0);
            rg_runs.push(time_rg(&rg, &tree, &row.rg).0);
        }
        let (ours_med, rg_med) = (median(daemon_runs), median(rg_runs));
        let ratio = |a: Duration, b: Duration| b.as_secs_f64() / a.as_secs_f64();
        println!(
            "{:<34} {:>6} {:>9.1}ms {:>9.1}ms {:>6.2}x  (first search; rg's first run after warm-up)",
            row.name,
            ours.len(),
            first.as_secs_f64() * 1e3,
            rg_first.as_secs_f64() * 1e3,
            ratio(first, rg_first)
        );
        println!(
            "{:<34} {:>6} {:>9.1}ms {:>9.1}ms {:>6.2}x  (repeated: medians of {RUNS}, alternating)",
            "  repeated",
            ours.len(),
            ours_med.as_secs_f64() * 1e3,
            rg_med.as_secs_f64() * 1e3,
            ratio(ours_med, rg_med)
        );
    }
    println!();
    println!("ratio = rg time / filectxd time (above 1: filectxd is faster)");
}

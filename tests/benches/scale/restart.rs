//! The rows of issue 41: searches after a restart, served from the search index a stopped daemon
//! wrote. One daemon builds the index (a glob, a grep, its filters built, a clean stop); then
//! each first search (the glob, the common grep, the rare grep) is the very first request of
//! [`RUNS`] fresh daemons on that index, timed from right after `initialize` (which starts the
//! validation), alternating with rg; the validation walk's time (`daemon/status`) against
//! `rg --files`; the index's bytes per listed file; and, on the generated tree, the answers after
//! random changes made while no daemon ran, compared with rg's file for file (the changes are
//! undone afterwards, so the tree stays the bench's).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use filectx_tests::versus::{Rng, median, paths_of, time_rg, time_tool};
use filectx_tests::{Daemon, Raw};
use serde_json::{Value, json};

use super::{RUNS, ms};

/// A daemon keeping its search index in `index`.
fn start(index: &Path) -> Daemon {
    let dir = index.display().to_string();
    Daemon::start(&["--max-window-bytes", "16777216", "--search-index-dir", &dir])
}

fn session(daemon: &Daemon, tree: &Path) -> Raw {
    let mut raw = Raw::connect(&daemon.socket);
    raw.call(
        "initialize",
        Some(json!({"roots": [tree], "tools": ["glob", "grep"], "readMaxBytes": 16_777_216})),
    );
    raw
}

/// Stops `daemon` as systemd would (SIGTERM): it writes what changed of its index.
fn stop(mut daemon: Daemon) {
    daemon.signal(rustix::process::Signal::TERM);
    assert!(daemon.wait_exit().success(), "{}", daemon.log_text());
    if std::env::var_os("FILECTX_SCALE_LOGS").is_some() {
        let log = daemon.log_text();
        for line in log.lines().filter(|l| l.contains("index") || l.contains("WARN") || l.contains("stopped"))
        {
            eprintln!("daemon: {line:.300}");
        }
    }
}

/// What `daemon/status` says of `tree`'s index, asked by `raw` (a session rooted there).
fn index_of(raw: &mut Raw, tree: &Path) -> Value {
    let status = raw.call("daemon/status", None);
    let indexes = status["searchIndexes"].as_array().cloned().unwrap_or_default();
    indexes.into_iter().find(|index| index["root"] == tree.display().to_string()).unwrap_or(Value::Null)
}

/// The files a glob answer counts: those shown and those its footer says were not.
fn glob_count(text: &str) -> usize {
    let more: usize =
        text.lines().find_map(|l| l.strip_prefix('(')?.split(' ').next()?.parse().ok()).unwrap_or(0);
    paths_of(text).len() + more
}

/// A search of both sides.
struct Search {
    name: &'static str,
    tool: &'static str,
    arguments: Value,
    rg: Vec<String>,
}

fn searches(rare: &str, common: &str) -> [Search; 3] {
    let (rare, common) = (rare.to_owned(), common.to_owned());
    let rg = |extra: &[&str]| -> Vec<String> {
        ["--no-require-git", "--no-messages"].iter().chain(extra).map(|s| (*s).to_owned()).collect()
    };
    [
        Search {
            name: "first glob **/*.py",
            tool: "glob",
            arguments: json!({"pattern": "**/*.py"}),
            rg: rg(&["--files", "-g", "**/*.py"]),
        },
        Search {
            name: "first grep -l (common)",
            tool: "grep",
            arguments: json!({"pattern": common}),
            rg: rg(&["-l", &common]),
        },
        Search {
            name: "first grep -l (rare)",
            tool: "grep",
            arguments: json!({"pattern": rare}),
            rg: rg(&["-l", &rare]),
        },
    ]
}

/// Checks `text`, the daemon's answer to `search`, against rg's `theirs`; the files it names.
fn check(search: &Search, text: &str, theirs: &BTreeSet<String>) -> usize {
    if search.tool == "glob" {
        let shown = paths_of(text);
        assert!(shown.iter().all(|p| theirs.contains(p)), "{}: a path rg does not list", search.name);
        assert_eq!(glob_count(text), theirs.len(), "{}: filectxd and rg disagree: {text:.300}", search.name);
        return theirs.len();
    }
    assert!(!text.contains("not shown") && !text.contains("Output capped"), "not complete: {text:.300}");
    let ours = if text.starts_with("No files") { BTreeSet::new() } else { paths_of(text) };
    let only_ours: Vec<_> = ours.difference(theirs).take(10).collect();
    let only_rg: Vec<_> = theirs.difference(&ours).take(10).collect();
    assert!(
        only_ours.is_empty() && only_rg.is_empty(),
        "{}: filectxd and rg disagree: only filectxd {only_ours:?}, only rg {only_rg:?}",
        search.name
    );
    ours.len()
}

/// The index's rows on `tree`; `changes` adds the row of random changes made while stopped.
pub fn restarts(rg: &Path, tree: &Path, rare: &str, common: &str, changes: bool) {
    let folder = tempfile::tempdir().unwrap();
    let index = folder.path().join("index");
    // One daemon's life: a glob, a grep, its filters built, a clean stop that writes the index.
    let built = Instant::now();
    let daemon = start(&index);
    let mut raw = session(&daemon, tree);
    time_tool(&mut raw, "glob", &json!({"pattern": "**/*.py"}));
    time_tool(&mut raw, "grep", &json!({"pattern": common}));
    while daemon.status()["cachedFiltersBuilding"] == true {
        std::thread::sleep(Duration::from_millis(50));
    }
    let listed = raw.call("daemon/status", None)["cachedListedFiles"].as_u64().unwrap_or(0);
    drop(raw);
    stop(daemon);
    let files: Vec<PathBuf> = std::fs::read_dir(&index).unwrap().flatten().map(|e| e.path()).collect();
    let bytes: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
    println!(
        "search index: {} file(s), {:.1} MiB for {listed} listed files: {} bytes a listed file (built and written in {:.1} s)",
        files.len(),
        bytes as f64 / f64::from(1 << 20),
        bytes.checked_div(listed).unwrap_or(0),
        built.elapsed().as_secs_f64()
    );
    let (mut validations, mut listings) = (Vec::new(), Vec::new());
    for search in searches(rare, common) {
        let args: Vec<&str> = search.rg.iter().map(String::as_str).collect();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let mut count = 0;
        let mut reread = 0;
        for _ in 0..RUNS {
            let daemon = start(&index);
            let mut raw = session(&daemon, tree);
            let (took, text) = time_tool(&mut raw, search.tool, &search.arguments);
            let mut known = index_of(&mut raw, tree);
            assert_eq!(known["loaded"], true, "not served from the index: {known}\n{}", daemon.log_text());
            // A glob is answered once the folders are validated; the files' step goes on.
            let deadline = Instant::now() + Duration::from_secs(30);
            while known["validationMs"] == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                known = index_of(&mut raw, tree);
            }
            validations.push(Duration::from_millis(known["validationMs"].as_u64().unwrap_or(0)));
            reread = known["rereadFiles"].as_u64().unwrap_or(0);
            ours.push(took);
            drop(raw);
            stop(daemon);
            let (rg_took, rg_paths) = time_rg(rg, tree, &args);
            count = check(&search, &text, &rg_paths);
            theirs.push(rg_took);
            listings.push(time_rg(rg, tree, &["--no-require-git", "--files"]).0);
        }
        let (ours, theirs) = (median(ours), median(theirs));
        println!(
            "{:<46} {:>7} {:>8.1}ms {:>8.1}ms {:>7.2}×  after a restart (medians of {RUNS} fresh daemons; {reread} files re-read)",
            search.name,
            count,
            ms(ours),
            ms(theirs),
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
    }
    let (validation, listing) = (median(validations), median(listings));
    println!(
        "validation walk (daemon/status validationMs, median of {}): {:.1} ms; rg --files {:.1} ms: {:.2}× rg --files",
        RUNS * 3,
        ms(validation),
        ms(listing),
        validation.as_secs_f64() / listing.as_secs_f64()
    );
    if changes {
        changed_while_down(rg, tree, &index, rare, common);
    }
}

/// One change made while no daemon ran, and how to undo it.
enum Undo {
    Remove(PathBuf),
    Restore(PathBuf, Vec<u8>, SystemTime),
    Rename(PathBuf, PathBuf),
}

/// Random changes (files created, deleted and renamed, a folder renamed, rewrites keeping size
/// and mtime that plant the rare name, a new ignore rule), then a fresh daemon's first answers
/// against rg's; the changes are undone after.
fn changed_while_down(rg: &Path, tree: &Path, index: &Path, rare: &str, common: &str) {
    let mut rng = Rng::new(0x41_41_41);
    let mut undo: Vec<Undo> = Vec::new();
    let listed = Command::new(rg).args(["--files", "--no-require-git"]).current_dir(tree).output().unwrap();
    let files: Vec<PathBuf> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| tree.join(l))
        .filter(|p| !p.ends_with(".gitignore"))
        .collect();
    let pick = |rng: &mut Rng| files[rng.below(files.len() as u64) as usize].clone();
    let mut touched = BTreeSet::new();
    for i in 0..20 {
        let near = pick(&mut rng);
        let new = near.with_file_name(format!("created_{i}.py"));
        let body = if i % 2 == 0 {
            format!("def {rare}():\n    pass\n")
        } else {
            format!("class A:\n    {common}(self):\n        pass\n")
        };
        std::fs::write(&new, body).unwrap();
        undo.push(Undo::Remove(new));
    }
    for _ in 0..20 {
        let gone = pick(&mut rng);
        if !touched.insert(gone.clone()) {
            continue;
        }
        let meta = std::fs::metadata(&gone).unwrap();
        undo.push(Undo::Restore(gone.clone(), std::fs::read(&gone).unwrap(), meta.modified().unwrap()));
        std::fs::remove_file(&gone).unwrap();
    }
    for i in 0..20 {
        let from = pick(&mut rng);
        if !touched.insert(from.clone()) {
            continue;
        }
        let to = pick(&mut rng).with_file_name(format!("renamed_{i}.rs"));
        std::fs::rename(&from, &to).unwrap();
        undo.push(Undo::Rename(to, from));
    }
    for _ in 0..10 {
        let file = pick(&mut rng);
        if !touched.insert(file.clone()) {
            continue;
        }
        let meta = std::fs::metadata(&file).unwrap();
        let old = std::fs::read(&file).unwrap();
        let mut new = old.clone();
        if new.len() > rare.len() + 2 {
            new[1..=rare.len()].copy_from_slice(rare.as_bytes());
            new[0] = b'\n';
            new[rare.len() + 1] = b'\n';
        }
        std::fs::write(&file, &new).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(meta.modified().unwrap())
            .unwrap();
        undo.push(Undo::Restore(file, old, meta.modified().unwrap()));
    }
    let folder = tree.join("pkg007/mod03");
    let moved = tree.join("pkg007/mod03_moved");
    if folder.is_dir() && !touched.iter().any(|t| t.starts_with(&folder)) {
        std::fs::rename(&folder, &moved).unwrap();
        undo.push(Undo::Rename(moved, folder));
    }
    let ignore = tree.join(".gitignore");
    let meta = std::fs::metadata(&ignore).unwrap();
    let old = std::fs::read(&ignore).unwrap();
    let mut rules = old.clone();
    rules.extend_from_slice(b"mod11/\n");
    std::fs::write(&ignore, rules).unwrap();
    undo.push(Undo::Restore(ignore, old, meta.modified().unwrap()));

    let daemon = start(index);
    let mut raw = session(&daemon, tree);
    let mut counts = Vec::new();
    for search in searches(rare, common) {
        let (_, text) = time_tool(&mut raw, search.tool, &search.arguments);
        let args: Vec<&str> = search.rg.iter().map(String::as_str).collect();
        let (_, theirs) = time_rg(rg, tree, &args);
        counts.push(check(&search, &text, &theirs));
    }
    let known = index_of(&mut raw, tree);
    drop(raw);
    drop(daemon);
    println!(
        "after {} random changes while down (created, deleted, renamed, a folder renamed, same size and mtime rewrites, a new ignore rule): \
         glob, common and rare grep equal to rg's, file for file ({} / {} / {} files; loaded {}, {} files re-read, validated in {} ms)",
        undo.len(),
        counts[0],
        counts[1],
        counts[2],
        known["loaded"],
        known["rereadFiles"],
        known["validationMs"]
    );
    for step in undo.into_iter().rev() {
        match step {
            Undo::Remove(path) => std::fs::remove_file(path).unwrap(),
            Undo::Rename(from, to) => std::fs::rename(from, to).unwrap(),
            Undo::Restore(path, bytes, mtime) => {
                std::fs::write(&path, bytes).unwrap();
                std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
            }
        }
    }
}

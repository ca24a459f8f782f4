//! Tests of the provider's cache: the warm read path, its budget of open files, and the idle
//! sweep.
#![cfg(test)]

use std::time::Duration;

use super::index::WindowRequest;
use super::{Provider, ProviderConfig, Resolved};

/// Lines `offset..offset + limit`, whole.
fn w(offset: u64, limit: u64) -> WindowRequest {
    WindowRequest::whole(offset, limit, u64::MAX)
}

/// A file older than the racy window, so the version the provider computes is trusted.
fn aged_files(names: &[&str]) -> (tempfile::TempDir, Vec<Resolved>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    for name in names {
        std::fs::write(root.join(name), format!("{name} one\n{name} two\n")).expect("write");
    }
    std::thread::sleep(Duration::from_millis(2100));
    let roots = [super::RootDir::new(&root, None).expect("root")];
    let scope = super::Scope { roots: &roots, cwd: &root };
    let targets = names.iter().map(|name| super::resolve::resolve(name, scope).expect("resolve")).collect();
    (dir, targets)
}

/// Like [`aged_files`], each file `lines` lines long.
fn aged_long_files(names: &[&str], lines: usize) -> (tempfile::TempDir, Vec<Resolved>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    for name in names {
        let text: String = (1..=lines).map(|i| format!("{name} line {i}\n")).collect();
        std::fs::write(root.join(name), text).expect("write");
    }
    std::thread::sleep(Duration::from_millis(2100));
    let roots = [super::RootDir::new(&root, None).expect("root")];
    let scope = super::Scope { roots: &roots, cwd: &root };
    let targets = names.iter().map(|name| super::resolve::resolve(name, scope).expect("resolve")).collect();
    (dir, targets)
}

#[test]
fn a_file_read_warm_gets_its_line_ends_counted_in_the_index_budget() {
    let (_dir, targets) = aged_long_files(&["a.txt", "b.txt"], 6000);
    let (a, b) = (&targets[0], &targets[1]);
    let provider = provider(16);
    provider.read_resolved(a, &w(1, 10)).expect("read");
    let cold = provider.cached_index_bytes();
    assert!(cold > 0);
    // The first warm read reads the file's line ends once; every window is the same after.
    let warm = provider.read_cached(a, &w(200, 3)).expect("warm").expect("read");
    assert_eq!(warm.window.lines, ["a.txt line 200", "a.txt line 201", "a.txt line 202"]);
    assert_eq!(provider.cached_index_bytes(), cold + 6000 * 4);
    let again = provider.read_cached(a, &w(5999, 5)).expect("warm").expect("read");
    assert_eq!(again.window.lines, ["a.txt line 5999", "a.txt line 6000"]);
    assert_eq!(provider.cached_index_bytes(), cold + 6000 * 4, "kept once");

    // Within the budget of index bytes: the line ends of one file evict the others.
    let tight = Provider::new(ProviderConfig {
        max_index_bytes: 2 * cold + 6000 * 4,
        fsync: false,
        ..ProviderConfig::default()
    });
    tight.read_resolved(a, &w(1, 1)).expect("read");
    tight.read_resolved(b, &w(1, 1)).expect("read");
    assert_eq!(tight.cached_files(), 2);
    let warm = tight.read_cached(b, &w(7, 1)).expect("warm").expect("read");
    assert_eq!(warm.window.lines, ["b.txt line 7"]);
    assert_eq!((tight.cached_files(), tight.cached_index_bytes()), (2, 2 * cold + 6000 * 4));
    let warm = tight.read_cached(a, &w(8, 1)).expect("warm").expect("read");
    assert_eq!(warm.window.lines, ["a.txt line 8"]);
    assert_eq!(tight.cached_files(), 1, "b.txt, the least recently used, went");
    assert_eq!(tight.cached_index_bytes(), cold + 6000 * 4);
    assert!(tight.read_cached(b, &w(1, 1)).is_none());
}

#[test]
fn a_file_read_warm_through_what_resolution_opened_gets_its_line_ends_too() {
    use super::outcome::OpenedRead::{Cold, Warm};
    let (dir, targets) = aged_long_files(&["a.txt"], 6000);
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let provider = provider(16);
    provider.read_resolved(&targets[0], &w(1, 10)).expect("read");
    let cold = provider.cached_index_bytes();
    for (offset, line) in [(300, "a.txt line 300"), (6000, "a.txt line 6000")] {
        match read_opened(&provider, &root, "a.txt", &w(offset, 1)).expect("read") {
            Warm(outcome, _) => assert_eq!(outcome.window.lines, [line]),
            Cold(_) => panic!("not warm after a read"),
        }
        assert_eq!(provider.cached_index_bytes(), cold + 6000 * 4, "line ends kept once");
    }
}

fn provider(max_open_files: usize) -> Provider {
    Provider::new(ProviderConfig { max_open_files, fsync: false, ..ProviderConfig::default() })
}

#[test]
fn warm_reads_come_from_the_open_file_and_notice_changes() {
    let (_dir, targets) = aged_files(&["a.txt"]);
    let a = &targets[0];
    let provider = provider(16);
    assert!(provider.read_cached(a, &w(1, 10)).is_none(), "nothing is warm before a first read");
    let first = provider.read_resolved(a, &w(1, 10)).expect("read");
    assert_eq!(provider.open_files(), 1);
    let warm = provider.read_cached(a, &w(2, 10)).expect("warm").expect("read");
    assert_eq!(warm.version, first.version);
    assert_eq!(warm.window.lines, vec!["a.txt two".to_owned()]);
    assert!(matches!(
        provider.read_cached(a, &w(9, 1)),
        Some(Err(super::ProviderError::OffsetPastEnd { total_lines: 2, .. }))
    ));

    // Replaced by another program (a new inode): the warm path declines, the read sees it.
    let fresh = a.path.with_extension("new");
    std::fs::write(&fresh, "changed\n").expect("write");
    std::fs::rename(&fresh, &a.path).expect("rename");
    assert!(provider.read_cached(a, &w(1, 10)).is_none());
    let after = provider.read_resolved(a, &w(1, 10)).expect("read");
    assert_eq!(after.window.lines, vec!["changed".to_owned()]);
    assert_ne!(after.version, first.version);
}

#[test]
fn open_files_stay_within_their_budget_and_idle_entries_are_swept() {
    let (_dir, targets) = aged_files(&["a.txt", "b.txt", "c.txt"]);
    let provider = provider(2);
    for target in &targets {
        provider.read_resolved(target, &w(1, 10)).expect("read");
    }
    assert_eq!(provider.cached_files(), 3);
    assert_eq!(provider.open_files(), 2, "the third entry is cached without its file");
    // Beyond the budget a file is still read correctly, just not from a kept file.
    assert!(provider.read_cached(&targets[2], &w(1, 10)).is_none());
    assert_eq!(
        provider.read_resolved(&targets[2], &w(1, 1)).expect("read").window.lines,
        vec!["c.txt one".to_owned()]
    );

    // First sweep: everything was used since the start, nothing goes.
    assert_eq!(provider.sweep_idle(), 0);
    provider.read_resolved(&targets[0], &w(1, 10)).expect("read");
    // Second sweep: only what was used during the period stays.
    assert_eq!(provider.sweep_idle(), 2);
    assert_eq!(provider.cached_files(), 1);
    assert_eq!(provider.open_files(), 1);
    assert_eq!(provider.sweep_idle(), 1);
    assert_eq!((provider.cached_files(), provider.open_files()), (0, 0));
}

/// A read through what resolution opened but did not look at ([`Provider::read_opened`]).
fn read_opened(
    provider: &Provider,
    root: &std::path::Path,
    name: &str,
    request: &WindowRequest,
) -> Result<super::outcome::OpenedRead, super::ProviderError> {
    let roots = [super::RootDir::new(root, None).expect("root")];
    let scope = super::Scope { roots: &roots, cwd: root };
    match super::resolve::open(name, scope).expect("open") {
        super::Lookup::Opened(opened) => provider.read_opened(opened, name, request),
        super::Lookup::Resolved(target) => panic!("{name} was not opened: {target:?}"),
    }
}

#[test]
fn reads_of_what_resolution_opened_are_warm_only_for_the_cached_file_unchanged() {
    use super::outcome::OpenedRead::{Cold, Warm};
    let (dir, targets) = aged_files(&["a.txt", "b.txt"]);
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let provider = provider(16);
    // Nothing cached: cold, with the resolution as the one look at the handle saw it.
    match read_opened(&provider, &root, "a.txt", &w(1, 10)).expect("read") {
        Cold(target) => assert_eq!(target, targets[0]),
        Warm(..) => panic!("warm before a first read"),
    }
    let first = provider.read_resolved(&targets[0], &w(1, 10)).expect("read");
    match read_opened(&provider, &root, "a.txt", &w(2, 10)).expect("read") {
        Warm(outcome, opened) => {
            assert_eq!((outcome.version, outcome.links), (first.version, 1));
            assert_eq!(outcome.window.lines, vec!["a.txt two".to_owned()]);
            assert_eq!(
                (opened.path.as_path(), opened.display.as_str()),
                (targets[0].path.as_path(), "a.txt")
            );
        }
        Cold(_) => panic!("not warm after a read"),
    }
    // With the version's bytes in the content store, the window is cut from them (the store
    // is keyed by version: here, for the test alone, it holds other bytes of the same length,
    // so the answer shows where it came from).
    provider.store().put(first.version, std::borrow::Cow::Borrowed(b"A.TXT ONE\nA.TXT TWO\n"));
    match read_opened(&provider, &root, "a.txt", &w(2, 1)).expect("read") {
        Warm(outcome, _) => assert_eq!(outcome.window.lines, vec!["A.TXT TWO".to_owned()]),
        Cold(_) => panic!("not warm with the version stored"),
    }
    // The window's own errors stand once the file is checked.
    assert!(matches!(
        read_opened(&provider, &root, "a.txt", &w(9, 1)),
        Err(super::ProviderError::OffsetPastEnd { total_lines: 2, .. })
    ));
    // A second link: still warm, and the answer says so.
    std::fs::hard_link(root.join("a.txt"), root.join("a2.txt")).expect("link");
    std::thread::sleep(Duration::from_millis(2100));
    provider.read_resolved(&targets[0], &w(1, 10)).expect("read");
    match read_opened(&provider, &root, "a.txt", &w(1, 1)).expect("read") {
        Warm(outcome, _) => assert_eq!(outcome.links, 2),
        Cold(_) => panic!("not warm after a read"),
    }
    // Replaced by another program (a new inode), rewritten in place, swapped for a folder:
    // never the cached window.
    let fresh = root.join("a.new");
    std::fs::write(&fresh, "changed\n").expect("write");
    std::fs::rename(&fresh, root.join("a.txt")).expect("rename");
    match read_opened(&provider, &root, "a.txt", &w(1, 10)).expect("read") {
        Cold(target) => assert!(target.file.is_some_and(|f| f.fingerprint.size == 8)),
        Warm(..) => panic!("a replaced file read warm"),
    }
    provider.read_resolved(&targets[1], &w(1, 10)).expect("read");
    std::fs::write(root.join("b.txt"), "b.txt ONE\nb.txt two\n").expect("rewrite");
    assert!(matches!(read_opened(&provider, &root, "b.txt", &w(1, 10)), Ok(Cold(_))));
    provider.read_resolved(&targets[1], &w(1, 10)).expect("read");
    std::fs::remove_file(root.join("b.txt")).expect("remove");
    std::fs::create_dir(root.join("b.txt")).expect("folder");
    match read_opened(&provider, &root, "b.txt", &w(1, 10)).expect("read") {
        Cold(target) => assert!(target.folder && target.file.is_none()),
        Warm(..) => panic!("a folder read warm"),
    }
}

#[test]
fn cached_open_files_count_against_the_descriptor_budget_and_give_way() {
    let (_dir, targets) = aged_files(&["a.txt", "b.txt", "c.txt", "d.txt"]);
    // A budget of 8 (a limit of 16, half of it in reserve): the cache may hold files open only
    // while fewer than 4 are held.
    let budget = crate::descriptors::Descriptors::new(16, 0);
    assert_eq!(budget.usage().budget, 8);
    let provider = std::sync::Arc::new(Provider::with_descriptors(
        ProviderConfig { fsync: false, ..ProviderConfig::default() },
        budget.clone(),
    ));
    let weak = std::sync::Arc::downgrade(&provider);
    budget.on_pressure(Box::new(move |n| {
        if let Some(provider) = weak.upgrade() {
            provider.shed_open_files(n);
        }
    }));
    for target in &targets {
        provider.read_resolved(target, &w(1, 1)).expect("read");
    }
    assert_eq!(provider.open_files(), 4, "the cache holds what it may");
    assert_eq!(budget.usage().cached, 4);
    // Sessions need the room: the least recently used files are closed for them.
    let connection = budget.connection().expect("room for a connection");
    let roots = budget.roots(budget.roots_allowed()).expect("roots");
    assert_eq!(provider.open_files(), 4, "there was room without them");
    let second = budget.connection().expect("room, counting the cache's files");
    let usage = budget.usage();
    assert!(usage.connections + usage.roots + usage.cached <= usage.budget, "{usage:?}");
    assert!(provider.open_files() < 4, "the cache gave files up");
    assert_eq!(budget.usage().cached, provider.open_files());
    // Their entries went; reads still work (cold), without holding files open past the half.
    provider.read_resolved(&targets[0], &w(1, 1)).expect("read");
    assert_eq!(budget.usage().cached, provider.open_files());
    drop((connection, roots, second));
    provider.forget_all();
    assert_eq!((provider.open_files(), budget.usage().cached), (0, 0));
}

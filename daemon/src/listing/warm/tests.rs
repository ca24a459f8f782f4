//! Tests of the warm listings: warm answers equal cold walks whatever changes, the bounds, and
//! what a change keeps or drops.

use super::*;
use crate::provider::{Provider, ProviderConfig, RootDir, Scope};
use proptest::prelude::*;
use std::time::{Duration, Instant};

const DIRS: [&str; 4] = ["", "a", "a/b", "c"];
const NAMES: [&str; 4] = ["x.rs", "y.txt", ".h", "z.log"];
const PATTERNS: [&str; 5] = ["*.log\n", "x.rs\n", "b/\n", "", "*.log\n!z.log\n"];
/// Where a folder may be moved to besides the folders of [`DIRS`] (in the tree, then out of the
/// searched folders, then back).
const FRESH: [&str; 3] = ["a/n", "n", "c/m"];
/// The folders searched.
const SEARCHED: [&str; 2] = ["", "a"];

#[derive(Debug, Clone)]
enum Op {
    Create(usize, usize),
    Modify(usize, usize),
    Delete(usize, usize),
    Rename((usize, usize), (usize, usize)),
    RenameDir(usize, usize),
    /// A folder of [`DIRS`] to a name of [`FRESH`], or back.
    MoveDir(usize, usize, bool),
    Ignore(usize, usize, bool),
    MakeDir(usize),
}

/// Changes of the tree: files created, changed, deleted and renamed (onto a name or not,
/// hidden names among them), folders made and moved (those of `DIRS[moved..]`), and, when
/// `ignores`, ignore files written.
fn op_of(moved: usize, ignores: bool) -> proptest::strategy::Union<BoxedStrategy<Op>> {
    let file = (0..DIRS.len(), 0..NAMES.len());
    let mut ops = vec![
        file.clone().prop_map(|(d, n)| Op::Create(d, n)).boxed(),
        file.clone().prop_map(|(d, n)| Op::Modify(d, n)).boxed(),
        file.clone().prop_map(|(d, n)| Op::Delete(d, n)).boxed(),
        (file.clone(), file).prop_map(|(a, b)| Op::Rename(a, b)).boxed(),
        (moved..DIRS.len(), 1..DIRS.len()).prop_map(|(a, b)| Op::RenameDir(a, b)).boxed(),
        (moved..DIRS.len(), 0..FRESH.len(), any::<bool>())
            .prop_map(|(a, b, back)| Op::MoveDir(a, b, back))
            .boxed(),
        (1..DIRS.len()).prop_map(Op::MakeDir).boxed(),
    ];
    if ignores {
        ops.push(
            (0..DIRS.len(), 0..PATTERNS.len(), any::<bool>())
                .prop_map(|(d, p, g)| Op::Ignore(d, p, g))
                .boxed(),
        );
    }
    proptest::strategy::Union::new(ops)
}

fn path(root: &Path, dir: usize, name: usize) -> PathBuf {
    root.join(DIRS[dir]).join(NAMES[name])
}

/// Applies `op` to the tree (a step that cannot be done, e.g. in a missing folder, is
/// skipped: the property holds whatever the tree).
fn apply(root: &Path, op: &Op, n: usize) {
    let _ = match *op {
        Op::Create(d, f) | Op::Modify(d, f) => std::fs::write(path(root, d, f), format!("{n}").repeat(n % 5)),
        Op::Delete(d, f) => std::fs::remove_file(path(root, d, f)),
        Op::Rename((d1, f1), (d2, f2)) => std::fs::rename(path(root, d1, f1), path(root, d2, f2)),
        Op::RenameDir(a, b) => std::fs::rename(root.join(DIRS[a]), root.join(DIRS[b])),
        Op::MoveDir(a, b, back) => {
            let (from, to) = (root.join(DIRS[a]), root.join(FRESH[b]));
            if back { std::fs::rename(to, from) } else { std::fs::rename(from, to) }
        }
        Op::Ignore(d, p, git) => {
            let name = if git { ".gitignore" } else { ".ignore" };
            std::fs::write(root.join(DIRS[d]).join(name), PATTERNS[p])
        }
        Op::MakeDir(d) => std::fs::create_dir_all(root.join(DIRS[d])),
    };
}

struct Tree {
    _dir: tempfile::TempDir,
    root: Root,
    /// The provider of the cold listings, which resolves the searched folders.
    provider: Provider,
    warm: Arc<Listings>,
    cold: Arc<Listings>,
    /// Settlings so far (each writes a file of its own, see [`Tree::settle`]), and the last
    /// file written in each folder.
    flushes: std::sync::Mutex<(usize, HashMap<PathBuf, PathBuf>)>,
}

fn tree(max_bytes: usize) -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    for d in DIRS {
        std::fs::create_dir_all(path.join(d)).unwrap();
        for name in NAMES {
            std::fs::write(path.join(d).join(name), name).unwrap();
        }
    }
    let root = RootDir::new(&path, None).unwrap();
    let config = ProviderConfig { fsync: false, ..Default::default() };
    let warm = Arc::new(Listings::for_provider(&Provider::new(ProviderConfig {
        max_search_cache_bytes: max_bytes,
        ..config.clone()
    })));
    let provider = Provider::new(ProviderConfig { max_search_cache_bytes: 0, ..config });
    let cold = Arc::new(Listings::for_provider(&provider));
    Tree { _dir: dir, root, provider, warm, cold, flushes: Default::default() }
}

impl Tree {
    fn resolve(&self, rel: &str) -> Option<crate::provider::Resolved> {
        let roots = [self.root.clone()];
        let scope = Scope { roots: &roots, cwd: self.root.path() };
        self.provider.resolve(if rel.is_empty() { "." } else { rel }, scope).ok().filter(|r| r.folder)
    }

    /// Lets the warm provider's watcher catch up with every change made so far to `rel`:
    /// writes a file there and waits until that change was handled (events of one watcher
    /// arrive in order). The file is new to each settling (the last one's goes): a late event
    /// of an earlier write must not pass for this one. It is written again every 100 ms while
    /// waiting: an event that came before the listing it would mark existed (the listing,
    /// walked after the change, already shows it) marks nothing, and a later one will.
    fn settle(&self, rel: &str) {
        let flush = {
            let mut flushes = self.flushes.lock().unwrap();
            let (n, last) = &mut *flushes;
            let flush = Path::new(rel).join(format!("flush{n}.txt"));
            *n += 1;
            if let Some(old) = last.insert(PathBuf::from(rel), flush.clone()) {
                // Gone already when an operation moved its folder.
                let _ = std::fs::remove_file(self.root.path().join(old));
            }
            flush
        };
        let started = Instant::now();
        let deadline = started + Duration::from_secs(10);
        let write = || {
            std::fs::write(self.root.path().join(&flush), started.elapsed().as_nanos().to_string()).unwrap()
        };
        write();
        let mut next_write = started + Duration::from_millis(100);
        while !self.warm.settled(&self.root, Path::new(rel), &flush) {
            let now = Instant::now();
            assert!(now < deadline, "the watcher never handled a change of {}", flush.display());
            if now >= next_write {
                write();
                next_write = now + Duration::from_millis(100);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The warm answer for `rel` equals a cold walk's.
    fn check(&self, rel: &str) {
        let Some(target) = self.resolve(rel) else { return };
        self.settle(rel);
        let warm = self.warm.list(&target, &|| false, None).unwrap();
        let cold = self.cold.list(&target, &|| false, None).unwrap();
        assert_eq!(warm.files, cold.files, "warm and cold listings of {rel:?} differ");
    }
}

#[test]
fn a_repeated_listing_is_warm_and_bounded() {
    let tree = tree(64 << 20);
    let target = tree.resolve("a").unwrap();
    let first = tree.warm.list(&target, &|| false, None).unwrap();
    assert_eq!(tree.warm.stats().0, 1);
    tree.settle("a");
    // A content change keeps the listing, with the new size.
    std::fs::write(tree.root.path().join("a/y.txt"), "longer now").unwrap();
    tree.settle("a");
    let second = tree.warm.list(&target, &|| false, None).unwrap();
    assert_eq!(tree.warm.stats().0, 1, "a content change keeps the listing");
    assert_ne!(first.files, second.files);
    assert_eq!(second.files, tree.cold.list(&target, &|| false, None).unwrap().files);
    // A stopped walk is not kept; forgetting drops.
    tree.warm.forget(&tree.root.path().join("a/new"));
    assert_eq!(tree.warm.stats().0, 0);
    assert!(tree.warm.list(&target, &|| true, None).unwrap().stopped);
    assert_eq!(tree.warm.stats().0, 0);
    tree.warm.list(&target, &|| false, None).unwrap();
    tree.warm.forget_all();
    assert_eq!(tree.warm.stats(), (0, 0));
    // A listing over the cap alone is never kept.
    let small = tree_with_cap(64);
    let target = small.resolve("").unwrap();
    small.warm.list(&target, &|| false, None).unwrap();
    assert_eq!(small.warm.stats(), (0, 0));
}

#[test]
fn only_changes_that_can_change_the_answer_drop_a_listing() {
    let tree = tree(64 << 20);
    let root = tree.root.path().to_path_buf();
    std::fs::create_dir_all(root.join("a/.git/objects")).unwrap();
    std::fs::create_dir_all(root.join("a/target/debug")).unwrap();
    std::fs::write(root.join("a/.gitignore"), "target/\n").unwrap();
    let target = tree.resolve("a").unwrap();
    // The first settle creates the flush file: list again once it exists.
    tree.settle("a");
    tree.warm.list(&target, &|| false, None).unwrap();
    tree.settle("a");
    assert_eq!(tree.warm.stats().0, 1);
    // Hidden and ignored folders are not watched; a file beside the searched folder on the
    // way from the root does not matter either.
    std::fs::write(root.join("a/.git/objects/pack"), "x").unwrap();
    std::fs::write(root.join("a/target/debug/build.o"), "x").unwrap();
    std::fs::create_dir(root.join("a/target/debug/deps")).unwrap();
    std::fs::write(root.join("beside.txt"), "x").unwrap();
    std::fs::write(root.join("c/x.rs"), "changed").unwrap();
    tree.settle("a");
    assert_eq!(tree.warm.stats().0, 1, "nothing that can change the listing happened");
    // An ignore file on the way does.
    std::fs::write(root.join(".ignore"), "*.txt\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tree.warm.stats().0 != 0 {
        assert!(Instant::now() < deadline, "an ignore file on the way kept the listing");
        std::thread::sleep(Duration::from_millis(1));
    }
    let warm = tree.warm.list(&target, &|| false, None).unwrap();
    assert_eq!(warm.files, tree.cold.list(&target, &|| false, None).unwrap().files);
    assert!(warm.files.iter().all(|f| f.rel.extension().is_none_or(|e| e != "txt")));
}

#[test]
fn a_change_of_git_info_exclude_drops_a_listing() {
    let tree = tree(64 << 20);
    let root = tree.root.path().to_path_buf();
    std::fs::create_dir_all(root.join("a/.git/info")).unwrap();
    std::fs::write(root.join("a/.git/info/exclude"), "").unwrap();
    std::fs::create_dir_all(root.join("a/b/.git")).unwrap();
    // The warm listing of `a` (checked against a cold walk): how many files end in `ext`.
    let count = |ext: &str| {
        let target = tree.resolve("a").unwrap();
        let warm = tree.warm.list(&target, &|| false, None).unwrap();
        assert_eq!(warm.files, tree.cold.list(&target, &|| false, None).unwrap().files);
        warm.files.iter().filter(|f| f.rel.extension().is_some_and(|e| e == ext)).count()
    };
    let kept = || {
        tree.settle("a");
        count("rs");
        tree.settle("a");
        assert_eq!(tree.warm.stats().0, 1);
    };
    let dropped = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while tree.warm.stats().0 != 0 {
            assert!(Instant::now() < deadline, "{what} kept the listing");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    // The searched folder's own `.git/info/exclude`.
    kept();
    let txt = count("txt");
    assert!(txt > 0);
    // Git writing its own files drops nothing.
    std::fs::write(root.join("a/.git/index"), "x").unwrap();
    std::fs::write(root.join("a/.git/info/refs"), "x").unwrap();
    tree.settle("a");
    assert_eq!(tree.warm.stats().0, 1, "git's own files are not ignore files");
    std::fs::write(root.join("a/.git/info/exclude"), "y.txt\n").unwrap();
    dropped("a change of the searched folder's .git/info/exclude");
    assert!(count("txt") < txt);
    // A walked folder's `.git` without `info`: an exclude made there drops the listing too.
    kept();
    let log = count("log");
    assert!(log > 0);
    std::fs::create_dir(root.join("a/b/.git/info")).unwrap();
    std::fs::write(root.join("a/b/.git/info/exclude"), "z.log\n").unwrap();
    dropped("an exclude made in a walked folder's .git");
    assert!(count("log") < log);
}

fn tree_with_cap(max_bytes: usize) -> Tree {
    tree(max_bytes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn warm_listings_equal_cold_walks(ops in proptest::collection::vec(op_of(1, true), 1..10)) {
        let tree = tree(64 << 20);
        for rel in SEARCHED {
            tree.check(rel);
        }
        for (n, op) in ops.iter().enumerate() {
            apply(tree.root.path(), op, n);
            for rel in SEARCHED {
                tree.check(rel);
            }
        }
    }

    /// Files and folders coming, going and changing are taken in by the kept listings, never by
    /// walking them again: both stay kept throughout, and answer as a cold walk. (The ignore
    /// files stay, and `a`, being searched, is never moved.)
    #[test]
    fn changes_are_taken_in_without_a_walk(ops in proptest::collection::vec(op_of(2, false), 1..12)) {
        let tree = tree(64 << 20);
        // A walk that saw an event (of the settling itself) is not kept: listed again then.
        let deadline = Instant::now() + Duration::from_secs(10);
        while tree.warm.stats().0 < SEARCHED.len() {
            prop_assert!(Instant::now() < deadline, "the listings were never kept");
            for rel in SEARCHED {
                tree.check(rel);
            }
        }
        for (n, op) in ops.iter().enumerate() {
            apply(tree.root.path(), op, n);
            for rel in SEARCHED {
                tree.settle(rel);
            }
            prop_assert_eq!(tree.warm.stats().0, SEARCHED.len(), "a listing was dropped after {:?}", op);
            for rel in SEARCHED {
                tree.check(rel);
            }
        }
    }
}

/// Builds every filter of `listing` (a build of another test's listing may be running: tried
/// again until this one went through).
pub(super) fn filled(listing: &crate::listing::Listing) -> Arc<Grams> {
    let grams = listing.grams.clone().expect("kept warm");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !grams.is_complete() {
        assert!(Instant::now() < deadline, "the filters were never built");
        grams.fill(&listing.root, &listing.files, 1 << 20);
        std::thread::sleep(Duration::from_millis(2));
    }
    grams
}

#[test]
fn a_full_cache_drops_the_filters_of_the_folder_searched_least_recently_first() {
    // What two listings and one listing's filters cost, measured on a roomy cache.
    let roomy = tree(64 << 20);
    let (a, c) = (roomy.resolve("a").unwrap(), roomy.resolve("c").unwrap());
    let listing_a = roomy.warm.list(&a, &|| false, None).unwrap();
    let listing_c = roomy.warm.list(&c, &|| false, None).unwrap();
    let listings = roomy.warm.stats().1;
    let (filters_a, filters_c) = (filled(&listing_a).bytes(), filled(&listing_c).bytes());
    assert!(filters_a > 0 && filters_c > 0);
    // Room for both listings and the filters of one of them, not of both.
    let cap = listings + filters_a.max(filters_c) + filters_a.min(filters_c) / 2;
    let tight = tree(cap);
    let (a, c) = (tight.resolve("a").unwrap(), tight.resolve("c").unwrap());
    let grams_a = filled(&tight.warm.list(&a, &|| false, None).unwrap());
    assert!(grams_a.bytes() > 0);
    // Searched later: its filters take the place of the older folder's, whose listing stays.
    let grams_c = filled(&tight.warm.list(&c, &|| false, None).unwrap());
    assert!(grams_c.bytes() > 0, "the newer search's filters were built");
    assert_eq!(grams_a.bytes(), 0, "the older folder lost its filters");
    assert_eq!(tight.warm.stats().0, 2, "both listings are kept");
    let needles = [vec![b"x.rs".to_vec()]];
    assert!(grams_a.must_read(&needles).iter().all(|&read| read), "searches there read every file");
    // Searched again, the older folder gets its filters back, and the other one loses them.
    let again = tight.warm.list(&a, &|| false, None).unwrap();
    assert!(Arc::ptr_eq(again.grams.as_ref().unwrap(), &grams_a));
    filled(&again);
    assert!(grams_a.bytes() > 0 && grams_c.bytes() == 0);
    assert!(tight.warm.stats().1 <= cap);
    // The answers are a cold walk's throughout.
    tight.check("a");
    tight.check("c");
}

#[test]
fn creates_deletes_and_renames_are_taken_in_with_the_filters_kept() {
    let tree = tree(64 << 20);
    let root = tree.root.path().to_path_buf();
    std::fs::write(root.join(".gitignore"), "*.log\ntarget/\n").unwrap();
    let all = tree.resolve("").unwrap();
    let listing = tree.warm.list(&all, &|| false, None).unwrap();
    let before = filled(&listing);
    assert!(before.bytes() > 0);
    // Files come, go and move; ignored, hidden and linked ones come too (none of them listed),
    // and an ignored folder with a file in it.
    std::fs::write(root.join("a/new.rs"), "fn fresh() {}").unwrap();
    std::fs::remove_file(root.join("c/x.rs")).unwrap();
    std::fs::rename(root.join("a/y.txt"), root.join("a/b/moved.txt")).unwrap();
    std::fs::write(root.join("a/new.log"), "ignored").unwrap();
    std::fs::write(root.join("a/.swap"), "hidden").unwrap();
    std::os::unix::fs::symlink(root.join("a/x.rs"), root.join("a/link.rs")).unwrap();
    std::fs::create_dir(root.join("a/target")).unwrap();
    std::fs::write(root.join("a/target/out.rs"), "built").unwrap();
    tree.settle("");
    assert_eq!(tree.warm.stats().0, 1, "nothing here needs a walk");
    let after = tree.warm.list(&all, &|| false, None).unwrap();
    assert_eq!(after.files, tree.cold.list(&all, &|| false, None).unwrap().files);
    let rels: Vec<_> = after.files.iter().map(|f| f.rel.to_str().unwrap()).collect();
    assert!(rels.contains(&"a/new.rs") && rels.contains(&"a/b/moved.txt") && !rels.contains(&"c/x.rs"));
    // The filters of the files that stayed moved with them: only what came (the settling's
    // file among it) must be read for a literal no file holds.
    let grams = after.grams.clone().unwrap();
    assert!(!Arc::ptr_eq(&grams, &before) && grams.bytes() > 0);
    assert!(before.must_read(&[vec![b"nowhere".to_vec()]]).iter().all(|&read| read), "the old ones read all");
    let must = grams.must_read(&[vec![b"nowhere".to_vec()]]);
    let read: Vec<&str> = rels.iter().zip(&must).filter(|(_, read)| **read).map(|(rel, _)| *rel).collect();
    assert_eq!(read, ["a/b/moved.txt", "a/new.rs", "flush0.txt"]);
    assert_eq!(tree.warm.stats().1, tree.warm.stats().1.min(64 << 20));
    // Folders coming, going and renamed: a new one is walked on its own (and watched: what
    // comes in it later is seen), one gone is taken out with its files and watches.
    let rels = |tree: &Tree| -> Vec<String> {
        let listing = tree.warm.list(&all, &|| false, None).unwrap();
        listing.files.iter().map(|f| f.rel.display().to_string()).collect()
    };
    std::fs::create_dir_all(root.join("a/fresh/deep")).unwrap();
    std::fs::write(root.join("a/fresh/inside.rs"), "f").unwrap();
    std::fs::write(root.join("a/fresh/deep/further.rs"), "f").unwrap();
    tree.check("");
    assert!(rels(&tree).contains(&"a/fresh/deep/further.rs".to_owned()));
    std::fs::write(root.join("a/fresh/deep/later.rs"), "l").unwrap();
    tree.check("");
    assert!(rels(&tree).contains(&"a/fresh/deep/later.rs".to_owned()));
    std::fs::rename(root.join("a/fresh"), root.join("c/moved")).unwrap();
    tree.check("");
    std::fs::write(root.join("c/moved/deep/after.rs"), "a").unwrap();
    tree.check("");
    let now = rels(&tree);
    assert!(
        now.contains(&"c/moved/deep/after.rs".to_owned()) && !now.iter().any(|r| r.starts_with("a/fresh"))
    );
    std::fs::remove_dir_all(root.join("a/b")).unwrap();
    tree.check("");
    assert!(!rels(&tree).iter().any(|r| r.starts_with("a/b/")));
    tree.settle("");
    assert_eq!(tree.warm.stats().0, 1, "taken in without a walk of the whole tree");
    let grams = tree.warm.list(&all, &|| false, None).unwrap().grams.unwrap();
    assert!(grams.bytes() > 0, "the filters of the files that stayed are kept");
}

#[test]
fn a_listing_that_outgrows_the_cache_is_dropped_and_answers_stay_right() {
    // What the listing of `a` costs, measured on a roomy cache (its filters are never built).
    let roomy = tree(64 << 20);
    roomy.warm.list(&roomy.resolve("a").unwrap(), &|| false, None).unwrap();
    let cost = roomy.warm.stats().1;
    let tight = tree(cost + 40);
    let a = tight.resolve("a").unwrap();
    tight.warm.list(&a, &|| false, None).unwrap();
    assert_eq!(tight.warm.stats(), (1, cost));
    // A file going gives its bytes back; a longer one coming takes more than is left.
    std::fs::remove_file(tight.root.path().join("a/y.txt")).unwrap();
    let flush = tight.root.path().join("a/flush.txt");
    std::fs::write(&flush, "0").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tight.warm.settled(&tight.root, Path::new("a"), Path::new("a/flush.txt")) {
        assert!(Instant::now() < deadline, "the create was never seen");
        std::thread::sleep(Duration::from_millis(1));
    }
    let smaller = tight.warm.list(&a, &|| false, None).unwrap();
    assert_eq!(smaller.files, tight.cold.list(&a, &|| false, None).unwrap().files);
    assert_eq!(tight.warm.stats().0, 1);
    assert!(tight.warm.stats().1 <= cost + 40);
    std::fs::write(tight.root.path().join(format!("a/{}.rs", "long".repeat(40))), "x").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let warm = tight.warm.list(&a, &|| false, None).unwrap();
        let cold = tight.cold.list(&a, &|| false, None).unwrap();
        if warm.files.len() == cold.files.len() {
            assert_eq!(warm.files, cold.files);
            break;
        }
        assert!(Instant::now() < deadline, "the long name never came");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(tight.warm.stats(), (0, 0), "over the cap: dropped, and not kept again");
}

#[test]
fn a_flood_of_changes_drops_the_listing_instead_of_queueing_them() {
    let tree = tree(64 << 20);
    let a = tree.resolve("a").unwrap();
    tree.warm.list(&a, &|| false, None).unwrap();
    tree.settle("a");
    tree.warm.list(&a, &|| false, None).unwrap();
    assert_eq!(tree.warm.stats().0, 1);
    for n in 0..=MAX_CHANGED {
        std::fs::write(tree.root.path().join(format!("a/many{n}.rs")), "x").unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while tree.warm.stats().0 != 0 {
        assert!(Instant::now() < deadline, "more changes than a listing holds kept it");
        std::thread::sleep(Duration::from_millis(1));
    }
    tree.check("a");
}

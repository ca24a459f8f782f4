//! Tests of a restarted daemon's listings: an index written by one set of listings, changed
//! while nothing ran, then validated by a fresh one, answers as a cold walk, file for file, and
//! keeps exactly the filters of the files whose bytes are as they were.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::Duration;

use proptest::prelude::*;

use crate::listing::Listings;
use crate::listing::grams::GramFilter;
use crate::listing::index::{IndexConfig, Indexes, RootIndex};
use crate::listing::stamp;
use crate::listing::warm::tests::filled;
use crate::provider::{Provider, ProviderConfig, Root, RootDir, Scope};

/// The racy window the tests run with: what they wrote is trusted once it is this old.
const RACY: Duration = Duration::from_millis(40);

fn short_racy_window() {
    static SET: Once = Once::new();
    SET.call_once(|| stamp::set_racy_ns(RACY.as_nanos() as i64));
}

/// Lets what was just written age past the racy window.
fn age() {
    std::thread::sleep(RACY * 3);
}

const DIRS: [&str; 4] = ["", "a", "a/b", "c"];
const NAMES: [&str; 4] = ["x.rs", "y.txt", "z.log", "w.md"];
const PATTERNS: [&str; 4] = ["*.log\n", "x.rs\n", "b/\n", "*.md\n!w.md\n"];
const FRESH: [&str; 2] = ["n", "a/m"];

#[derive(Debug, Clone)]
enum Op {
    Create(usize, usize),
    Delete(usize, usize),
    Rename((usize, usize), (usize, usize)),
    /// A folder of `DIRS` (not the root) renamed to a name of `FRESH`, or back.
    RenameDir(usize, usize, bool),
    /// The same size and modification time, other bytes.
    Rewrite(usize, usize),
    Ignore(usize, usize, bool),
}

fn op() -> impl Strategy<Value = Op> {
    let file = (0..DIRS.len(), 0..NAMES.len());
    prop_oneof![
        file.clone().prop_map(|(d, n)| Op::Create(d, n)),
        file.clone().prop_map(|(d, n)| Op::Delete(d, n)),
        (file.clone(), file.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        (1..DIRS.len(), 0..FRESH.len(), any::<bool>()).prop_map(|(d, f, back)| Op::RenameDir(d, f, back)),
        file.prop_map(|(d, n)| Op::Rewrite(d, n)),
        (0..DIRS.len(), 0..PATTERNS.len(), any::<bool>()).prop_map(|(d, p, g)| Op::Ignore(d, p, g)),
    ]
}

fn text(seed: usize) -> String {
    const WORDS: [&str; 6] = ["alpha", "beta", "gamma", "delta", "omega", "sigma"];
    (0..4).map(|i| format!("fn {}_{}() {{}}\n", WORDS[(seed + i) % 6], seed)).collect()
}

fn path(root: &Path, dir: usize, name: usize) -> PathBuf {
    root.join(DIRS[dir]).join(NAMES[name])
}

/// Applies `op` (a step that cannot be done is skipped: the property holds whatever the tree).
fn apply(root: &Path, op: &Op, n: usize) {
    let _ = match *op {
        Op::Create(d, f) => std::fs::write(path(root, d, f), text(n + 10)),
        Op::Delete(d, f) => std::fs::remove_file(path(root, d, f)),
        Op::Rename((d1, f1), (d2, f2)) => std::fs::rename(path(root, d1, f1), path(root, d2, f2)),
        Op::RenameDir(d, f, back) => {
            let (from, to) = (root.join(DIRS[d]), root.join(FRESH[f]));
            if back { std::fs::rename(to, from) } else { std::fs::rename(from, to) }
        }
        Op::Rewrite(d, f) => rewrite(&path(root, d, f)),
        Op::Ignore(d, p, git) => {
            std::fs::write(root.join(DIRS[d]).join(if git { ".gitignore" } else { ".ignore" }), PATTERNS[p])
        }
    };
}

/// Rewrites `file` with other bytes of the same size, and puts its modification time back:
/// only its change time tells.
fn rewrite(file: &Path) -> std::io::Result<()> {
    let meta = std::fs::metadata(file)?;
    let bytes = std::fs::read(file)?;
    let other: Vec<u8> = bytes.iter().map(|b| if b.is_ascii_lowercase() { b'q' } else { *b }).collect();
    std::fs::write(file, other)?;
    std::fs::File::options().write(true).open(file)?.set_modified(meta.modified()?)?;
    assert_eq!(std::fs::metadata(file)?.len(), meta.len());
    Ok(())
}

/// A tree, and where its index is kept.
struct Setup {
    _dir: tempfile::TempDir,
    root: Root,
    index: IndexConfig,
}

fn setup() -> Setup {
    short_racy_window();
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let path = base.join("root");
    for (i, d) in DIRS.iter().enumerate() {
        std::fs::create_dir_all(path.join(d)).unwrap();
        for (j, name) in NAMES.iter().enumerate() {
            std::fs::write(path.join(d).join(name), text(i * 4 + j)).unwrap();
        }
    }
    let root = RootDir::new(&path, None).unwrap();
    let index = IndexConfig { dir: base.join("index"), max_bytes: 1 << 20, fsync: false };
    Setup { _dir: dir, root, index }
}

impl Setup {
    /// A fresh daemon's listings, keeping their index in the setup's folder.
    fn listings(&self) -> (Arc<Listings>, Provider) {
        let provider = Provider::new(ProviderConfig { fsync: false, ..Default::default() });
        let listings = Arc::new(Listings::for_provider(&provider));
        listings.use_index(Arc::new(
            Indexes::open(&self.index, crate::provider::private::Private::none()).unwrap(),
        ));
        (listings, provider)
    }

    fn list(&self, listings: &Listings, provider: &Provider) -> crate::listing::Listing {
        self.list_dating(listings, provider, None)
    }

    /// The listing as a search that dates the files `dated` accepts (a glob) gets it.
    fn list_dating(
        &self,
        listings: &Listings,
        provider: &Provider,
        dated: Option<&crate::listing::Dated<'_>>,
    ) -> crate::listing::Listing {
        let roots = [self.root.clone()];
        let scope = Scope { roots: &roots, cwd: self.root.path() };
        let target = provider.resolve(".", scope).unwrap();
        listings.list(&target, &|| false, dated).unwrap()
    }

    /// A daemon's life: the root listed and its filters built, then its index written at its
    /// stop. The filters, by path.
    fn first_life(&self) -> Vec<(PathBuf, GramFilter)> {
        age();
        let (listings, provider) = self.listings();
        let listing = self.list(&listings, &provider);
        let grams = filled(&listing);
        // Written after the build, or at the stop.
        listings.persist_all();
        let written =
            listings.index_roots().iter().any(|(root, known)| root == self.root.path() && known.bytes > 0);
        assert!(written, "the index was written");
        let filters = grams.read_filters(|filters| filters.to_vec()).unwrap();
        listing
            .files
            .iter()
            .map(|f| f.rel.to_path_buf())
            .zip(filters)
            .filter_map(|(p, f)| Some((p, f?)))
            .collect()
    }

    /// The next daemon's first listing, once the root was named, and what it says of the index;
    /// `glob`: its first search is a glob's, dating every file (the grep's follows).
    fn next_life_after(&self, glob: bool) -> (crate::listing::Listing, RootIndex) {
        let (listings, provider) = self.listings();
        listings.prepare(&self.root);
        if glob {
            let listing = self.list_dating(&listings, &provider, Some(&|_| true));
            assert_eq!(listing.files.to_vec(), self.cold(), "the glob's first listing");
        }
        let listing = self.list(&listings, &provider);
        let roots = listings.index_roots();
        let known = roots.into_iter().find(|(root, _)| root == self.root.path()).map(|(_, known)| known);
        (listing, known.unwrap_or_default())
    }

    fn next_life(&self) -> (crate::listing::Listing, RootIndex) {
        self.next_life_after(false)
    }

    /// A cold walk's files.
    fn cold(&self) -> Vec<crate::listing::Listed> {
        let provider = Provider::new(ProviderConfig { max_search_cache_bytes: 0, ..Default::default() });
        let listings = Listings::for_provider(&provider);
        self.list(&listings, &provider).files.to_vec()
    }
}

/// Every filter `listing` holds is exactly the filter of its file's bytes now.
fn filters_hold(setup: &Setup, listing: &crate::listing::Listing) -> usize {
    let grams = listing.grams.as_ref().expect("kept warm");
    let filters = grams.read_filters(|filters| filters.to_vec()).unwrap();
    let mut held = 0;
    for (file, filter) in listing.files.iter().zip(filters) {
        let Some(filter) = filter else { continue };
        let bytes = std::fs::read(setup.root.path().join(&file.rel)).unwrap();
        assert_eq!(
            filter.bits(),
            GramFilter::of(&bytes).bits(),
            "the filter of {} is stale",
            file.rel.display()
        );
        held += 1;
    }
    held
}

#[test]
fn an_unchanged_tree_is_served_from_its_index_and_a_same_size_rewrite_is_read_again() {
    let setup = setup();
    let before = setup.first_life();
    assert_eq!(before.len(), DIRS.len() * NAMES.len());
    let (listing, known) = setup.next_life();
    assert!(known.loaded && known.bytes > 0, "{known:?}");
    assert_eq!(known.reread, 0);
    assert_eq!(listing.files.to_vec(), setup.cold());
    assert_eq!(filters_hold(&setup, &listing), before.len(), "every filter was kept");
    // Its size and modification time put back, a rewritten file is read again all the same.
    let (listings, provider) = setup.listings();
    listings.prepare(&setup.root);
    let listing = setup.list(&listings, &provider);
    filled(&listing);
    assert_eq!(listings.persist_all(), 0, "nothing changed: nothing to write");
    age();
    rewrite(&setup.root.path().join("a/x.rs")).unwrap();
    let (listing, known) = setup.next_life();
    assert!(known.loaded, "{known:?}");
    assert_eq!(known.reread, 1, "{known:?}");
    assert_eq!(filters_hold(&setup, &listing), before.len() - 1);
    let at = listing.files.iter().position(|f| &*f.rel == Path::new("a/x.rs")).unwrap();
    assert!(!listing.grams.as_ref().unwrap().has(at), "its filter is built again");
}

#[test]
fn an_index_written_right_after_a_change_trusts_nothing_of_it() {
    let setup = setup();
    age();
    let (listings, provider) = setup.listings();
    let listing = setup.list(&listings, &provider);
    filled(&listing);
    // Changed within the racy window before the filters' build: its stamp is not trusted.
    rewrite(&setup.root.path().join("c/y.txt")).unwrap();
    setup.list(&listings, &provider);
    let listing = setup.list(&listings, &provider);
    filled(&listing);
    listings.persist_all();
    drop(listings);
    let (listing, _) = setup.next_life();
    assert_eq!(listing.files.to_vec(), setup.cold());
    filters_hold(&setup, &listing);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever happens to the tree while no daemon runs (files created, deleted and renamed,
    /// a folder renamed, a rewrite keeping size and modification time, a new ignore rule), the
    /// next daemon's first listing, validated from the index, is a cold walk's, file for file,
    /// and every filter it keeps is of its file's bytes now.
    #[test]
    fn a_validated_index_answers_as_a_cold_walk(ops in proptest::collection::vec(op(), 1..8), glob in any::<bool>()) {
        let setup = setup();
        setup.first_life();
        for (n, op) in ops.iter().enumerate() {
            apply(setup.root.path(), op, n);
        }
        let (listing, known) = setup.next_life_after(glob);
        prop_assert!(known.loaded, "the index was not used: {:?}", known);
        prop_assert_eq!(listing.files.to_vec(), setup.cold());
        filters_hold(&setup, &listing);
    }
}

//! Tests of the walk: what it lists is what ripgrep lists, in component order, beneath the root.

use super::*;
use proptest::prelude::*;
use std::os::unix::fs::symlink;

/// Folders of a generated tree (hidden ones among them), parents before children.
const DIRS: [&str; 8] = ["", "a", "a/b", "a/b/c", ".h", "a/.hd", "d", "d/e"];
const FILES: [&str; 6] = ["x.rs", "y.txt", ".z", "w.log", "keep.log", "c"];
/// Lines of ignore files: globs of every kind, whitelists, anchors, folders only, comments.
const LINES: [&str; 18] = [
    "*.log",
    "!keep.log",
    "b/",
    "/x.rs",
    "**/e",
    "*.txt",
    ".h",
    "!.z",
    "a/b/*.rs",
    "c",
    "#x.rs",
    "",
    "!/d/",
    "!*.rs",
    "y.*",
    "e/",
    "!c",
    "/a/b",
];

/// One folder of a generated tree: which files it holds, and the lines of its `.gitignore`,
/// `.ignore` and `.git/info/exclude` (none when `None`).
#[derive(Debug, Clone)]
struct Folder {
    files: Vec<bool>,
    ignore_files: [Option<Vec<usize>>; 3],
}

fn folder() -> impl Strategy<Value = Folder> {
    let lines = || proptest::option::weighted(0.3, proptest::collection::vec(0..LINES.len(), 1..4));
    (proptest::collection::vec(any::<bool>(), FILES.len()), lines(), lines(), lines())
        .prop_map(|(files, a, b, c)| Folder { files, ignore_files: [a, b, c] })
}

fn make(root: &Path, tree: &[Folder]) {
    for dir in DIRS {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    for (dir, folder) in DIRS.iter().zip(tree) {
        let dir = root.join(dir);
        for (name, _) in FILES.iter().zip(&folder.files).filter(|(_, there)| **there) {
            // A file named as a folder of the tree (`c` in `a/b`) is left out there.
            if !dir.join(name).is_dir() {
                std::fs::write(dir.join(name), name).unwrap();
            }
        }
        for (file, lines) in [".gitignore", ".ignore", ".git/info/exclude"].iter().zip(&folder.ignore_files) {
            if let Some(lines) = lines {
                let text: String = lines.iter().map(|&i| format!("{}\n", LINES[i])).collect();
                let path = dir.join(file);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
        }
    }
}

/// What ripgrep's walker lists under `root/rel`, relative to `root`.
fn ripgrep(root: &Path, rel: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ignore::WalkBuilder::new(root.join(rel))
        .hidden(true)
        .parents(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .build()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .map(|entry| entry.path().strip_prefix(root).unwrap().to_path_buf())
        .collect();
    files.sort();
    files
}

fn ours(root: &Path, rel: &str) -> Vec<PathBuf> {
    let handle = RootDir::new(root, None).unwrap();
    let walked = walk(&handle, Path::new(rel), &|| false, None, None).unwrap();
    assert!(!walked.truncated && !walked.stopped);
    walked.files.into_iter().map(|f| f.rel.into_path_buf()).collect()
}

/// The folders above a test tree hold no ignore files (ripgrep would read them with
/// `parents(true)`; the walk never looks above its root).
fn nothing_above(root: &Path) {
    for above in root.ancestors().skip(1) {
        for name in [".gitignore", ".ignore", ".git"] {
            assert!(
                !above.join(name).exists(),
                "{} exists: the comparison would differ",
                above.join(name).display()
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// On trees of ordinary files, the walk lists exactly what ripgrep's walker lists, for a
    /// search of the root or of any folder in it.
    #[test]
    fn lists_what_ripgrep_lists(tree in proptest::collection::vec(folder(), DIRS.len()), searched in 0..DIRS.len()) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        nothing_above(&root);
        make(&root, &tree);
        let rel = DIRS[searched];
        prop_assert_eq!(ours(&root, rel), ripgrep(&root, rel), "searching {:?}", rel);
    }
}

proptest! {
    /// The byte order with `/` lowest is the order of the components, on paths whose
    /// names share prefixes and hold bytes around `/` (`-`, `.`, `0`).
    #[test]
    fn path_order_is_component_order(
        paths in proptest::collection::vec(proptest::collection::vec("[a.0-]{1,3}|abcdefgh[x.-]{0,2}", 1..5), 2..12)
    ) {
        let mut paths: Vec<PathBuf> = paths
            .into_iter()
            .map(|names| names.into_iter().filter(|n| n != "." && n != "..").collect())
            .filter(|p: &PathBuf| !p.as_os_str().is_empty())
            .collect();
        let mut by_components = paths.clone();
        by_components.sort();
        paths.sort_by(|a, b| path_order(a, b));
        prop_assert_eq!(paths, by_components);
    }
}

#[test]
fn paths_sort_by_their_components() {
    let mut paths: Vec<PathBuf> =
        ["a-c", "a/b", "a/b/c", "a.rs", "a", "ab/x", "a/b-c", "a/bc"].iter().map(PathBuf::from).collect();
    let mut by_components = paths.clone();
    by_components.sort();
    paths.sort_by(|a, b| path_order(a, b));
    assert_eq!(paths, by_components);
}

#[test]
fn a_folder_swapped_for_a_link_is_not_entered_and_bounds_hold() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/secret.rs"), "s").unwrap();
    std::fs::write(root.join("a/b/in.rs"), "i").unwrap();
    let handle = RootDir::new(&root, None).unwrap();
    // Swapped after resolution: the searched folder itself is a link now.
    std::fs::rename(root.join("a/b"), root.join("a/b.real")).unwrap();
    symlink(base.join("outside"), root.join("a/b")).unwrap();
    let err = walk(&handle, Path::new("a/b"), &|| false, None, None).unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(rustix::io::Errno::NOTDIR.raw_os_error()),
        "never walked through a link"
    );
    let walked = walk(&handle, Path::new("a"), &|| false, None, None).unwrap();
    let rels: Vec<_> = walked.files.iter().map(|f| f.rel.to_path_buf()).collect();
    assert_eq!(rels, [PathBuf::from("a/b.real/in.rs")]);
    // A stop flag that says stop ends the walk at once.
    assert!(walk(&handle, Path::new(""), &|| true, None, None).unwrap().stopped);
    // Deeper than the folders a walk keeps open: still every file, beneath the root.
    let deep: PathBuf = (0..(MAX_HELD_FOLDERS + 10)).map(|i| format!("d{i}")).collect();
    std::fs::create_dir_all(root.join(&deep)).unwrap();
    for i in 0..3 {
        std::fs::create_dir_all(root.join(format!("w{i}"))).unwrap();
        std::fs::write(root.join(format!("w{i}/f.rs")), "f").unwrap();
    }
    std::fs::write(root.join(&deep).join("leaf.rs"), "l").unwrap();
    let walked = walk(&handle, Path::new(""), &|| false, None, None).unwrap();
    assert!(walked.files.iter().any(|f| *f.rel == *deep.join("leaf.rs")));
    assert_eq!(walked.files.len(), 5);
}

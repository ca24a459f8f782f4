//! Tests of path resolution: lexical placement, the walk beneath root handles, symlinks,
//! fences and the daemon's private names.
#![cfg(test)]

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::beneath::{Root, RootDir};
use super::resolve::*;
use super::{Fingerprint, ProviderError};

#[test]
fn display_reads_a_plain_tail_as_strip_prefix_does() {
    let cwds = ["/srv/app", "/srv/app/", "/", "/srv/app/.", "/srv/a.b", "srv/app", ""];
    let tails = ["", "x", "x/y.rs", "./x", "x/./y", "x//y", "x/", "x/.", "..", "x/../y", ".hidden", "é/ü"];
    for cwd in cwds {
        for tail in tails {
            for path in [format!("{cwd}/{tail}"), format!("{cwd}{tail}"), format!("/other/{tail}")] {
                let (path, cwd) = (Path::new(&path), Path::new(cwd));
                let expected = match path.strip_prefix(cwd) {
                    Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
                    _ => path.display().to_string(),
                };
                assert_eq!(display(path, cwd), expected, "{path:?} in {cwd:?}");
            }
        }
    }
    let bytes = std::ffi::OsStr::from_bytes(b"/srv/app/bad\xff\xfename");
    assert_eq!(display(Path::new(bytes), Path::new("/srv/app")), "bad\u{fffd}\u{fffd}name");
}
use std::os::unix::fs::symlink;

struct Fixture {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

fn roots(f: &Fixture) -> Vec<Root> {
    vec![RootDir::new(&f.root, None).unwrap()]
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("app");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(base.join("app-evil")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "x").unwrap();
    std::fs::write(base.join("secret"), "s").unwrap();
    symlink(base.join("secret"), root.join("to-secret")).unwrap();
    symlink(base.join("app-evil"), root.join("evil-dir")).unwrap();
    symlink(base.join("nowhere/new"), root.join("dangling-out")).unwrap();
    symlink("src/lib.rs", root.join("inside-link")).unwrap();
    symlink(root.join("src/new.rs"), root.join("dangling-in")).unwrap();
    symlink("loop", root.join("loop")).unwrap();
    Fixture { _dir: dir, base, root }
}

#[test]
fn a_regular_file_found_by_resolution_carries_its_fingerprint() {
    let f = fixture();
    let roots = roots(&f);
    let scope = Scope { roots: &roots, cwd: &f.root };
    let lib = std::fs::metadata(f.root.join("src/lib.rs")).unwrap();
    let expected = Some(Found { fingerprint: Fingerprint::of(&lib), links: 1 });
    for raw in ["src/lib.rs", "./src/./lib.rs", "inside-link", "src/../src/lib.rs"] {
        assert_eq!(resolve(raw, scope).unwrap().file, expected, "{raw}");
    }
    // A folder, a path ending in `..`, a missing file: nothing to reuse.
    for raw in ["src", "src/lib.rs/..", "src/..", "src/new.rs", "dangling-in"] {
        assert_eq!(resolve(raw, scope).map(|r| r.file).unwrap_or(None), None, "{raw}");
    }
}

/// The failures resolution can answer, by name.
fn label(err: &ProviderError) -> &'static str {
    match err {
        ProviderError::InvalidPath { .. } => "InvalidPath",
        ProviderError::OutsideRoot { .. } => "OutsideRoot",
        ProviderError::NotFound { .. } => "NotFound",
        _ => "other",
    }
}

fn check(f: &Fixture, raw: &str) -> Result<(String, bool), String> {
    let roots = roots(f);
    let scope = Scope { roots: &roots, cwd: &f.root };
    match resolve(raw, scope) {
        Ok(r) => Ok((r.display, r.exists)),
        Err(e) => Err(label(&e).to_owned()),
    }
}

#[test]
fn inside_paths_resolve_with_display_relative_to_cwd() {
    let f = fixture();
    assert_eq!(check(&f, "src/lib.rs"), Ok(("src/lib.rs".into(), true)));
    assert_eq!(check(&f, "./src/../src/lib.rs"), Ok(("src/lib.rs".into(), true)));
    assert_eq!(check(&f, &f.root.join("src/lib.rs").display().to_string()), Ok(("src/lib.rs".into(), true)));
    assert_eq!(check(&f, "inside-link"), Ok(("src/lib.rs".into(), true)));
    assert_eq!(check(&f, "new/dir/file.rs"), Ok(("new/dir/file.rs".into(), false)));
    assert_eq!(check(&f, "dangling-in"), Ok(("src/new.rs".into(), false)));
    assert_eq!(check(&f, "new/../src/lib.rs"), Ok(("src/lib.rs".into(), true)));
}

#[test]
fn escapes_are_refused() {
    let f = fixture();
    let outside = Err("OutsideRoot".to_owned());
    assert_eq!(check(&f, "../secret"), outside);
    assert_eq!(check(&f, "to-secret"), outside);
    assert_eq!(check(&f, "evil-dir/new.txt"), outside);
    assert_eq!(check(&f, "dangling-out"), outside);
    assert_eq!(check(&f, "new/../../secret"), outside);
    assert_eq!(check(&f, "../app-evil/x"), outside, "a string-prefix check would let this in");
    assert_eq!(check(&f, &f.base.join("app-evil").display().to_string()), outside);
    assert_eq!(check(&f, "/etc/passwd"), outside);
    assert_eq!(check(&f, "/"), outside);
}

#[test]
fn bad_paths_are_invalid_arguments() {
    let f = fixture();
    assert_eq!(check(&f, ""), Err("InvalidPath".into()));
    assert_eq!(check(&f, "a\0b"), Err("InvalidPath".into()));
    assert_eq!(check(&f, "loop"), Err("InvalidPath".into()));
    assert_eq!(check(&f, "src/lib.rs/x"), Err("NotFound".into()));
    assert_eq!(check(&f, "src/lib.rs/.."), Err("InvalidPath".into()));
    assert_eq!(check(&f, &"a/".repeat(2100)), Err("InvalidPath".into()));
    assert_eq!(check(&f, &"x".repeat(256)), Err("InvalidPath".into()));
    assert_eq!(check(&f, &"x".repeat(255)), Ok(("x".repeat(255), false)));
}

#[test]
fn a_fenced_name_is_never_looked_at_nor_what_lies_beneath_it() {
    let f = fixture();
    std::fs::create_dir_all(f.root.join("src/keys")).unwrap();
    std::fs::write(f.root.join("src/keys/k.pem"), "k").unwrap();
    symlink(f.root.join("src/keys"), f.root.join("to-keys")).unwrap();
    symlink(f.base.join("secret"), f.root.join("src/keys/out")).unwrap();
    let roots = roots(&f);
    let scope = Scope { roots: &roots, cwd: &f.root };
    let fence = |rel: &Path| rel == Path::new("src/keys");
    let fenced = |raw: &str| match resolve_fenced(raw, scope, Some(&fence)) {
        Err(ProviderError::Fenced { path, rel }) => Some((path, rel)),
        _ => None,
    };
    // Existing or not, below a file or not, through a symlink or not, out of the roots or
    // not: the same answer, the name the fence refused.
    for raw in [
        "src/keys",
        "src/keys/k.pem",
        "src/keys/missing",
        "src/keys/k.pem/x",
        "src/keys/k.pem/..",
        "src/keys/out",
        "to-keys/k.pem",
        "to-keys/missing",
        "src/../src/keys/k.pem",
    ] {
        assert_eq!(fenced(raw), Some((raw.to_owned(), PathBuf::from("src/keys"))), "{raw}");
    }
    assert_eq!(resolve_fenced("src/lib.rs", scope, Some(&fence)).unwrap().rel, Path::new("src/lib.rs"));
    assert_eq!(resolve("src/keys/k.pem", scope).unwrap().rel, Path::new("src/keys/k.pem"), "no fence");
}

#[test]
fn refusals_name_nothing_outside() {
    let f = fixture();
    // Whether the outside name exists or not, and whatever is below it, the answer is the
    // same, and it carries only the path as given.
    for raw in ["../secret", "../secret/x", "../missing", "../missing/x", "to-secret/x", "evil-dir/../secret"]
    {
        let roots = roots(&f);
        let err = resolve(raw, Scope { roots: &roots, cwd: &f.root }).unwrap_err();
        assert_eq!(label(&err), "OutsideRoot", "{raw}");
        let text = err.to_string();
        assert!(!text.contains(&f.base.display().to_string()), "{raw}: {text}");
    }
}

#[test]
fn links_between_roots_and_dotdot_between_nested_roots() {
    let f = fixture();
    let other = f.base.join("other");
    std::fs::create_dir_all(other.join("lib")).unwrap();
    std::fs::write(other.join("lib/x.rs"), "x").unwrap();
    symlink(other.join("lib"), f.root.join("to-other")).unwrap();
    let roots = vec![RootDir::new(&f.root, None).unwrap(), RootDir::new(&other, None).unwrap()];
    let scope = Scope { roots: &roots, cwd: &f.root };
    let r = resolve("to-other/x.rs", scope).unwrap();
    assert_eq!((r.path.clone(), r.exists, r.dir.path()), (other.join("lib/x.rs"), true, other.as_path()));
    assert!(r.file.is_some());
    // `..` from the other root's top is outside both.
    assert_eq!(label(&resolve("to-other/../../secret", scope).unwrap_err()), "OutsideRoot");
    // Nested roots: `..` from the inner one lands in the outer one.
    let roots = vec![RootDir::new(&f.base, None).unwrap(), RootDir::new(&f.root, None).unwrap()];
    let scope = Scope { roots: &roots, cwd: &f.root };
    let r = resolve("../secret", scope).unwrap();
    assert_eq!((r.path.as_path(), r.dir.path()), (f.base.join("secret").as_path(), f.base.as_path()));
}

/// A model of the rules on an in-memory tree: what resolution must answer, whatever the
/// tree. Paths are root-relative component lists; `None` in the answer means refused.
mod model {
    use std::collections::BTreeMap;

    #[derive(Debug, Clone)]
    pub enum Node {
        Dir,
        File,
        Link(String),
    }

    /// (root-relative path, exists) or the refusal's code.
    pub fn resolve(
        tree: &BTreeMap<Vec<String>, Node>,
        root: &str,
        raw: &str,
    ) -> Result<(Vec<String>, bool), &'static str> {
        let mut queue: std::collections::VecDeque<String> =
            raw.split('/').filter(|c| !c.is_empty()).map(str::to_owned).collect();
        let mut at: Vec<String> = Vec::new();
        let mut missing = 0usize;
        let mut leaf = false;
        let mut links = 0;
        while let Some(name) = queue.pop_front() {
            match name.as_str() {
                "." => continue,
                ".." => {
                    if leaf {
                        return Err("InvalidPath");
                    }
                    if at.pop().is_none() {
                        return Err("OutsideRoot");
                    }
                    missing = missing.saturating_sub(1);
                    continue;
                }
                _ => {}
            }
            if leaf {
                return Err("NotFound");
            }
            if missing > 0 {
                at.push(name);
                missing += 1;
                continue;
            }
            let mut next = at.clone();
            next.push(name);
            match tree.get(&next) {
                None => {
                    at = next;
                    missing = 1;
                }
                Some(Node::Dir) => at = next,
                Some(Node::File) => {
                    at = next;
                    leaf = true;
                }
                Some(Node::Link(target)) => {
                    links += 1;
                    if links > 40 {
                        return Err("InvalidPath");
                    }
                    let mut parts: Vec<String> =
                        target.split('/').filter(|c| !c.is_empty()).map(str::to_owned).collect();
                    if let Some(rest) = target.strip_prefix('/') {
                        // Absolute: only into the root, by its leading plain components.
                        let prefix: Vec<&str> = root.split('/').filter(|c| !c.is_empty()).collect();
                        let head: Vec<&str> = rest
                            .split('/')
                            .filter(|c| !c.is_empty())
                            .take_while(|c| *c != "." && *c != "..")
                            .collect();
                        if head.len() < prefix.len() || head[..prefix.len()] != prefix[..] {
                            return Err("OutsideRoot");
                        }
                        parts.drain(..prefix.len());
                        at.clear();
                    }
                    for part in parts.into_iter().rev() {
                        queue.push_front(part);
                    }
                }
            }
        }
        Ok((at, missing == 0))
    }
}

mod walk_matches_the_model {
    use super::model::{self, Node};
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const NAMES: [&str; 3] = ["a", "b", "c"];

    fn name() -> impl Strategy<Value = String> {
        prop::sample::select(&NAMES[..]).prop_map(str::to_owned)
    }

    fn part() -> impl Strategy<Value = String> {
        prop_oneof![4 => name(), 1 => Just("..".to_owned()), 1 => Just(".".to_owned())]
    }

    fn rel() -> impl Strategy<Value = String> {
        prop::collection::vec(part(), 1..5).prop_map(|p| p.join("/"))
    }

    /// What an entry of the generated tree is; link targets use `ROOT` and `OUT` for the
    /// root's and an outside folder's absolute paths.
    #[derive(Debug, Clone)]
    enum Kind {
        Dir,
        File,
        Link(String),
    }

    fn kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            3 => Just(Kind::Dir),
            2 => Just(Kind::File),
            2 => rel().prop_map(Kind::Link),
            1 => rel().prop_map(|r| Kind::Link(format!("ROOT/{r}"))),
            1 => rel().prop_map(|r| Kind::Link(format!("OUT/{r}"))),
        ]
    }

    fn tree() -> impl Strategy<Value = Vec<(Vec<String>, Kind)>> {
        prop::collection::vec((prop::collection::vec(name(), 1..4), kind()), 0..14)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn resolution_answers_what_the_model_does(entries in tree(), queries in prop::collection::vec(rel(), 1..8)) {
            let dir = tempfile::tempdir().expect("temp dir");
            let base = std::fs::canonicalize(dir.path()).expect("canonical");
            let root = base.join("root");
            let out = base.join("out");
            std::fs::create_dir_all(&root).expect("root");
            for n in NAMES {
                std::fs::create_dir_all(out.join(n).join(n)).expect("outside");
                std::fs::write(out.join(format!("{n}.txt")), "outside").expect("outside");
            }
            let mut model: BTreeMap<Vec<String>, Node> = BTreeMap::new();
            let expand = |t: &str| t.replacen("ROOT", &root.display().to_string(), 1).replacen("OUT", &out.display().to_string(), 1);
            for (path, kind) in &entries {
                // Only where every parent is a folder of the model (else the entry is skipped).
                if (1..path.len()).any(|i| !matches!(model.get(&path[..i]), Some(Node::Dir))) || model.contains_key(path) {
                    continue;
                }
                let on_disk = path.iter().fold(root.clone(), |p, c| p.join(c));
                match kind {
                    Kind::Dir => { std::fs::create_dir(&on_disk).expect("dir"); model.insert(path.clone(), Node::Dir); }
                    Kind::File => { std::fs::write(&on_disk, "x").expect("file"); model.insert(path.clone(), Node::File); }
                    Kind::Link(t) => {
                        let target = expand(t);
                        std::os::unix::fs::symlink(&target, &on_disk).expect("link");
                        model.insert(path.clone(), Node::Link(target));
                    }
                }
            }
            let roots = [RootDir::new(&root, None).expect("root handle")];
            let scope = Scope { roots: &roots, cwd: &root };
            for raw in &queries {
                let expected = model::resolve(&model, &root.display().to_string(), raw);
                let got = resolve(raw, scope).map(|r| (r.rel.iter().map(|c| c.to_string_lossy().into_owned()).collect::<Vec<_>>(), r.exists)).map_err(|e| label(&e));
                prop_assert_eq!(&got, &expected, "{} in {:?}", raw, model);
                if let Ok((rel, true)) = &got {
                    prop_assert!(root.join(rel.join("/")).symlink_metadata().is_ok());
                }
            }
        }
    }
}

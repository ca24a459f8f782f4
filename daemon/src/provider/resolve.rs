//! Path resolution inside a session's roots: relative paths against the cwd, `..` and symlinks
//! resolved component by component (dangling links included), then component-wise containment
//! in a root — never a string-prefix check, so `/srv/app-evil` is not inside `/srv/app`.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::{Fingerprint, ProviderError};

/// Most symlinks followed while resolving one path (Linux's own limit is 40).
const MAX_SYMLINKS: u32 = 40;

/// A path resolved inside one of the session's roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute, with no `.`, `..` or symlink among its existing components.
    pub path: PathBuf,
    /// Relative to the cwd when inside it, else absolute: for people and models.
    pub display: String,
    /// Whether something exists at `path` (checked during resolution).
    pub exists: bool,
    /// The root that contains it.
    pub root: PathBuf,
    /// The regular file resolution found at `path` (from the `lstat` of its last component),
    /// so that the provider's warm read needs no second `stat`; `None` for anything else, or
    /// when the path was not resolved here.
    pub file: Option<Found>,
}

/// A regular file as resolution saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Its fingerprint then.
    pub fingerprint: Fingerprint,
    /// Its hard links then.
    pub links: u64,
}

/// The sandbox a path is resolved in.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// Canonical roots.
    pub roots: &'a [PathBuf],
    /// Canonical cwd (inside a root).
    pub cwd: &'a Path,
}

/// How a path shows in texts: relative to `cwd` when inside it, else absolute.
pub fn display(path: &Path, cwd: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// Resolves `raw` in `scope`. The path may not exist yet; its nearest existing ancestor decides
/// where it lies.
pub fn resolve(raw: &str, scope: Scope<'_>) -> Result<Resolved, ProviderError> {
    if raw.is_empty() {
        return Err(ProviderError::InvalidPath { path: raw.to_owned(), why: "the path is empty".into() });
    }
    if raw.contains('\0') {
        return Err(ProviderError::InvalidPath {
            path: raw.to_owned(),
            why: "the path contains a NUL byte".into(),
        });
    }
    let given = Path::new(raw);
    let absolute = if given.is_absolute() { given.to_path_buf() } else { scope.cwd.join(given) };
    let (path, exists, file) = walk(&absolute).map_err(|source| match source.kind() {
        ErrorKind::PermissionDenied => ProviderError::PermissionDenied { path: raw.to_owned() },
        ErrorKind::NotADirectory => ProviderError::NotFound {
            path: raw.to_owned(),
            why: Some("a parent of it is a file, not a folder".into()),
        },
        _ if source.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            ProviderError::InvalidPath {
                path: raw.to_owned(),
                why: "too many levels of symbolic links".into(),
            }
        }
        _ => ProviderError::Io { path: raw.to_owned(), op: "resolve", source },
    })?;
    let Some(root) = scope.roots.iter().find(|root| path.starts_with(root)) else {
        return Err(ProviderError::OutsideRoot { path: raw.to_owned(), resolved: path });
    };
    Ok(Resolved { display: display(&path, scope.cwd), root: root.clone(), exists, path, file })
}

/// Resolves every component of an absolute path; returns the result, whether it exists, and
/// the regular file found there.
fn walk(absolute: &Path) -> std::io::Result<(PathBuf, bool, Option<Found>)> {
    let mut queue: VecDeque<OsString> = VecDeque::new();
    push_front(&mut queue, absolute);
    let mut resolved = PathBuf::from("/");
    // How many trailing components of `resolved` do not exist (none of them can be links).
    let mut missing = 0usize;
    let mut links = 0u32;
    // What the last `lstat` found at `resolved`, while it still names that.
    let mut last: Option<Found> = None;
    while let Some(name) = queue.pop_front() {
        match name.to_str() {
            Some(".") => continue,
            Some("..") => {
                last = None;
                resolved.pop();
                missing = missing.saturating_sub(1);
                continue;
            }
            _ => {}
        }
        if missing > 0 {
            resolved.push(&name);
            missing += 1;
            continue;
        }
        let candidate = resolved.join(&name);
        last = None;
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(std::io::Error::from_raw_os_error(rustix::io::Errno::LOOP.raw_os_error()));
                }
                let target = std::fs::read_link(&candidate)?;
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                push_front(&mut queue, &target);
            }
            Ok(meta) => {
                if meta.is_file() {
                    last = Some(Found { fingerprint: Fingerprint::of(&meta), links: meta.nlink() });
                }
                resolved = candidate;
            }
            Err(err) if err.kind() == ErrorKind::NotFound => {
                resolved = candidate;
                missing = 1;
            }
            Err(err) => return Err(err),
        }
    }
    Ok((resolved, missing == 0, last.filter(|_| missing == 0)))
}

/// Puts a path's components at the front of the queue, in order (the root is implied).
fn push_front(queue: &mut VecDeque<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    for part in parts.into_iter().rev() {
        queue.push_front(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _dir: tempfile::TempDir,
        base: PathBuf,
        root: PathBuf,
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
        let roots = [f.root.clone()];
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

    fn check(f: &Fixture, raw: &str) -> Result<(String, bool), String> {
        let roots = [f.root.clone()];
        let scope = Scope { roots: &roots, cwd: &f.root };
        match resolve(raw, scope) {
            Ok(r) => Ok((r.display, r.exists)),
            Err(e) => Err(e.code().as_str().to_owned()),
        }
    }

    #[test]
    fn inside_paths_resolve_with_display_relative_to_cwd() {
        let f = fixture();
        assert_eq!(check(&f, "src/lib.rs"), Ok(("src/lib.rs".into(), true)));
        assert_eq!(check(&f, "./src/../src/lib.rs"), Ok(("src/lib.rs".into(), true)));
        assert_eq!(
            check(&f, &f.root.join("src/lib.rs").display().to_string()),
            Ok(("src/lib.rs".into(), true))
        );
        assert_eq!(check(&f, "inside-link"), Ok(("src/lib.rs".into(), true)));
        assert_eq!(check(&f, "new/dir/file.rs"), Ok(("new/dir/file.rs".into(), false)));
        assert_eq!(check(&f, "dangling-in"), Ok(("src/new.rs".into(), false)));
        assert_eq!(check(&f, "new/../src/lib.rs"), Ok(("src/lib.rs".into(), true)));
    }

    #[test]
    fn escapes_are_refused() {
        let f = fixture();
        let outside = Err("FS_OUTSIDE_ROOT".to_owned());
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
        assert_eq!(check(&f, ""), Err("FS_INVALID_ARGUMENT".into()));
        assert_eq!(check(&f, "a\0b"), Err("FS_INVALID_ARGUMENT".into()));
        assert_eq!(check(&f, "loop"), Err("FS_INVALID_ARGUMENT".into()));
        assert_eq!(check(&f, "src/lib.rs/x"), Err("FS_NOT_FOUND".into()));
    }
}

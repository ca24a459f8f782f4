//! A file's project root for a server: the nearest folder above it holding one of the server's
//! root markers, the first marker of its list that is found anywhere on the way winning, looked
//! for beneath the handle of the session root holding the file and never above that root. With
//! no marker found, the session root itself.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::config::Marker;
use crate::provider::RootDir;

/// Most bytes of a marker file read to look for the text it must hold.
const MARKER_PEEK: u64 = 256 * 1024;

/// The project root of `path` (canonical, beneath `root`) for `markers`.
pub fn project_root(root: &RootDir, path: &Path, markers: &[Marker]) -> PathBuf {
    let Some(rel) = root.relative(path) else { return root.path().to_path_buf() };
    let folders: Vec<&Path> = rel.parent().map(|p| p.ancestors().collect()).unwrap_or_default();
    for marker in markers {
        for folder in &folders {
            if holds(root, &folder.join(&marker.file), marker.holding.as_deref()) {
                return if folder.as_os_str().is_empty() {
                    root.path().to_path_buf()
                } else {
                    root.path().join(folder)
                };
            }
        }
    }
    root.path().to_path_buf()
}

/// Whether the regular file `rel` beneath `root` exists (and holds `text`, when given).
fn holds(root: &RootDir, rel: &Path, text: Option<&str>) -> bool {
    let Some(text) = text else {
        return root.open_path(rel).and_then(|f| f.metadata()).is_ok_and(|m| m.is_file());
    };
    let Ok(file) = root.open_read(rel) else { return false };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut bytes = Vec::new();
    if file.take(MARKER_PEEK).read_to_end(&mut bytes).is_err() {
        return false;
    }
    memchr::memmem::find(&bytes, text.as_bytes()).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_marker_found_wins_and_nothing_above_the_root_counts() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(root.join("ws/crates/a/src")).unwrap();
        std::fs::write(base.join("Cargo.toml"), "[workspace]\n").unwrap();
        std::fs::write(root.join("ws/Cargo.toml"), "[workspace]\nmembers = [\"crates/a\"]\n").unwrap();
        std::fs::write(root.join("ws/crates/a/Cargo.toml"), "[package]\n").unwrap();
        let handle = RootDir::new(&root, None).unwrap();
        let rust = [
            Marker { file: "Cargo.toml".into(), holding: Some("[workspace]".into()) },
            Marker { file: "Cargo.toml".into(), holding: None },
        ];
        let file = root.join("ws/crates/a/src/lib.rs");
        assert_eq!(project_root(&handle, &file, &rust), root.join("ws"), "the workspace, not the crate");
        assert_eq!(project_root(&handle, &file, &rust[1..]), root.join("ws/crates/a"));
        std::fs::write(root.join("ws/Cargo.toml"), "[package]\n").unwrap();
        assert_eq!(project_root(&handle, &file, &rust), root.join("ws/crates/a"), "never above the root");
        let none = [Marker { file: "go.mod".into(), holding: None }];
        assert_eq!(project_root(&handle, &file, &none), root, "no marker: the session root");
        // A marker that is a link to a file outside is not looked through.
        std::fs::create_dir_all(root.join("p")).unwrap();
        std::os::unix::fs::symlink(base.join("Cargo.toml"), root.join("p/Cargo.toml")).unwrap();
        assert_eq!(project_root(&handle, &root.join("p/x.rs"), &rust), root);
    }
}

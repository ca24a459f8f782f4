//! Tidy checks that keep the architecture's invariants true: the tools layer never names the
//! provider, and every Rust file says what lives in it.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target" || n.to_string_lossy().starts_with('.')) {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("daemon/ has a parent").to_path_buf()
}

#[test]
fn the_tools_layer_never_names_the_provider() {
    let mut files = Vec::new();
    rust_files(&workspace().join("daemon/src/tools"), &mut files);
    assert!(!files.is_empty());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (n, line) in text.lines().enumerate() {
            assert!(
                !line.contains("provider"),
                "{}:{}: the tools layer must go through the file context, not the provider:\n{line}",
                file.display(),
                n + 1
            );
        }
    }
}

#[test]
fn every_rust_file_starts_with_a_module_doc_line() {
    let mut files = Vec::new();
    for top in ["protocol", "daemon", "client", "tests"] {
        rust_files(&workspace().join(top), &mut files);
    }
    assert!(files.len() > 10);
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        assert!(
            text.starts_with("//!"),
            "{} does not start with a `//!` line saying what lives there",
            file.display()
        );
    }
}

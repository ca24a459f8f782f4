//! Tidy checks that keep the architecture's invariants true: neither the tools layer nor rpc/
//! (the `fs/*` escape hatch included) names the provider, and every Rust file says what lives
//! in it.

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

/// Fails when a file under `dir` has a code line naming the provider.
fn never_names_the_provider(dir: &str, layer: &str) {
    let mut files = Vec::new();
    rust_files(&workspace().join(dir), &mut files);
    assert!(!files.is_empty());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !code.contains("provider") && !code.contains("Provider"),
                "{}:{}: {layer} must go through the file context, not the provider:\n{line}",
                file.display(),
                n + 1
            );
        }
    }
}

#[test]
fn the_tools_layer_never_names_the_provider() {
    never_names_the_provider("daemon/src/tools", "the tools layer");
}

#[test]
fn rpc_never_names_the_provider() {
    never_names_the_provider("daemon/src/rpc", "rpc/ (the fs/* escape hatch included)");
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

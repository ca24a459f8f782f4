//! Tidy checks that keep the invariants of docs/architecture.md true where a text check can see
//! them: which layer may name which (provider, context, rpc, session, tools, protocol), where
//! `unsafe` may live and that each block says why it is sound, who builds a write `Expectation`,
//! and that every Rust file says what lives in it.

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

/// The Rust files at `paths` (files or folders, relative to the workspace).
fn sources(paths: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for path in paths {
        let path = workspace().join(path);
        assert!(path.exists(), "{} does not exist: did the tree move? Update this test", path.display());
        if path.is_file() {
            files.push(path);
        } else {
            rust_files(&path, &mut files);
        }
    }
    assert!(!files.is_empty(), "no Rust files under {paths:?}: did the tree move? Update this test");
    files
}

/// Each line of `text` without its `//` comment (doc comments included), numbered from 1.
/// String literals are kept: a path spelled in a string is still a crossing worth a look.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(n, line)| (n + 1, line.split("//").next().unwrap_or("")))
}

/// Whether `code` names `word` as a whole identifier or path segment start (`crate::provider`,
/// `ProviderError` and `provider::x` do; `id_provider` and `RandomIntegerIdProvider` do not).
fn names(code: &str, word: &str) -> bool {
    code.match_indices(word)
        .any(|(at, _)| !code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_'))
}

/// Every place under `paths` where a code line names one of `words`.
fn crossings(paths: &[&str], words: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for file in sources(paths) {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (n, code) in code_lines(&text) {
            for word in words.iter().filter(|w| names(code, w)) {
                let shown = file.strip_prefix(workspace()).unwrap_or(&file).display().to_string();
                found.push(format!("{shown}:{n}: names `{word}`: {}", code.trim()));
            }
        }
    }
    found
}

fn assert_none(found: Vec<String>, rule: &str) {
    assert!(found.is_empty(), "{rule}\n{}", found.join("\n"));
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert!(names("use crate::provider::Provider;", "provider"));
    assert!(names("fn f(e: ProviderError)", "Provider"));
    assert!(!names("id_provider: RandomIntegerIdProvider", "provider"));
    assert!(!names("id_provider: RandomIntegerIdProvider", "Provider"));
    assert!(names("let v: serde_json::Value;", "serde_json"));
    assert_eq!(
        code_lines("a // provider\n/// provider docs").map(|(_, c)| c).collect::<Vec<_>>(),
        ["a ", ""]
    );
}

#[test]
fn the_provider_knows_no_session_json_or_wire() {
    assert_none(
        crossings(
            &["daemon/src/provider"],
            &["session::", "context::", "rpc::", "tools::", "watch::", "serde_json", "filectx_protocol"],
        ),
        "provider/ knows nothing about sessions, the layers above it, JSON or the wire:",
    );
}

#[test]
fn the_file_context_knows_no_json_or_wire() {
    assert_none(
        crossings(
            &["daemon/src/context"],
            &["serde_json", "filectx_protocol", "rpc::", "tools::", "session::"],
        ),
        "context/ knows nothing about JSON, the wire or the layers above it (rpc/ maps its errors):",
    );
}

#[test]
fn nothing_above_the_context_names_the_provider() {
    assert_none(
        crossings(
            &[
                "daemon/src/rpc",
                "daemon/src/tools",
                "daemon/src/transport",
                "daemon/src/session",
                "daemon/src/gate",
                "daemon/src/server.rs",
                "daemon/src/main.rs",
                "daemon/src/fuzzing.rs",
            ],
            &["provider::", "crate::provider", "filectx_daemon::provider"],
        ),
        "layers above the file context go through it (context::Files, FileContext, Unrecorded, and \
         the value types it hands on under their own names), never to the provider:",
    );
}

#[test]
fn only_rpc_turns_typed_errors_into_wire_codes() {
    assert_none(
        crossings(
            &[
                "daemon/src/provider",
                "daemon/src/context",
                "daemon/src/tools",
                "daemon/src/session",
                "daemon/src/gate",
                "daemon/src/watch.rs",
            ],
            &["FsErrorCode", "FsErrorData"],
        ),
        "typed errors meet `FS_*` codes once, in rpc/error.rs:",
    );
}

#[test]
fn only_the_context_builds_write_expectations() {
    let everywhere_else: Vec<String> =
        crossings(&["daemon/src", "tests", "client/rust/src"], &["Expectation::"])
            .into_iter()
            .filter(|hit| !hit.starts_with("daemon/src/context/") && !hit.starts_with("daemon/src/provider/"))
            .collect();
    assert_none(everywhere_else, "only the file context turns an observation into a write `Expectation`:");
}

#[test]
fn the_protocol_crate_does_no_io() {
    assert_none(
        crossings(&["protocol/src"], &["std::fs", "std::net", "std::os::unix::net", "tokio::", "File::"]),
        "protocol/ is the wire contract and does no IO:",
    );
}

/// Where docs/architecture.md says `unsafe` may live.
const UNSAFE_ALLOWED: [&str; 2] = ["daemon/src/provider/mmap.rs", "daemon/src/memory.rs"];

#[test]
fn unsafe_lives_only_where_the_readme_says_and_says_why() {
    let mut found = Vec::new();
    for file in sources(&["protocol", "daemon", "client", "tests"]) {
        let shown = file.strip_prefix(workspace()).unwrap_or(&file).display().to_string();
        if file.ends_with("tidy.rs") {
            continue; // this file spells the words it looks for
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        let lines: Vec<&str> = text.lines().collect();
        for (n, code) in code_lines(&text) {
            let is_unsafe =
                ["unsafe {", "unsafe fn", "unsafe impl", "unsafe extern"].iter().any(|w| names(code, w));
            if !is_unsafe {
                continue;
            }
            if !UNSAFE_ALLOWED.contains(&shown.as_str()) {
                found.push(format!("{shown}:{n}: `unsafe` outside {UNSAFE_ALLOWED:?}: {}", code.trim()));
                continue;
            }
            // The `// SAFETY:` comment sits on the lines just above (a statement may start a line
            // or two before the block it holds).
            let above = &lines[n.saturating_sub(12)..n];
            if !above.iter().any(|l| l.contains("SAFETY:")) {
                found.push(format!("{shown}:{n}: `unsafe` without a `// SAFETY:` comment above it"));
            }
        }
    }
    assert_none(found, "unsafe code:");
}

#[test]
fn every_rust_file_starts_with_a_module_doc_line() {
    let files = sources(&["protocol", "daemon", "client", "tests"]);
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

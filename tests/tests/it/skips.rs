//! The accounting of skipped tests: a Rust test that calls [`skip`] is recorded with its name
//! and reason, and the last lines of `tests/run` (printed by `tests/summary`) name it, take it
//! off cargo's passed count (where it shows as passed), count the skips node:test or pytest
//! counted beyond the record, and fail under `FILECTX_REQUIRE_ALL_TESTS=1` (as `.ci/run` sets),
//! with "all tests: N passed, M failed" still the last line.

use std::path::Path;
use std::process::Command;

use filectx_tests::skip::{SKIPPED_LOG_ENV, skip};
use filectx_tests::test_name;

/// Set when this binary runs [`a_skipped_test_is_named_and_fails_a_run_that_requires_all`] again
/// to be the skipped test.
const PROBE_ENV: &str = "FILECTX_TEST_SKIP_PROBE";

/// What the skipped run of this binary says.
const REASON: &str = "the probe of skips.rs skips on purpose";

/// `tests/summary` over the logs in `logs`, with `FILECTX_REQUIRE_ALL_TESTS` set to `require`:
/// its exit code and its output.
fn summary(logs: &Path, require: &str) -> (Option<i32>, String) {
    summary_failed(logs, require, &[])
}

/// [`summary`] told that the parts `failed` failed.
fn summary_failed(logs: &Path, require: &str, failed: &[&str]) -> (Option<i32>, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("summary");
    let out = Command::new("bash")
        .arg(script)
        .arg(logs)
        .args(failed)
        .env("FILECTX_REQUIRE_ALL_TESTS", require)
        .output()
        .unwrap();
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn a_skipped_test_is_named_and_fails_a_run_that_requires_all() {
    if std::env::var_os(PROBE_ENV).is_some() {
        // This binary run again, below: the skipped test.
        skip(REASON);
        return;
    }
    let logs = tempfile::tempdir().unwrap();
    let record = logs.path().join("skipped");
    let name = test_name(module_path!(), "a_skipped_test_is_named_and_fails_a_run_that_requires_all");
    let run = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name])
        .env(PROBE_ENV, "1")
        .env(SKIPPED_LOG_ENV, &record)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{stdout}\n{stderr}");
    // cargo counts it as passed; stderr and the record say it was skipped, and why.
    assert!(stdout.contains("test result: ok. 1 passed; 0 failed"), "{stdout}");
    assert!(stderr.contains(&format!("skipped filectx-tests {name}: {REASON}\n")), "{stderr}");
    let line = format!("rust filectx-tests {name}: {REASON}");
    assert_eq!(std::fs::read_to_string(&record).unwrap(), format!("{line}\n"));

    // The other parts' output as their runners print it: a TypeScript skip recorded and one that
    // bypassed the record, a recorded Python skip, a recorded harness skip; a Rust binary with 9
    // tests that passed.
    std::fs::write(
        logs.path().join("rust"),
        format!("{stdout}test result: ok. 9 passed; 0 failed; 0 ignored\n"),
    )
    .unwrap();
    std::fs::write(logs.path().join("ts"), "# tests 5\n# pass 3\n# fail 0\n# skipped 2\n").unwrap();
    std::fs::write(logs.path().join("py"), "4 passed, 1 skipped in 0.25s\n").unwrap();
    std::fs::write(logs.path().join("harness"), "# tests 2\n# pass 1\n# fail 0\n# skipped 1\n").unwrap();
    let mut other = std::fs::OpenOptions::new().append(true).open(&record).unwrap();
    std::io::Write::write_all(
        &mut other,
        b"typescript @filectx/client a gate test: no gates here\npython filectx tests/test_x.py::test_y: no journal here\n\
          harness filectx-harness a server test: no server here\n",
    )
    .unwrap();

    let named = format!(
        "skipped: 5 tests, counted neither passed nor failed:\n  \
         harness filectx-harness a server test: no server here\n  \
         python filectx tests/test_x.py::test_y: no journal here\n  \
         {line}\n  \
         typescript @filectx/client a gate test: no gates here\n  \
         typescript: 1 more skipped test with no reason recorded (see its output above)\n"
    );
    let counts = "rust: 9 passed, 0 failed, 1 skipped; typescript: 3 passed, 0 failed, 2 skipped; \
                  python: 4 passed, 0 failed, 1 skipped; mcp sdk: 0 passed, 0 failed, 0 skipped; \
                  harness: 1 passed, 0 failed, 1 skipped\n";
    assert_eq!(
        summary(logs.path(), "0"),
        (Some(0), format!("{named}{counts}all tests: 17 passed, 0 failed\n"))
    );
    assert_eq!(
        summary(logs.path(), "1"),
        (
            Some(1),
            format!(
                "{named}FILECTX_REQUIRE_ALL_TESTS=1: every test must run here, so the 5 skipped count as \
                 failed\n{counts}failed: skipped\nall tests: 17 passed, 5 failed\n"
            )
        )
    );

    // Nothing skipped: nothing named, and the requirement holds.
    std::fs::write(&record, "").unwrap();
    std::fs::write(logs.path().join("ts"), "# pass 3\n# fail 0\n# skipped 0\n").unwrap();
    std::fs::write(logs.path().join("py"), "4 passed in 0.25s\n").unwrap();
    std::fs::write(logs.path().join("harness"), "# pass 2\n# fail 0\n# skipped 0\n").unwrap();
    let (code, out) = summary(logs.path(), "1");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.ends_with("harness: 2 passed, 0 failed, 0 skipped\nall tests: 19 passed, 0 failed\n"),
        "{out}"
    );
    assert!(!out.contains("skipped:"), "{out}");
}

#[test]
fn a_failed_install_of_the_language_servers_counts_as_one_failure() {
    // The Rust tests that need them were skipped (recorded) and the others passed: the run fails
    // all the same, and the count says so.
    let logs = tempfile::tempdir().unwrap();
    let skipped = "rust filectx-tests real_lsp::basedpyright_reports_a_type_error: it is missing\n";
    std::fs::write(logs.path().join("skipped"), skipped).unwrap();
    std::fs::write(logs.path().join("rust"), "test result: ok. 5 passed; 0 failed; 0 ignored\n").unwrap();
    let (code, out) = summary_failed(logs.path(), "0", &["lsp-servers"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("rust: 4 passed, 0 failed, 1 skipped;"), "{out}");
    assert!(out.ends_with("failed: lsp-servers\nall tests: 4 passed, 1 failed\n"), "{out}");
}

//! The `filectxd` binary's command line: help that explains every flag, usage errors.

use std::process::Command;

fn filectxd(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_filectxd")).args(args).output().expect("running filectxd")
}

#[test]
fn help_explains_every_flag_and_the_exit_status() {
    let out = filectxd(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "--socket",
        "FILECTX_SOCKET",
        "--log-level",
        "RUST_LOG",
        "--max-connections",
        "--max-frame-bytes",
        "--max-batch",
        "--max-concurrent-requests",
        "--max-queued-messages",
        "--shutdown-grace",
        "--max-edit-bytes",
        "--lock-timeout",
        "--no-fsync",
        "XDG_RUNTIME_DIR",
        "SIGTERM",
        "Exit status",
    ] {
        assert!(help.contains(needle), "--help does not mention {needle}:\n{help}");
    }
}

#[test]
fn bad_flags_are_usage_errors() {
    let out = filectxd(&["--max-connections", "0"]);
    assert_eq!(out.status.code(), Some(2));
    // A value clap cannot check is refused when settings are merged, naming the key.
    let out = filectxd(&["--log-level", "no=such=filter"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("log_level"));
}

#[test]
fn version_is_printed() {
    let out = filectxd(&["--version"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("filectxd "));
}

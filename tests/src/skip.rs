//! The one way a Rust test is skipped: [`skip`] says why on stderr and appends the test's name
//! and the reason to the file [`SKIPPED_LOG_ENV`] names, from which `tests/run` counts and names
//! the skipped tests, takes them off the passed count, and (under `FILECTX_REQUIRE_ALL_TESTS=1`,
//! as `.ci/run` sets) fails. libtest has no runtime skip: a test that calls [`skip`] returns at
//! once and shows as passed in cargo's own count; the record is what tells it apart.
//!
//! Also [`can_play_another_user`], the one decision on the tests that play another local user
//! (uid/gid [`NOBODY`]: an impostor daemon, a spy on staging files, a peer of another uid), which
//! only root may do. The same file is the module `skip` of `filectx_tests` and of the client's
//! test binary (`client/rust/tests/it`).

use std::io::Write as _;

/// The uid and gid of the other local user these tests play (`nobody`).
pub const NOBODY: u32 = 65534;

/// Names the file (set by `tests/run`) where every skipped test appends one line:
/// `<language> <package> <test>: <reason>`.
pub const SKIPPED_LOG_ENV: &str = "FILECTX_SKIPPED_LOG";

/// Skips the calling test, which must return right after: says so on stderr (uncaptured, so a
/// plain `cargo test` shows it), and appends the test's name (the name of its thread, as libtest
/// gives it) and `reason` to the [`SKIPPED_LOG_ENV`] file when that is set. `reason` says what
/// is missing and how to get it (e.g. "vim is not installed (apt-get install vim)").
///
/// # Panics
///
/// When the record cannot be written: the count of skipped tests would be wrong.
pub fn skip(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("an unnamed test");
    let package = env!("CARGO_PKG_NAME");
    // One line per test, whatever the reason holds.
    let reason = reason.replace(['\n', '\r'], " ");
    // Straight to the process's stderr, past libtest's capture of `eprintln!`.
    let _ = writeln!(std::io::stderr(), "skipped {package} {test}: {reason}");
    if let Some(log) = std::env::var_os(SKIPPED_LOG_ENV) {
        // One write of one line in append mode: lines of tests running at once do not mix.
        let line = format!("rust {package} {test}: {reason}\n");
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!("cannot record the skipped test {test} in {}: {e}", std::path::Path::new(&log).display());
        }
    }
}

/// Whether this process may play another local user, that is whether it runs as root. When it
/// may not, the calling test is [`skip`]ped (and returns at once on `false`).
pub fn can_play_another_user() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    skip(&format!("it plays another local user (uid {NOBODY}), which needs root; run the tests as root"));
    false
}

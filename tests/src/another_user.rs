//! The tests that play another local user (uid/gid [`NOBODY`]: an impostor daemon, a spy on
//! staging files, a peer of another uid) start a child as that user or give it a file, which
//! only root may do. [`can_play_another_user`] decides that in one place for every Rust test:
//! as root (CI) it says yes and the test runs; otherwise the test is skipped, said on stderr
//! and recorded in the file [`SKIPPED_LOG_ENV`] names, from which `tests/run` prints how many
//! were skipped (and, under `FILECTX_REQUIRE_ALL_TESTS=1`, fails). The same file is the module
//! `another_user` of `filectx_tests` and of the client's test binary (`client/rust/tests/it`).

use std::io::Write as _;

/// The uid and gid of the other local user these tests play (`nobody`).
pub const NOBODY: u32 = 65534;

/// Names the file (set by `tests/run`) where every test skipped for want of root appends one
/// line: `<language> <package> <test>`.
pub const SKIPPED_LOG_ENV: &str = "FILECTX_SKIPPED_LOG";

/// Whether this process may play another local user, that is whether it runs as root. When it
/// may not, the calling test is skipped: this says so on stderr (uncaptured), appends the test's name (the
/// name of its thread, as libtest gives it) to the [`SKIPPED_LOG_ENV`] file when that is set,
/// and returns `false`, upon which the test returns at once. libtest has no runtime skip, so
/// such a test shows as passed; the record is what counts it.
///
/// # Panics
///
/// When the record cannot be written: the count of skipped tests would be wrong.
pub fn can_play_another_user() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("an unnamed test");
    let package = env!("CARGO_PKG_NAME");
    // Straight to the process's stderr, past libtest's capture of `eprintln!`: a plain `cargo
    // test` shows the line although the test passes.
    let _ = writeln!(
        std::io::stderr(),
        "skipped {package} {test}: it plays another local user (uid {NOBODY}), which needs root"
    );
    if let Some(log) = std::env::var_os(SKIPPED_LOG_ENV) {
        // One write of one line in append mode: lines of tests running at once do not mix.
        let line = format!("rust {package} {test}\n");
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!("cannot record the skipped test {test} in {}: {e}", std::path::Path::new(&log).display());
        }
    }
    false
}

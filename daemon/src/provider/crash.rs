//! The crash points tests kill the daemon at (feature `failpoints`), and the errors test fail
//! points ask for by name: below every write, which marks its steps with them.

/// Test builds (`failpoints`): a point inside a write where a test can kill the daemon. When
/// the fail point `name` is configured (`FILECTX_FAILPOINTS=name=return`), the daemon sends
/// itself SIGKILL right there: no unwinding, no cleanup, as in a crash or an OOM kill.
macro_rules! crash_point {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name, |_| $crate::provider::crash::die($name))
    };
}
pub(crate) use crash_point;

/// Whether fail points were configured at start-up (see [`arm`]).
#[cfg(feature = "failpoints")]
static ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks the fail points as configured, so that code shaped only for them (a write split in
/// two, to die halfway) runs; without it a test build writes like a release build.
#[cfg(feature = "failpoints")]
pub fn arm_crash_points() {
    ARMED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// See [`arm`].
#[cfg(feature = "failpoints")]
pub fn armed() -> bool {
    ARMED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The error a test's fail point asks for by name (`return(EDQUOT)`; ENOSPC when unnamed).
#[cfg(feature = "failpoints")]
pub fn errno_named(name: Option<String>) -> std::io::Error {
    let errno = match name.as_deref().map(str::trim) {
        Some("EDQUOT") => libc::EDQUOT,
        Some("EIO") => libc::EIO,
        Some("EOPNOTSUPP") => libc::EOPNOTSUPP,
        _ => libc::ENOSPC,
    };
    std::io::Error::from_raw_os_error(errno)
}

/// Kills this process with SIGKILL (see [`crash_point!`]).
#[cfg(feature = "failpoints")]
pub fn die(point: &str) -> ! {
    eprintln!("filectxd: crash point {point}: SIGKILL");
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    loop {
        std::thread::park();
    }
}

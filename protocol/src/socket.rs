//! Where the daemon's socket lives by default (pure: the caller supplies the environment).

use std::path::{Path, PathBuf};

/// Environment variable that overrides the socket path for both the daemon and the CLI.
pub const SOCKET_ENV: &str = "FILECTX_SOCKET";

/// File name of the socket inside its folder.
pub const SOCKET_FILE_NAME: &str = "filectx.sock";

/// The default socket path: `$XDG_RUNTIME_DIR/filectx.sock`, or `/tmp/filectx-$UID/filectx.sock`
/// when `XDG_RUNTIME_DIR` is unset, empty or not absolute.
pub fn default_socket_path(xdg_runtime_dir: Option<&Path>, uid: u32) -> PathBuf {
    match xdg_runtime_dir {
        Some(dir) if dir.is_absolute() => dir.join(SOCKET_FILE_NAME),
        _ => PathBuf::from(format!("/tmp/filectx-{uid}")).join(SOCKET_FILE_NAME),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_dir_wins_and_fallback_is_per_uid() {
        assert_eq!(
            default_socket_path(Some(Path::new("/run/user/1000")), 1000),
            PathBuf::from("/run/user/1000/filectx.sock")
        );
        assert_eq!(default_socket_path(None, 1000), PathBuf::from("/tmp/filectx-1000/filectx.sock"));
        assert_eq!(
            default_socket_path(Some(Path::new("relative")), 7),
            PathBuf::from("/tmp/filectx-7/filectx.sock")
        );
    }
}

//! Binding the daemon's socket safely: a private folder, a lock file held for the daemon's life
//! (one daemon per socket path), stale-socket recovery, mode 0600, and the peer-uid check every
//! accepted connection must pass.
//!
//! Order matters: the lock is taken before the socket path is touched, so a second daemon
//! never unlinks a live daemon's socket; a socket file left by a crashed daemon (whose lock
//! died with it) is removed and re-bound. The lock file itself is never deleted: deleting it
//! would let two daemons hold locks on two different inodes of the same name.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use fs2::FileExt;

/// Why the daemon could not take its socket.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BindError {
    /// Another daemon holds the lock for this socket path.
    #[error(
        "another filectxd is already serving {socket}{}; stop it first or pick another --socket",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    AlreadyRunning {
        /// The contested socket path.
        socket: PathBuf,
        /// The holder's pid, as it wrote it into the lock file.
        pid: Option<u32>,
    },
    /// The socket's folder is usable by other users, or is not ours.
    #[error("refusing to use {dir}: {why}")]
    UnsafeFolder {
        /// The folder.
        dir: PathBuf,
        /// What is wrong with it, and how to fix it.
        why: String,
    },
    /// Something other than a socket sits at the socket path.
    #[error("{path} exists and is not a socket; refusing to remove it")]
    NotASocket {
        /// The socket path.
        path: PathBuf,
    },
    /// The socket path has no parent folder.
    #[error("socket path {0} has no parent folder")]
    NoParent(PathBuf),
    /// A filesystem operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BindError {
    let path = path.to_owned();
    move |source| BindError::Io { what, path, source }
}

/// A bound socket: the listener, plus what must live as long as the daemon.
#[derive(Debug)]
pub struct Bound {
    /// The listening socket (non-blocking, ready for `tokio::net::UnixListener::from_std`).
    pub listener: UnixListener,
    /// Removes the socket file and releases the lock when dropped.
    pub guard: SocketGuard,
}

/// Holds the daemon's lock for its socket path; on drop, removes the socket file it bound
/// (if the file is still the one it bound) and then releases the lock.
#[derive(Debug)]
pub struct SocketGuard {
    socket: PathBuf,
    socket_ino: u64,
    /// Holding the open, flocked file is what keeps the lock.
    _lock: File,
}

impl SocketGuard {
    /// The socket path this guard owns.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        match std::fs::symlink_metadata(&self.socket) {
            Ok(meta) if meta.ino() == self.socket_ino => {
                if let Err(err) = std::fs::remove_file(&self.socket) {
                    tracing::warn!(socket = %self.socket.display(), %err, "could not remove the socket file");
                }
            }
            _ => {}
        }
    }
}

/// How strict to be about the socket's folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolderPolicy {
    /// The folder must belong to us and be closed to group and others (the `/tmp` fallback,
    /// where another user could have created it first).
    Private,
    /// Use an existing folder as it is (the caller chose it); create missing ones 0700.
    AsGiven,
}

/// Creates the socket's folder if needed and checks it against `policy`.
fn prepare_folder(dir: &Path, policy: FolderPolicy) -> Result<(), BindError> {
    if !dir.exists() {
        DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io("cannot create folder", dir))?;
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io("cannot inspect folder", dir))?;
    if policy == FolderPolicy::Private {
        let uid = rustix::process::geteuid().as_raw();
        if !meta.is_dir() {
            return Err(BindError::UnsafeFolder {
                dir: dir.to_owned(),
                why: "it is not a plain folder".into(),
            });
        }
        if meta.uid() != uid {
            return Err(BindError::UnsafeFolder {
                dir: dir.to_owned(),
                why: format!("it belongs to uid {}, not to us (uid {uid}); remove it", meta.uid()),
            });
        }
        if meta.mode() & 0o077 != 0 {
            return Err(BindError::UnsafeFolder {
                dir: dir.to_owned(),
                why: format!("its mode is {:o}; run `chmod 700 {}`", meta.mode() & 0o7777, dir.display()),
            });
        }
    }
    Ok(())
}

/// The lock file that guards `socket`.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the socket path for this process: folder, lock, stale socket, bind, mode 0600.
pub fn bind(socket: &Path, policy: FolderPolicy) -> Result<Bound, BindError> {
    let dir = socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| BindError::NoParent(socket.to_owned()))?;
    prepare_folder(dir, policy)?;

    let lock_path = lock_path(socket);
    let mut lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(io("cannot open lock file", &lock_path))?;
    if let Err(err) = lock.try_lock_exclusive() {
        if err.kind() == std::io::ErrorKind::WouldBlock
            || err.raw_os_error() == fs2::lock_contended_error().raw_os_error()
        {
            let mut text = String::new();
            let pid = lock.read_to_string(&mut text).ok().and_then(|_| text.trim().parse().ok());
            return Err(BindError::AlreadyRunning { socket: socket.to_owned(), pid });
        }
        return Err(io("cannot lock", &lock_path)(err));
    }
    // Record who holds the lock, for the message a second daemon prints.
    let record = (|| {
        lock.set_len(0)?;
        lock.rewind()?;
        writeln!(lock, "{}", std::process::id())
    })();
    record.map_err(io("cannot write lock file", &lock_path))?;

    match std::fs::symlink_metadata(socket) {
        Ok(meta) if meta.file_type().is_socket() => {
            // We hold the lock, so no live daemon owns this socket: it is stale.
            tracing::info!(socket = %socket.display(), "removing stale socket left by a previous daemon");
            std::fs::remove_file(socket).map_err(io("cannot remove stale socket", socket))?;
        }
        Ok(_) => return Err(BindError::NotASocket { path: socket.to_owned() }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(io("cannot inspect", socket)(err)),
    }

    let listener = UnixListener::bind(socket).map_err(io("cannot bind", socket))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(io("cannot chmod", socket))?;
    listener.set_nonblocking(true).map_err(io("cannot configure", socket))?;
    let socket_ino = std::fs::symlink_metadata(socket).map_err(io("cannot inspect", socket))?.ino();
    Ok(Bound { listener, guard: SocketGuard { socket: socket.to_owned(), socket_ino, _lock: lock } })
}

/// Whether a connected peer runs as our effective uid (SO_PEERCRED). `Err` carries the peer's
/// uid and pid for the log.
pub fn check_peer(stream: &tokio::net::UnixStream) -> Result<(), String> {
    let ours = rustix::process::geteuid().as_raw();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == ours => Ok(()),
        Ok(cred) => Err(format!(
            "peer uid {} (pid {}) is not the daemon's uid {ours}",
            cred.uid(),
            cred.pid().map(|p| p.to_string()).unwrap_or_else(|| "?".into())
        )),
        Err(err) => Err(format!("cannot read peer credentials: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_bind_is_refused_and_stale_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/filectx.sock");
        let first = bind(&socket, FolderPolicy::AsGiven).unwrap();
        let meta = std::fs::metadata(&socket).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(socket.parent().unwrap()).unwrap().mode() & 0o777, 0o700);

        let err = bind(&socket, FolderPolicy::AsGiven).unwrap_err();
        assert!(
            matches!(err, BindError::AlreadyRunning { pid: Some(p), .. } if p == std::process::id()),
            "{err}"
        );
        assert!(socket.exists(), "a refused second daemon must not remove the live socket");

        drop(first);
        assert!(!socket.exists(), "the guard removes its socket");
        assert!(lock_path(&socket).exists(), "the lock file stays");

        // A crashed daemon leaves its socket file behind but its lock dies with it.
        drop(UnixListener::bind(&socket).unwrap());
        assert!(socket.exists());
        let again = bind(&socket, FolderPolicy::AsGiven).unwrap();
        assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok());
        drop(again);
    }

    #[test]
    fn private_folder_must_be_ours_and_closed() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = bind(&open.join("filectx.sock"), FolderPolicy::Private).unwrap_err();
        assert!(err.to_string().contains("chmod 700"), "{err}");
        assert!(bind(&open.join("filectx.sock"), FolderPolicy::AsGiven).is_ok());
    }

    #[test]
    fn something_else_at_the_socket_path_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("filectx.sock");
        std::fs::write(&socket, "precious").unwrap();
        assert!(matches!(bind(&socket, FolderPolicy::AsGiven), Err(BindError::NotASocket { .. })));
        assert_eq!(std::fs::read_to_string(&socket).unwrap(), "precious");
    }
}

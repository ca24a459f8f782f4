//! Whom the client trusts: only a daemon of its own user, reached through a folder only that
//! user controls. Every connection ([`crate::transport::connect`], and so the library's connect
//! calls, the CLI, `filectx mcp` and autostart's first try and readiness probe) passes here
//! before a single byte is sent.
//!
//! Two checks, because each covers what the other cannot:
//!
//! - **The folder**, before connecting: the socket's folder (followed through a symlink, which
//!   must then be ours too) must be a folder owned by our effective uid that neither group nor
//!   others may write. Another user who owns the folder, or may write in it, can put a socket of
//!   their own at the path — before our daemon binds it, or after it exits — and so impersonate
//!   the daemon. The sticky bit is no excuse: it keeps others from removing or renaming our
//!   socket, but not from taking its name while it is free. Failing this, autostart starts no
//!   daemon there either. Read and search bits for others are allowed: they let nobody plant
//!   anything. (The daemon is stricter for the `/tmp` fallback, which it wants `0700`; see
//!   `daemon/src/listen.rs`.)
//! - **The peer**, right after connecting: the process listening on the socket must run as our
//!   effective uid (`SO_PEERCRED`). This is what actually proves the daemon is ours, whatever
//!   happened to the path between the folder check and the connection (a folder higher up the
//!   path that someone else controls, a rename in between).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use tokio::net::UnixStream;

/// Why the client refuses a socket: it, or its folder, may be controlled by another user.
/// Carried by [`crate::ClientError::UntrustedSocket`]; the texts say how to fix it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Untrusted {
    /// The socket's folder belongs to another user.
    #[error(
        "its folder {} belongs to uid {owner}, not to you (uid {ours}), so that user could serve a \
         fake daemon there; remove the folder if it should not exist, or choose a socket in a folder \
         of your own (--socket PATH or FILECTX_SOCKET)",
        folder.display()
    )]
    FolderNotOurs {
        /// The folder.
        folder: PathBuf,
        /// Its owner.
        owner: u32,
        /// Our effective uid.
        ours: u32,
    },
    /// Group or others may write in the socket's folder.
    #[error(
        "its folder {} has mode {mode:o}, so other users can write there and put a fake daemon's \
         socket in its place (a sticky bit does not prevent that); run `chmod go-w {}`, or choose a \
         socket in a folder of your own (--socket PATH or FILECTX_SOCKET)",
        folder.display(),
        folder.display()
    )]
    FolderWritableByOthers {
        /// The folder.
        folder: PathBuf,
        /// Its permission bits (with set-id and sticky bits).
        mode: u32,
    },
    /// The socket's folder is reached through a symlink that belongs to another user, who can
    /// make it point anywhere.
    #[error(
        "its folder {} is a symbolic link that belongs to uid {owner}, not to you (uid {ours}), so \
         that user decides where it leads; remove the link, or choose a socket in a folder of your \
         own (--socket PATH or FILECTX_SOCKET)",
        link.display()
    )]
    LinkNotOurs {
        /// The symlink.
        link: PathBuf,
        /// Its owner.
        owner: u32,
        /// Our effective uid.
        ours: u32,
    },
    /// What should be the socket's folder is something else.
    #[error("{} is not a folder; choose another socket (--socket PATH or FILECTX_SOCKET)", folder.display())]
    NotAFolder {
        /// The path that should be a folder.
        folder: PathBuf,
    },
    /// The process serving the socket runs as another user: it is not our daemon.
    #[error(
        "the process serving it runs as uid {peer}{}, not as you (uid {ours}), so it is not your \
         filectx daemon and nothing was sent to it; find out who runs it, remove the socket, or \
         choose another socket (--socket PATH or FILECTX_SOCKET)",
        pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
    )]
    PeerNotOurs {
        /// The peer's uid.
        peer: u32,
        /// The peer's pid, when the kernel tells it.
        pid: Option<i32>,
        /// Our effective uid.
        ours: u32,
    },
    /// The kernel would not say who serves the socket, so it cannot be trusted.
    #[error("cannot tell which user serves it (SO_PEERCRED failed: {0}), so nothing was sent to it")]
    PeerUnknown(#[source] std::io::Error),
}

/// Our effective uid: the one the daemon we trust runs as.
fn our_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The folder that holds `socket`: its parent, `.` for a bare file name.
fn folder_of(socket: &Path) -> PathBuf {
    match socket.parent() {
        Some(parent) if parent.as_os_str().is_empty() => PathBuf::from("."),
        Some(parent) => parent.to_owned(),
        // `/` has no parent; connecting to it fails anyway, and `/` is the folder to judge.
        None => socket.to_owned(),
    }
}

/// What [`judge_folder`] needs to know of a folder.
#[derive(Debug, Clone, Copy)]
struct FolderFacts {
    /// The owner of the path itself when it is a symlink.
    link_owner: Option<u32>,
    /// Whether the path (followed) is a folder.
    is_dir: bool,
    /// The folder's owner.
    owner: u32,
    /// The folder's mode bits.
    mode: u32,
}

/// The folder rule (see the module's documentation), apart from any IO.
fn judge_folder(folder: &Path, facts: FolderFacts, ours: u32) -> Result<(), Untrusted> {
    if let Some(owner) = facts.link_owner.filter(|&owner| owner != ours) {
        return Err(Untrusted::LinkNotOurs { link: folder.to_owned(), owner, ours });
    }
    if !facts.is_dir {
        return Err(Untrusted::NotAFolder { folder: folder.to_owned() });
    }
    if facts.owner != ours {
        return Err(Untrusted::FolderNotOurs { folder: folder.to_owned(), owner: facts.owner, ours });
    }
    if facts.mode & 0o022 != 0 {
        return Err(Untrusted::FolderWritableByOthers {
            folder: folder.to_owned(),
            mode: facts.mode & 0o7777,
        });
    }
    Ok(())
}

/// Checks the folder of `socket` before connecting. `Ok(Ok(()))`: trusted, or nothing there yet
/// (no folder: connecting then finds nothing, and autostart's daemon creates it `0700`, to be
/// judged by the next attempt). `Ok(Err(_))`: refused. `Err`: the folder could not be inspected
/// (e.g. permission denied on the way), which connecting would run into as well.
pub(crate) async fn check_folder(socket: &Path) -> std::io::Result<Result<(), Untrusted>> {
    let folder = folder_of(socket);
    // Two `lstat`s at most, but on a network filesystem even those may block: off the runtime.
    tokio::task::spawn_blocking(move || inspect_folder(folder))
        .await
        .unwrap_or_else(|join| Err(std::io::Error::other(join.to_string())))
}

/// [`check_folder`]'s blocking part.
fn inspect_folder(folder: PathBuf) -> std::io::Result<Result<(), Untrusted>> {
    let link = match std::fs::symlink_metadata(&folder) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Ok(())),
        Err(error) => return Err(error),
    };
    let link_owner = link.file_type().is_symlink().then(|| link.uid());
    let ours = our_uid();
    let meta = if link_owner.is_some() {
        match std::fs::metadata(&folder) {
            Ok(meta) => meta,
            // A dangling link: only its owner can be judged.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(match link_owner {
                    Some(owner) if owner != ours => Err(Untrusted::LinkNotOurs { link: folder, owner, ours }),
                    _ => Ok(()),
                });
            }
            Err(error) => return Err(error),
        }
    } else {
        link
    };
    let facts = FolderFacts { link_owner, is_dir: meta.is_dir(), owner: meta.uid(), mode: meta.mode() };
    Ok(judge_folder(&folder, facts, ours))
}

/// Checks, right after connecting and before anything is sent, that the process serving the
/// socket runs as our effective uid.
pub(crate) fn check_peer(stream: &UnixStream) -> Result<(), Untrusted> {
    let ours = our_uid();
    let cred = stream.peer_cred().map_err(Untrusted::PeerUnknown)?;
    if cred.uid() == ours {
        Ok(())
    } else {
        Err(Untrusted::PeerNotOurs { peer: cred.uid(), pid: cred.pid(), ours })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u32 = 1000;

    fn facts(owner: u32, mode: u32) -> FolderFacts {
        FolderFacts { link_owner: None, is_dir: true, owner, mode: 0o040_000 | mode }
    }

    fn judged(facts: FolderFacts) -> Result<(), Untrusted> {
        judge_folder(Path::new("/run/x"), facts, US)
    }

    #[test]
    fn our_folder_closed_to_writers_is_trusted() {
        for mode in [0o700, 0o711, 0o755, 0o750, 0o555] {
            assert!(judged(facts(US, mode)).is_ok(), "{mode:o}");
        }
    }

    #[test]
    fn a_folder_others_may_write_is_refused_sticky_or_not() {
        for mode in [0o720, 0o702, 0o777, 0o1777, 0o1770, 0o2775] {
            let error = judged(facts(US, mode));
            assert!(
                matches!(&error, Err(Untrusted::FolderWritableByOthers { mode: m, .. }) if *m == mode),
                "{mode:o}: {error:?}"
            );
        }
        let text = judged(facts(US, 0o1777)).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains("mode 1777") && text.contains("chmod go-w /run/x"), "{text}");
    }

    #[test]
    fn a_folder_of_another_user_is_refused_even_when_closed() {
        for owner in [0, 65534, US + 1] {
            let error = judged(facts(owner, 0o700));
            assert!(matches!(error, Err(Untrusted::FolderNotOurs { owner: o, ours: US, .. }) if o == owner));
        }
        let text = judged(facts(0, 0o755)).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            text.contains("belongs to uid 0, not to you (uid 1000)") && text.contains("--socket"),
            "{text}"
        );
    }

    #[test]
    fn a_symlink_must_be_ours_and_lead_to_a_folder() {
        let link = |link_owner| FolderFacts { link_owner: Some(link_owner), ..facts(US, 0o700) };
        assert!(judged(link(US)).is_ok());
        assert!(matches!(judged(link(0)), Err(Untrusted::LinkNotOurs { owner: 0, .. })));
        let file = FolderFacts { is_dir: false, ..facts(US, 0o600) };
        assert!(matches!(judged(file), Err(Untrusted::NotAFolder { .. })));
    }

    #[test]
    fn the_folder_of_a_bare_name_is_the_current_one() {
        assert_eq!(folder_of(Path::new("filectx.sock")), PathBuf::from("."));
        assert_eq!(folder_of(Path::new("/run/user/1/filectx.sock")), PathBuf::from("/run/user/1"));
        assert_eq!(folder_of(Path::new("/")), PathBuf::from("/"));
    }
}

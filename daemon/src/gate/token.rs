//! The gate token: a random secret the daemon writes at start to `<socket>.gate-token` (mode
//! 0600, in the socket's folder, which only its user can write), so that only the daemon's user
//! — `filectx gate`, or a program of theirs that reads that file — can register a write-intent
//! gate, while an agent that only speaks the protocol cannot: no session reads or writes the
//! file through the daemon (the server adds a rule for its name to every session's deny rules).
//! A new daemon writes a new token; the file is removed when the daemon stops.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::random;

/// Bytes of randomness in a token (shown as twice as many hex digits).
const TOKEN_BYTES: usize = 32;

/// The file next to `socket` that holds the gate token: `<socket>.gate-token`.
pub fn file_for(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".gate-token");
    PathBuf::from(name)
}

/// Writes a fresh token to the file next to `socket` (replacing one a previous daemon left):
/// created beside it with `O_EXCL` and mode 0600, then renamed into place, so a reader sees a
/// whole token, old or new. Call it while holding the socket's lock.
pub fn keep(socket: &Path) -> std::io::Result<GateToken> {
    let file = file_for(socket);
    let secret = random::hex(TOKEN_BYTES)?;
    let mut staging = file.as_os_str().to_owned();
    staging.push(format!(".{}.tmp", random::hex(8)?));
    let staging = PathBuf::from(staging);
    let written = (|| -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut out = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&staging)?;
        out.write_all(secret.as_bytes())?;
        out.sync_all()?;
        std::fs::rename(&staging, &file)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    written.map(|()| GateToken::new(secret, file))
}

/// Removes the token's file, if it still holds this token (a stale file of a later daemon on the
/// same socket is left alone).
pub fn remove(token: &GateToken) {
    if std::fs::read_to_string(token.file()).is_ok_and(|text| token.matches(text.trim())) {
        let _ = std::fs::remove_file(token.file());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_kept_private_next_to_the_socket_and_replaced_by_the_next() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("filectx.sock");
        let first = keep(&socket).unwrap();
        assert_eq!(first.file(), dir.path().join("filectx.sock.gate-token"));
        let text = std::fs::read_to_string(first.file()).unwrap();
        assert!(text.len() == 2 * TOKEN_BYTES && text.bytes().all(|b| b.is_ascii_hexdigit()), "{text}");
        assert!(first.matches(&text) && !first.matches("") && !first.matches(&text[1..]));
        assert_eq!(std::fs::metadata(first.file()).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!format!("{first:?}").contains(&text), "Debug never shows the secret");
        let second = keep(&socket).unwrap();
        assert!(!second.matches(&text), "a new daemon, a new token");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no staging file left");
        remove(&first);
        assert!(second.file().exists(), "the first daemon's removal leaves the second's token");
        remove(&second);
        assert!(!second.file().exists());
    }
}

/// The daemon's gate token: a random secret, and the file next to the socket it is kept in
/// (mode 0600). Its `Debug` shows the file, never the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct GateToken {
    secret: String,
    file: std::path::PathBuf,
}

impl GateToken {
    /// A token `secret` kept in `file`.
    pub fn new(secret: String, file: std::path::PathBuf) -> Self {
        Self { secret, file }
    }

    /// Whether `given` is this token (compared in constant time).
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.secret.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
    }

    /// The file it is kept in.
    pub fn file(&self) -> &std::path::Path {
        &self.file
    }
}

impl std::fmt::Debug for GateToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateToken").field("file", &self.file).finish_non_exhaustive()
    }
}

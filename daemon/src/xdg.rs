//! The user's base folders as the XDG Base Directory specification names them: an absolute
//! `$XDG_*_HOME`, else its default under `$HOME`.

use std::path::PathBuf;

/// `$var` when it is set to an absolute path, else `$HOME/fallback`; `None` without either.
pub fn base_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(fallback)))
}

/// This user's filectx state folder: `$XDG_STATE_HOME/filectx`, else `~/.local/state/filectx`.
pub fn state_dir() -> Option<PathBuf> {
    base_dir("XDG_STATE_HOME", ".local/state").map(|state| state.join("filectx"))
}

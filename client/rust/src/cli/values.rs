//! The values the command line gives, checked and resolved below the parser and the commands
//! that use them: `--timeout` seconds, `--on-timeout`, gate globs and root folders.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use filectx_client::gate::GateOnTimeout as OnTimeout;
use globset::{GlobBuilder, GlobMatcher};

/// Compiles a `--deny` or `--auto-allow` glob: `*` and `?` stay within one path component, `**`
/// spans folders.
pub(crate) fn compile_glob(glob: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| format!("invalid glob {glob:?}: {error}"))
}

/// `dir` made absolute against `cwd` and canonical; it must be an existing folder.
pub(crate) fn canonical_root(cwd: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    let root =
        cwd.join(dir).canonicalize().with_context(|| format!("cannot resolve the root {}", dir.display()))?;
    if !root.is_dir() {
        bail!("the root {} is not a folder", dir.display());
    }
    Ok(root)
}

/// `--on-timeout` as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnTimeoutArg {
    /// Refuse the write
    Deny,
    /// Let the write land
    Allow,
}

impl From<OnTimeoutArg> for OnTimeout {
    fn from(arg: OnTimeoutArg) -> Self {
        match arg {
            OnTimeoutArg::Deny => OnTimeout::Deny,
            OnTimeoutArg::Allow => OnTimeout::Allow,
        }
    }
}

/// The longest `--timeout` the daemon accepts, in seconds (its gates wait at most 10 minutes).
const MAX_TIMEOUT_SECS: f64 = 600.0;

/// `--timeout SECONDS` (a whole or decimal number of seconds, more than 0, at most 600).
pub(crate) fn parse_seconds(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= MAX_TIMEOUT_SECS => Ok(Duration::from_secs_f64(seconds)),
        _ => Err(format!("{text:?} is not a number of seconds above 0 and at most 600 (e.g. 30 or 2.5)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_globs_are_checked() {
        assert_eq!(parse_seconds("2.5"), Ok(Duration::from_millis(2500)));
        assert!(
            parse_seconds("0").is_err() && parse_seconds("soon").is_err() && parse_seconds("-1").is_err()
        );
        assert!(compile_glob("src/[a").is_err());
    }
}

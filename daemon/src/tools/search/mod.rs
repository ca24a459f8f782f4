//! The `glob` and `grep` tools, built on ripgrep's libraries: `globset` for file-name globs,
//! `ignore`'s file types and overrides for grep's `type` and `glob`, `grep-regex` and
//! `grep-searcher` for the search itself (binary files skipped at their first NUL byte). The
//! files come from the file context (ignore files, hidden entries, symlinks and deny rules
//! already handled there), and every answer stays within the session's read budget with a
//! footer saying what was left out. A `content` grep that shows lines of a file records it as
//! read at the version searched.
//!
//! A search is bounded ([`Limits`]): its regex's memory ([`RegexLimits`]: a pattern too big for
//! it is refused), and its time — it stops when its request is cancelled (answered
//! `FS_ABORTED`) or when its time is up (answered with what it found and a footer saying how
//! much it searched), within a file too (see `tools::pieces`).

mod bounds;
mod glob;
mod grep;

pub use bounds::{Limits, RegexLimits, SEARCH_BUFFER_BYTES, SearchError};
pub use glob::glob;
pub use grep::{GrepRequest, grep};

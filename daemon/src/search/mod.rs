//! The search engine beneath the file context's `grep` and `glob`, built on ripgrep's
//! libraries: a grep's query ([`GrepQuery`]: `grep-regex` within its memory bound, `ignore`'s
//! file types and overrides), which files match ([`probe_all`]: a batch at a time on up to two
//! threads, binary files skipped at their first NUL byte), the lines a `content` grep shows
//! ([`LineSearcher`]), and a glob's matching and ordering ([`PathMatch`], [`Times`]).
//!
//! A search is bounded ([`SearchLimits`]): its regex's memory ([`RegexLimits`]: a pattern too big for
//! it is refused), and its time ([`Clock`]) — it stops when its request is cancelled or when
//! its time is up, within a file too (`pieces`: the regex runs on one bounded piece at a time).
//! It knows nothing of sessions: the file context lists the files, applies the deny rules,
//! opens each beneath its root and records what was shown.

mod bounds;
mod glob;
mod lines;
mod pieces;
mod probe;
mod query;

pub use bounds::{Clock, RegexLimits, SEARCH_BUFFER_BYTES, SEARCH_WHOLE_MAX_BYTES, SearchLimits, Stopped};
pub use glob::{PathMatch, Times};
pub use lines::{GrepOut, LineSearcher, LinesShown};
pub use probe::{Probe, Searchable, batches, probe_all};
pub use query::{GrepMode, GrepQuery, GrepSpec, InvalidQuery, Needles};

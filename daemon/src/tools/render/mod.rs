//! Model-facing projections (one file per kind of answer): the numbered view of a read (each line as its number, a tab, the
//! line) with its pagination footer, concise
//! success texts, and error texts that say what to do next. Pure functions of the file-context
//! results; snapshot-tested.
//!
//! A read's text is the design's projection: at most the session's `readMaxBytes` bytes in all
//! (numbered lines, blank line, footer), lines cut at 2000 characters with
//! [`CUT_SUFFIX`], and one of three footers — `(Output capped. Showing lines X-Y. Use
//! offset=Y+1 to continue.)` when the budget stopped it, `(Showing lines X-Y of T. Use
//! offset=Y+1 to continue.)` when lines remain, `(End of file - total T lines)`. The window is
//! cut to the budget below this layer ([`read_request`]): the provider reads only a prefix of a
//! long line and stops at the last line that fits, cutting the first line if even it does not.

mod change;
mod diagnostics;
mod error;
mod read;

pub use change::{edit, edit_over, not_read_shown, undo, write};
pub use diagnostics::{after_change, diagnostics_now};
pub use error::error;
pub use read::{CUT_SUFFIX, JsonText, Sink, fit_json, read, read_json, read_request};

//! What the search tools' answers share: the room kept for their footers, the text of a search
//! whose time ran out while it listed, and why a search could not run.

use crate::context::ContextError;
use crate::search::{Clock, InvalidQuery};

/// Bytes kept for the footer of a search answer.
pub(super) const FOOTER_ROOM: usize = 400;

/// The answer of a search whose time ran out while it listed the files under `base`.
pub(super) fn listing_timed_out(budget: &Clock<'_>, base: &str) -> String {
    format!(
        "The search stopped at its time limit of {} while listing the files under {base}: nothing was searched. Narrow the path.",
        budget.limit_text()
    )
}

/// Why a search could not run.
#[derive(Debug)]
pub enum SearchError {
    /// An argument is wrong (a bad pattern, glob or type), phrased for the model.
    Invalid(String),
    /// The file context refused or failed (a cancelled search is one).
    File(ContextError),
}

impl From<ContextError> for SearchError {
    fn from(err: ContextError) -> Self {
        Self::File(err)
    }
}

impl From<InvalidQuery> for SearchError {
    fn from(InvalidQuery(text): InvalidQuery) -> Self {
        Self::Invalid(text)
    }
}

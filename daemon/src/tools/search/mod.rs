//! The `glob` and `grep` tools: their arguments made a query for the file context's search
//! (`FileContext::glob`, `FileContext::grep`, over the engine in [`crate::search`]), and what it
//! finds made an answer within the session's read budget, with a footer saying what was left
//! out: paged by `offset` and `head_limit`, lines shown as `read` shows them. A search stopped
//! by its request's cancellation answers `FS_ABORTED`; one out of time answers what it found
//! and says how much it searched.

mod answer;
mod glob;
mod grep;

pub use answer::SearchError;
pub use glob::glob;
pub use grep::{GrepRequest, grep};

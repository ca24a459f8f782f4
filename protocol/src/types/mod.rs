//! Wire types (serde) of the session and daemon methods, one file per family of methods:
//! `initialize`, `daemon/status`, the gates, the tools, the file methods, the journal, diagnostics. Field names are
//! camelCase on the wire, as in LSP and MCP. Every type is re-exported here (and from the crate
//! root) under its own name.

mod files;
mod gate;
mod journal;
mod lsp;
mod session;
mod status;
mod tools;

pub use files::*;
pub use gate::*;
pub use journal::*;
pub use lsp::*;
pub use session::*;
pub use status::*;
pub use tools::*;

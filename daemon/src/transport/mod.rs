//! The transport: the per-connection driver that reads LSP frames, gates them by session
//! phase, runs them against the jsonrpsee method table, and writes responses and
//! notifications through one bounded outgoing queue per connection.

pub(crate) mod connection;
pub(crate) mod incoming;
pub(crate) mod message;

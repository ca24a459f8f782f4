//! filectxd as a library: [`run`] serves a bound listener until a shutdown future resolves, so
//! tests can run the daemon in-process; [`listen::bind`] takes the socket path safely.

// The daemon's docs are for the people who work on it: a module's doc names its private parts.
#![allow(rustdoc::private_intra_doc_links)]

pub mod cli;
pub mod config;
pub mod context;
pub mod descriptors;
pub mod gate;
pub mod journal;
pub mod json;
pub mod listen;
pub mod listing;
pub mod lru;
pub mod lsp;
pub mod memory;
pub mod provider;
pub mod random;
pub mod rpc;
pub mod search;
pub mod session;
pub mod stats;
pub mod tools;
pub mod watch;
pub mod xdg;

#[doc(hidden)]
pub mod fuzzing;
mod server;
mod transport;

pub use config::Config;
pub use server::{BLOCKING_KEEP_ALIVE, RunError, SHORT_BLOCKING_THREADS, bound_blocking_pool, run};

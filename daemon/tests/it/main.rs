//! The daemon crate's integration tests, as one test binary (`it`) with one module per former
//! test file: the `filectxd` command line (`cli`), the dispatch fuzz target on stable
//! (`fuzz_dispatch`: 3 s of generated inputs, 60 s with `FILECTX_LONG_TESTS=1` as in CI) and the
//! tidy checks on the sources (`tidy`). The tests against a running daemon live in the
//! workspace's `tests/` crate.
#![allow(clippy::unwrap_used, missing_docs)]

/// The stable fuzz driver, shared with the protocol crate's fuzz test.
#[path = "../../../protocol/tests/support/fuzz_driver.rs"]
mod fuzz_driver;

mod cli;
mod fuzz_dispatch;
mod layout;
mod tidy;

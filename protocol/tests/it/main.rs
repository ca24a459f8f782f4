//! The protocol crate's integration tests, as one test binary (`it`): the codec fuzz target on
//! stable (`fuzz_codec`: the corpus, then 3 s of generated inputs, 60 s with
//! `FILECTX_LONG_TESTS=1` as in CI), driven by the fuzz driver it shares with the daemon crate.
#![allow(clippy::unwrap_used, missing_docs)]

/// The stable fuzz driver, shared with the daemon crate's dispatch fuzz test.
#[path = "../support/fuzz_driver.rs"]
mod fuzz_driver;

mod fuzz_codec;

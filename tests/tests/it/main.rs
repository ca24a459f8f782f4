//! The workspace's integration tests against the real `filectxd`, as one test binary (`it`) with
//! one module per area, so that the daemon is linked into one test executable instead of one per
//! file. Each module's first lines say what it covers.
//!
//! Run them with `cargo test --workspace` (the README's command: it builds the `filectxd` they
//! spawn with the test-only features `test-hooks` and `failpoints`, which `-p filectx-tests`
//! alone does not), one area with `cargo test --workspace --test it -- watch::`. The soak runs
//! 3 s unless `FILECTX_LONG_TESTS=1` (60 s, as `.ci/run` sets) or `FILECTX_SOAK_SECONDS` says
//! otherwise.
//!
//! The tests share this process and run two at a time, so none may change what the process
//! shares: no `std::env::set_var`, current folder, umask or signal disposition (children get
//! their environment and folder through `Command`), and no file a child will execute is written
//! from this process (`cp` or `sh` writes it: another test's fork could inherit the descriptor
//! and make the exec fail with ETXTBSY). A test that runs this binary again as another user
//! names itself with [`filectx_tests::test_name`]. The soak runs alone
//! ([`filectx_tests::alone`]); the heavy tests of `large` take a lock of their own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod attack_deny;
mod attack_gate;
mod attack_limits;
mod attack_memory;
mod attack_regex;
mod attack_screen;
mod attack_search;
mod budgets;
mod cancel;
mod client;
mod crash;
mod diagnostics;
mod fake_lsp;
mod faults;
mod files;
mod gate;
mod gate_cli;
mod harness;
mod huge;
mod journal;
mod journal_attack;
mod journal_cli;
mod large;
mod lifecycle;
mod mcp;
mod merge;
mod owners;
mod policy;
mod private;
mod projection;
mod real_diagnostics;
mod real_lsp;
mod sandbox;
mod search;
mod search_index;
mod service;
mod skips;
mod soak;
mod watch;
mod wire;
mod writes;

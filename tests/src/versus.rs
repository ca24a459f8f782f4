//! What the benches that race ripgrep share: timing a tool call and an `rg` run, the paths of
//! each answer, medians, and the deterministic generator their trees are written with.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Raw;

/// The median of `samples` (the upper one of an even count).
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The paths of a glob or grep answer (one per line, before the blank line and footer), as rg
/// prints them relative to the tree.
pub fn paths_of(text: &str) -> BTreeSet<String> {
    text.lines().take_while(|l| !l.is_empty()).map(str::to_owned).collect()
}

/// One `tools/call` of `tool`, which must succeed: how long it took and its text.
pub fn time_tool(raw: &mut Raw, tool: &str, arguments: &Value) -> (Duration, String) {
    let start = Instant::now();
    let result = raw.call("tools/call", Some(json!({"name": tool, "arguments": arguments})));
    let took = start.elapsed();
    assert_eq!(result["isError"], false, "{result}");
    (took, result["content"][0]["text"].as_str().unwrap_or_default().to_owned())
}

/// One run of `rg args…` in `tree`: how long it took and the paths it printed (`./` cut).
pub fn time_rg(rg: &Path, tree: &Path, args: &[&str]) -> (Duration, BTreeSet<String>) {
    let start = Instant::now();
    let out = Command::new(rg).args(args).current_dir(tree).output().expect("rg runs");
    let took = start.elapsed();
    let paths =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim_start_matches("./").to_owned()).collect();
    (took, paths)
}

/// xorshift64*: the only randomness of generated trees and chaos runs, so that they are the
/// same on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; 0 too).
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

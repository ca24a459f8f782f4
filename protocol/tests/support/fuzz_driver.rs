//! A small stable-toolchain fuzz driver shared by `protocol/tests/it/fuzz_codec.rs` and
//! `daemon/tests/it/fuzz_dispatch.rs` (each test binary's `main.rs` includes it with `#[path]`):
//! replays a cargo-fuzz corpus, then runs proptest-generated inputs — mutations of the corpus
//! seeds (bytes, whole frames, JSON values) and random bytes — against the same target function
//! for a time budget, shrinking and printing any input that fails.
//!
//! Environment: `FILECTX_FUZZ_SECONDS` (budget per target, `0` replays the corpus only),
//! otherwise 60 s with `FILECTX_LONG_TESTS=1` (as `.ci/run` sets) and 3 s without (a
//! developer's plain `cargo test`); `FILECTX_FUZZ_SEED` (a number: reproduce a run).
#![allow(clippy::unwrap_used, dead_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::{NewTree, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value;

/// Byte strings that matter to the codec and the dispatcher, spliced in by mutations.
const TOKENS: &[&[u8]] = &[
    b"Content-Length: ",
    b"Content-Length: 0\r\n\r\n",
    b"Content-Length: 18446744073709551615\r\n\r\n",
    b"Content-Length: 99999999999999999999999\r\n\r\n",
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n",
    b"content-length:5\r\n",
    b"\r\n\r\n",
    b"\r\n",
    b"\n",
    b":",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b"\\u0000",
    b"\\ud800",
    b"\xff\xfe",
    b"\xc3",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"file/read\",\"params\":{\"path\":\"a.txt\"}}",
    b"\"jsonrpc\":\"2.0\"",
    b"\"id\":null",
    b"\"method\":\"exit\"",
    b"\"method\":\"shutdown\"",
    b"1e999",
    b"-0",
    b"18446744073709551616",
];

/// JSON values a mutation may put anywhere in a message.
fn palette(pick: usize) -> Value {
    let deep_array = (0..200).fold(Value::Null, |v, _| Value::Array(vec![v]));
    let values = [
        Value::Null,
        Value::Bool(true),
        Value::from(0),
        Value::from(-1),
        Value::from(u64::MAX),
        Value::from(1.5e300),
        Value::from(""),
        Value::from("a.txt"),
        Value::from("sub/b.txt"),
        Value::from("long.txt"),
        Value::from("crlf.txt"),
        Value::from("bin.dat"),
        Value::from("missing/new.txt"),
        Value::from("../outside.txt"),
        Value::from("/etc/hostname"),
        Value::from("sub"),
        Value::from("x".repeat(70_000)),
        Value::from("\u{0}\u{feff}é\r\n"),
        Value::from("file/edit"),
        Value::from("tools/call"),
        Value::from("fs/streamText"),
        Value::from("fs/streamCancel"),
        Value::from("initialize"),
        Value::Array(vec![]),
        Value::Object(Default::default()),
        serde_json::json!({"name": "read", "arguments": {"file_path": "a.txt"}}),
        serde_json::json!({"path": "a.txt", "oldString": "beta", "newString": "BETA"}),
        deep_array,
    ];
    values[pick % values.len()].clone()
}

/// Every JSON pointer inside `value`, the root included.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                pointers(item, format!("{at}/{key}"), out);
            }
        }
        _ => {}
    }
}

/// One change to an input.
#[derive(Debug, Clone)]
enum Mutation {
    FlipBit(Index, u8),
    SetByte(Index, u8),
    Delete(Index, usize),
    Duplicate(Index, usize),
    Insert(Index, Vec<u8>),
    Token(Index, Index),
    /// Replace a JSON value in one frame's body (and fix that frame's Content-Length).
    JsonValue {
        frame: Index,
        at: Index,
        pick: usize,
    },
    /// Remove a key or element from one frame's JSON body.
    JsonRemove {
        frame: Index,
        at: Index,
    },
    /// Byte-level change inside one frame's body, Content-Length fixed afterwards.
    InBody {
        frame: Index,
        change: Box<Mutation>,
    },
    /// Drop a whole frame, or repeat it.
    DropFrame(Index),
    RepeatFrame(Index, u8),
}

fn byte_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::SetByte(i, b)),
        (any::<Index>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<Index>(), 1usize..256).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        (any::<Index>(), proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<Index>(), any::<Index>()).prop_map(|(i, t)| Mutation::Token(i, t)),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => byte_mutation(),
        4 => (any::<Index>(), any::<Index>(), any::<usize>())
            .prop_map(|(frame, at, pick)| Mutation::JsonValue { frame, at, pick }),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(frame, at)| Mutation::JsonRemove { frame, at }),
        2 => (any::<Index>(), byte_mutation()).prop_map(|(frame, change)| Mutation::InBody { frame, change: Box::new(change) }),
        1 => any::<Index>().prop_map(Mutation::DropFrame),
        1 => (any::<Index>(), 1u8..40).prop_map(|(i, n)| Mutation::RepeatFrame(i, n)),
    ]
}

/// Splits a stream into (header, body) frames where it is well framed; `None` otherwise.
fn frames(input: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let end = rest.windows(4).position(|w| w == b"\r\n\r\n")?;
        let header = std::str::from_utf8(&rest[..end]).ok()?;
        let length: usize = header
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
            })?
            .parse()
            .ok()?;
        let stop = (end + 4).checked_add(length)?;
        let body = rest.get(end + 4..stop)?;
        out.push(body.to_vec());
        rest = &rest[stop..];
    }
    Some(out)
}

fn reframe(bodies: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for body in bodies {
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(body);
    }
    out
}

fn apply_bytes(input: &mut Vec<u8>, m: &Mutation) {
    let len = input.len();
    match m {
        Mutation::FlipBit(i, b) if len > 0 => input[i.index(len)] ^= 1 << b,
        Mutation::SetByte(i, b) if len > 0 => input[i.index(len)] = *b,
        Mutation::Delete(i, n) if len > 0 => {
            let at = i.index(len);
            input.drain(at..(at + n).min(len));
        }
        Mutation::Duplicate(i, n) if len > 0 => {
            let at = i.index(len);
            let piece = input[at..(at + n).min(len)].to_vec();
            input.splice(at..at, piece);
        }
        Mutation::Insert(i, bytes) => {
            let at = i.index(len + 1);
            input.splice(at..at, bytes.iter().copied());
        }
        Mutation::Token(i, t) => {
            let at = i.index(len + 1);
            input.splice(at..at, TOKENS[t.index(TOKENS.len())].iter().copied());
        }
        _ => {}
    }
}

fn apply(input: &mut Vec<u8>, m: &Mutation) {
    let frame_level = matches!(
        m,
        Mutation::JsonValue { .. }
            | Mutation::JsonRemove { .. }
            | Mutation::InBody { .. }
            | Mutation::DropFrame(_)
            | Mutation::RepeatFrame(..)
    );
    if !frame_level {
        return apply_bytes(input, m);
    }
    let Some(mut bodies) = frames(input) else { return };
    if bodies.is_empty() {
        return;
    }
    let count = bodies.len();
    match m {
        Mutation::JsonValue { frame, at, pick } => {
            let body = &mut bodies[frame.index(count)];
            if let Ok(mut value) = serde_json::from_slice::<Value>(body) {
                let mut all = Vec::new();
                pointers(&value, String::new(), &mut all);
                let pointer = &all[at.index(all.len())];
                if pointer.is_empty() {
                    value = palette(*pick);
                } else if let Some(slot) = value.pointer_mut(pointer) {
                    *slot = palette(*pick);
                }
                *body = serde_json::to_vec(&value).unwrap();
            }
        }
        Mutation::JsonRemove { frame, at } => {
            let body = &mut bodies[frame.index(count)];
            if let Ok(mut value) = serde_json::from_slice::<Value>(body) {
                let mut all = Vec::new();
                pointers(&value, String::new(), &mut all);
                let pointer = all[at.index(all.len())].clone();
                if let Some((parent, key)) = pointer.rsplit_once('/') {
                    match value.pointer_mut(parent) {
                        Some(Value::Object(map)) => {
                            map.remove(&key.replace("~1", "/").replace("~0", "~"));
                        }
                        Some(Value::Array(items)) => {
                            if let Ok(i) = key.parse::<usize>()
                                && i < items.len()
                            {
                                items.remove(i);
                            }
                        }
                        _ => {}
                    }
                }
                *body = serde_json::to_vec(&value).unwrap();
            }
        }
        Mutation::InBody { frame, change } => apply_bytes(&mut bodies[frame.index(count)], change),
        Mutation::DropFrame(i) => {
            bodies.remove(i.index(count));
        }
        Mutation::RepeatFrame(i, n) => {
            let body = bodies[i.index(count)].clone();
            let at = i.index(count);
            for _ in 0..*n {
                bodies.insert(at, body.clone());
            }
        }
        _ => {}
    }
    *input = reframe(&bodies);
}

/// The corpus files of one target, sorted by name.
pub fn corpus(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files.into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect()
}

/// Runs every corpus file through `target`; panics (naming the file) on the first failure.
pub fn replay(name: &str, dir: &Path, target: &dyn Fn(&[u8])) -> usize {
    let seeds = corpus(dir);
    assert!(seeds.len() >= 12, "{name}: the corpus at {} has only {} seeds", dir.display(), seeds.len());
    for (path, bytes) in &seeds {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(bytes))) {
            panic!("{name}: corpus file {} fails: {}", path.display(), message(&panic));
        }
    }
    eprintln!("fuzz {name}: replayed {} corpus files", seeds.len());
    seeds.len()
}

fn message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(non-string panic)".to_owned())
}

/// Generated inputs: a seed with up to 8 mutations (often), seeds spliced together, or random bytes.
fn inputs(seeds: Vec<Vec<u8>>) -> BoxedStrategy<Vec<u8>> {
    let n = seeds.len();
    let mutated = {
        let seeds = seeds.clone();
        (0..n, proptest::collection::vec(mutation(), 1..8)).prop_map(move |(i, mutations)| {
            let mut input = seeds[i].clone();
            for m in &mutations {
                apply(&mut input, m);
            }
            input
        })
    };
    let spliced = {
        let seeds = seeds.clone();
        proptest::collection::vec((0..n, any::<Index>()), 2..4).prop_map(move |parts| {
            let mut input = Vec::new();
            for (i, cut) in parts {
                // Whole seeds or a prefix of one: frames cut short exercise truncation.
                let seed = &seeds[i];
                let end = if cut.index(4) == 0 { cut.index(seed.len() + 1) } else { seed.len() };
                input.extend_from_slice(&seed[..end]);
            }
            input
        })
    };
    prop_oneof![
        8 => mutated,
        2 => spliced,
        1 => proptest::collection::vec(any::<u8>(), 0..2048),
    ]
    .boxed()
}

/// Shrinks a failing case as proptest would and returns the smallest failing input.
fn shrink(mut tree: impl ValueTree<Value = Vec<u8>>, fails: &dyn Fn(&[u8]) -> bool) -> Vec<u8> {
    let mut smallest = tree.current();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && tree.simplify() {
        loop {
            let candidate = tree.current();
            if fails(&candidate) {
                smallest = candidate;
                break;
            }
            if !tree.complicate() {
                return smallest;
            }
        }
    }
    smallest
}

/// The generated inputs' budget per target without `FILECTX_FUZZ_SECONDS`: a developer's plain
/// `cargo test`, and with `FILECTX_LONG_TESTS=1` (CI).
pub const SHORT_SECONDS: f64 = 3.0;
pub const LONG_SECONDS: f64 = 60.0;

/// The budget of [`explore`], in seconds: `FILECTX_FUZZ_SECONDS`, else [`LONG_SECONDS`] when
/// `FILECTX_LONG_TESTS` is set (and neither empty nor `0`), else [`SHORT_SECONDS`].
pub fn budget_seconds() -> f64 {
    if let Ok(value) = std::env::var("FILECTX_FUZZ_SECONDS") {
        return value
            .parse()
            .unwrap_or_else(|_| panic!("FILECTX_FUZZ_SECONDS must be a number, not {value:?}"));
    }
    let long = std::env::var_os("FILECTX_LONG_TESTS").is_some_and(|v| !v.is_empty() && v != "0");
    if long { LONG_SECONDS } else { SHORT_SECONDS }
}

/// Runs `f` with the panic hook silenced for this thread's panics only: panics of tests running
/// meanwhile on other threads of the same test binary are still reported as usual.
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    let me = std::thread::current().id();
    let previous = Arc::new(std::panic::take_hook());
    let chained = Arc::clone(&previous);
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != me {
            (*chained)(info);
        }
    }));
    let result = f();
    // Drop the silencing hook (and its reference to the previous one), then put that one back.
    drop(std::panic::take_hook());
    match Arc::try_unwrap(previous) {
        Ok(hook) => std::panic::set_hook(hook),
        Err(shared) => std::panic::set_hook(Box::new(move |info| (*shared)(info))),
    }
    result
}

/// Runs generated inputs through `target` until the budget ([`budget_seconds`]) is spent;
/// returns the number of executions. A failure is shrunk, printed (as a Rust byte string, ready
/// for the corpus) and re-raised.
pub fn explore(name: &str, dir: &Path, target: &dyn Fn(&[u8])) -> u64 {
    let seconds = budget_seconds();
    let seed: u64 = std::env::var("FILECTX_FUZZ_SEED")
        .ok()
        .map(|s| s.parse().expect("FILECTX_FUZZ_SEED must be a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        });
    let mut rng_seed = [0u8; 32];
    rng_seed[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &rng_seed);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = inputs(corpus(dir).into_iter().map(|(_, bytes)| bytes).collect());
    let fails = |input: &[u8]| catch_unwind(AssertUnwindSafe(|| target(input))).is_err();

    let start = Instant::now();
    let budget = Duration::from_secs_f64(seconds.max(0.0));
    let mut executions = 0u64;
    let mut bytes = 0u64;
    while start.elapsed() < budget {
        let tree: NewTree<BoxedStrategy<Vec<u8>>> = strategy.new_tree(&mut runner);
        let tree = tree.unwrap();
        let input = tree.current();
        executions += 1;
        bytes += input.len() as u64;
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&input))) {
            let first = message(&panic);
            // The panic hook would print every failure the shrinking loop provokes: silence it
            // (for this thread: other tests of the binary may be running).
            let smallest = quietly(|| shrink(tree, &fails));
            let again = catch_unwind(AssertUnwindSafe(|| target(&smallest))).err().map(|p| message(&p));
            let saved = std::env::temp_dir().join(format!("filectx-fuzz-{name}-failure-{seed}"));
            let _ = std::fs::write(&saved, &smallest);
            let shown = &smallest[..smallest.len().min(2048)];
            panic!(
                "fuzz {name}: failure after {executions} executions (FILECTX_FUZZ_SEED={seed}): {first}\n\
                 smallest failing input ({} bytes, saved to {}; add it to the corpus once fixed): {}\n\
                 its failure: {}",
                smallest.len(),
                saved.display(),
                shown.escape_ascii(),
                again.unwrap_or_else(|| "(did not fail again: flaky)".into()),
            );
        }
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "fuzz {name}: {executions} executions in {secs:.1} s ({:.0}/s, {} KiB of input, FILECTX_FUZZ_SEED={seed})",
        executions as f64 / secs.max(1e-9),
        bytes / 1024,
    );
    executions
}

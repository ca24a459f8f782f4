//! The codec fuzz target on the stable toolchain: replays the cargo-fuzz corpus
//! (`daemon/fuzz/corpus/codec`) and runs generated inputs through
//! `filectx_protocol::fuzzing::codec`, the function the nightly `cargo fuzz run codec` target
//! calls, for 3 s (60 s with `FILECTX_LONG_TESTS=1`, as in CI; `FILECTX_FUZZ_SECONDS` overrides
//! both; see `crate::fuzz_driver`).

use std::cell::Cell;
use std::path::PathBuf;

use filectx_protocol::MAX_HEADER_BYTES;
use filectx_protocol::fuzzing::codec;

use crate::fuzz_driver;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../daemon/fuzz/corpus/codec")
}

#[test]
fn codec_corpus_replays_cleanly() {
    fuzz_driver::replay("codec", &corpus_dir(), &|data| {
        codec(data);
    });
}

#[test]
fn codec_survives_generated_inputs() {
    let (frames, oversized, failed) = (Cell::new(0usize), Cell::new(0usize), Cell::new(0usize));
    let (buffered, capacity) = (Cell::new(0usize), Cell::new(0usize));
    let executions = fuzz_driver::explore("codec", &corpus_dir(), &|data| {
        let run = codec(data);
        frames.set(frames.get() + run.frames);
        oversized.set(oversized.get() + run.oversized);
        failed.set(failed.get() + usize::from(run.failed));
        buffered.set(buffered.get().max(run.max_buffered));
        capacity.set(capacity.get().max(run.max_capacity));
    });
    eprintln!(
        "fuzz codec: {} frames, {} oversized frames skipped, {} streams closed on a codec error; \
         at most {} bytes stayed buffered between reads (header cap {MAX_HEADER_BYTES}), \
         read buffer capacity at most {} bytes",
        frames.get(),
        oversized.get(),
        failed.get(),
        buffered.get(),
        capacity.get(),
    );
    assert!(executions > 0 || std::env::var("FILECTX_FUZZ_SECONDS").is_ok_and(|s| s == "0"));
}

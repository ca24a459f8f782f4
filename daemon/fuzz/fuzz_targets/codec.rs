//! Fuzz target: arbitrary bytes, in arbitrary chunkings, through the LSP codec's decoder
//! (`filectx_protocol::fuzzing::codec` holds the input layout and every check).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    filectx_protocol::fuzzing::codec(data);
});

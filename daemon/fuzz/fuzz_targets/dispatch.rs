//! Fuzz target: arbitrary bytes into one daemon connection after its session is initialized
//! (`filectx_daemon::fuzzing::dispatch` runs the real connection driver and checks its answers).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    filectx_daemon::fuzzing::dispatch(data);
});

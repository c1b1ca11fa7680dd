//! cargo-fuzz target `reader`: the logic lives in `plan_fuzz::reader` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plan_fuzz::reader::run(data));

//! cargo-fuzz target `roundtrip`: the logic lives in `plan_fuzz::roundtrip` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plan_fuzz::roundtrip::run(data));

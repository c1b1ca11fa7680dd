//! cargo-fuzz target `template`: the logic lives in `plan_fuzz::template` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plan_fuzz::template::run(data));

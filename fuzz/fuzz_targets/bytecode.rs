//! cargo-fuzz target `bytecode`: the logic lives in `plan_fuzz::bytecode` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plan_fuzz::bytecode::run(data));

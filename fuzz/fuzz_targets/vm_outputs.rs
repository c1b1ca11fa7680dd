//! cargo-fuzz target `vm_outputs`: the logic lives in `plan_fuzz::vm_outputs` (see fuzz/README.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plan_fuzz::vm_outputs::run(data));

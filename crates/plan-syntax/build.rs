//! Compiles `grammar/*.lalrpop` (at the workspace root, where the issue asks for it) into
//! OUT_DIR; `src/arith.rs` includes the result with `lalrpop_mod!`.

fn main() {
    println!("cargo:rerun-if-changed=../../grammar");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    lalrpop::Configuration::new()
        .set_in_dir("../../grammar")
        .set_out_dir(out_dir)
        .process()
        .expect("grammar/arith.lalrpop must compile");
}

//! Rebuilds the crate when a PostgreSQL migration is added: `embed_migrations!` reads the
//! directory while compiling, which cargo does not watch by itself.
fn main() {
    println!("cargo:rerun-if-changed=src/pg_migrations");
}

//! `cargo run -p plan-embed --example embed -- MODEL_DIR < lines`: each line's token ids
//! and embedding, one JSON object a line, to compare with another implementation.

use std::io::BufRead;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: embed MODEL_DIR < lines");
    let model = plan_embed::Model::load(dir.as_ref()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let ids = model.token_ids(&line);
        let vector = model.embed(&line);
        println!("{}", serde_json::json!({"ids": ids, "vector": vector}));
    }
}

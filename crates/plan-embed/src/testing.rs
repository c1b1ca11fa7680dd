//! A tiny BERT model written to a directory, for tests of what uses embeddings (the
//! `testing` feature): 2 layers of 8 units in 2 heads, a vocabulary of the words below,
//! weights from a formula (the same in `tests/reference.py`, which computes what the
//! model must give).

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, View};

/// The vocabulary, in id order.
pub const VOCAB: &[&str] = &[
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "customers",
    "orders",
    "products",
    "stores",
    "staff",
    "which",
    "bought",
    "most",
    "the",
    "name",
    "id",
    ",",
    ".",
    "##s",
    "column",
    "columns",
    ":",
    "who",
    "sold",
];

const HIDDEN: usize = 8;
const INTERMEDIATE: usize = 16;
const LAYERS: usize = 2;
const POSITIONS: usize = 16;

/// The `k`th tensor's `j`th weight.
fn weight(k: usize, j: usize) -> f32 {
    ((j * 7 + k * 13) % 17) as f32 / 20.0 - 0.4
}

struct Tensor {
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl View for &Tensor {
    fn dtype(&self) -> Dtype {
        Dtype::F32
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

/// The tensors' names and shapes, in the order their weights are made.
pub fn shapes() -> Vec<(String, Vec<usize>)> {
    let (h, i) = (HIDDEN, INTERMEDIATE);
    let mut t = vec![
        (
            "embeddings.word_embeddings.weight".to_owned(),
            vec![VOCAB.len(), h],
        ),
        (
            "embeddings.position_embeddings.weight".to_owned(),
            vec![POSITIONS, h],
        ),
        (
            "embeddings.token_type_embeddings.weight".to_owned(),
            vec![2, h],
        ),
        ("embeddings.LayerNorm.weight".to_owned(), vec![h]),
        ("embeddings.LayerNorm.bias".to_owned(), vec![h]),
    ];
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}");
        for (name, shape) in [
            ("attention.self.query", vec![h, h]),
            ("attention.self.key", vec![h, h]),
            ("attention.self.value", vec![h, h]),
            ("attention.output.dense", vec![h, h]),
            ("intermediate.dense", vec![i, h]),
            ("output.dense", vec![h, i]),
        ] {
            t.push((format!("{p}.{name}.weight"), shape.clone()));
            t.push((format!("{p}.{name}.bias"), vec![shape[0]]));
        }
        for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
            t.push((format!("{p}.{name}.weight"), vec![h]));
            t.push((format!("{p}.{name}.bias"), vec![h]));
        }
    }
    t
}

/// Writes the model into `dir` (which must exist), with `max_seq_length` as its length.
pub fn write_tiny_model(dir: &Path, max_seq_length: usize) {
    let tensors: Vec<(String, Tensor)> = shapes()
        .into_iter()
        .enumerate()
        .map(|(k, (name, shape))| {
            let n: usize = shape.iter().product();
            let bytes = (0..n).flat_map(|j| weight(k, j).to_le_bytes()).collect();
            (name, Tensor { shape, bytes })
        })
        .collect();
    let views = tensors.iter().map(|(n, t)| (n.as_str(), t));
    let weights = safetensors::serialize(views, None).expect("serialize the tiny model");
    std::fs::write(dir.join("model.safetensors"), weights).expect("write the weights");
    let config = serde_json::json!({
        "model_type": "bert", "hidden_size": HIDDEN, "num_attention_heads": 2,
        "num_hidden_layers": LAYERS, "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": POSITIONS, "vocab_size": VOCAB.len(),
        "layer_norm_eps": 1e-12, "hidden_act": "gelu",
    });
    std::fs::write(dir.join("config.json"), config.to_string()).expect("write the config");
    let vocab: HashMap<&str, usize> = VOCAB.iter().enumerate().map(|(i, w)| (*w, i)).collect();
    let tokenizer = serde_json::json!({
        "normalizer": {"type": "BertNormalizer", "lowercase": true, "strip_accents": null,
                       "clean_text": true, "handle_chinese_chars": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).expect("write the tokenizer");
    let sentence = serde_json::json!({"max_seq_length": max_seq_length});
    std::fs::write(dir.join("sentence_bert_config.json"), sentence.to_string())
        .expect("write the length");
}

//! The tiny model of `plan_embed::testing` against `reference.py`, and every damaged
//! model directory an error rather than a panic.

use plan_embed::{Model, similarity, testing};

fn tiny(max_seq_length: usize) -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    testing::write_tiny_model(dir.path(), max_seq_length);
    let model = Model::load(dir.path()).unwrap();
    (dir, model)
}

#[test]
fn the_tiny_model_embeds_as_the_reference_does() {
    let (_dir, model) = tiny(16);
    let text = "Which customers bought the most products?";
    assert_eq!(model.token_ids(text), [2, 9, 4, 10, 12, 11, 6, 1, 3]);
    // NB: `python3 tests/reference.py`.
    let want = [
        -0.347138, 0.334058, 0.012639, 0.286, -0.257404, -0.379146, -0.689597, 0.019785,
    ];
    let got = model.embed(text);
    assert_eq!(got.len(), model.dimensions());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{got:?} is not {want:?}");
    }
    assert!((similarity(&got, &got) - 1.0).abs() < 1e-5);
}

#[test]
fn a_text_is_cut_to_the_model_s_length() {
    let (_dir, model) = tiny(5);
    assert_eq!(model.max_tokens(), 5);
    assert_eq!(
        model.token_ids("the staff sold the products"),
        [2, 12, 8, 22, 3]
    );
    // NB: the rest of a text past the length changes nothing.
    assert_eq!(
        model.embed("the staff sold the products"),
        model.embed("the staff sold orders")
    );
    // The text with no word is `[CLS] [SEP]`, still of length 1.
    let empty = model.embed("");
    assert!((similarity(&empty, &empty) - 1.0).abs() < 1e-5);
}

#[test]
fn texts_are_embedded_alike_on_many_threads() {
    let (_dir, model) = tiny(16);
    let texts: Vec<String> = ["customers", "orders", "the staff", "", "stores sold"]
        .iter()
        .map(|t| t.to_string())
        .collect();
    let one_by_one: Vec<Vec<f32>> = texts.iter().map(|t| model.embed(t)).collect();
    assert_eq!(model.embed_all(&texts), one_by_one);
}

#[test]
fn a_damaged_model_is_an_error() {
    type Damage = fn(&std::path::Path);
    let damages: &[(&str, Damage, &str)] = &[
        (
            "no weights",
            |d| std::fs::remove_file(d.join("model.safetensors")).unwrap(),
            "model.safetensors: No such file",
        ),
        (
            "weights cut short",
            |d| {
                let bytes = std::fs::read(d.join("model.safetensors")).unwrap();
                std::fs::write(d.join("model.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
            },
            "model.safetensors: ",
        ),
        (
            "a config that is not JSON",
            |d| std::fs::write(d.join("config.json"), "{").unwrap(),
            "config.json: ",
        ),
        (
            "another model",
            |d| edit(d, "config.json", |c| c["model_type"] = "gpt2".into()),
            "config.json: a `gpt2` model, not BERT",
        ),
        (
            "heads that do not divide the units",
            |d| edit(d, "config.json", |c| c["num_attention_heads"] = 3.into()),
            "config.json: 8 hidden units in 3 attention heads",
        ),
        (
            "a larger vocabulary than the weights",
            |d| edit(d, "config.json", |c| c["vocab_size"] = 24.into()),
            "`embeddings.word_embeddings.weight` is [23, 8], not [24, 8]",
        ),
        (
            "a tokenizer past the vocabulary",
            |d| {
                edit(d, "tokenizer.json", |t| {
                    t["model"]["vocab"]["far"] = 99.into()
                })
            },
            "tokenizer.json: ids up to 99, past the model's 23 words",
        ),
        (
            "too few positions",
            |d| {
                edit(d, "config.json", |c| {
                    c["max_position_embeddings"] = 2.into()
                })
            },
            "config.json: 2 positions: a text needs 3 at least",
        ),
        (
            "an unknown activation",
            |d| edit(d, "config.json", |c| c["hidden_act"] = "relu".into()),
            "config.json: activation `relu`",
        ),
        (
            "two poolings",
            |d| {
                std::fs::create_dir(d.join("1_Pooling")).unwrap();
                std::fs::write(
                    d.join("1_Pooling/config.json"),
                    r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}"#,
                )
                .unwrap();
            },
            "only mean or [CLS] pooling",
        ),
    ];
    for (what, damage, message) in damages {
        let dir = tempfile::tempdir().unwrap();
        testing::write_tiny_model(dir.path(), 16);
        damage(dir.path());
        let Err(e) = Model::load(dir.path()) else {
            panic!("{what}: loaded");
        };
        assert!(e.to_string().contains(message), "{what}: {e}");
    }
}

fn edit(dir: &std::path::Path, file: &str, change: fn(&mut serde_json::Value)) {
    let path = dir.join(file);
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    change(&mut value);
    std::fs::write(path, value.to_string()).unwrap();
}

#[test]
fn a_model_changed_anywhere_has_another_fingerprint() {
    let (dir, model) = tiny(16);
    let path = dir.path().join("model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    // NB: a weight in the middle of the file, as fine-tuning one layer changes it.
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let changed = Model::load(dir.path()).unwrap();
    assert_ne!(model.fingerprint(), changed.fingerprint());
    assert_eq!(model.fingerprint().len(), 32);
}

//! Tables' embeddings kept between processes: embedding a schema's tables takes a
//! model tens of milliseconds a table, a question's one embedding a few. The file is
//! named by a hash of the model's fingerprint and every document embedded, so a changed
//! schema or model is embedded again and a stale file is never read.

use std::path::Path;
use std::sync::Arc;

use plan_embed::Model;
use sha2::{Digest, Sha256};

use crate::ground::Index;

/// The first bytes of a file of embeddings.
const MAGIC: &[u8; 8] = b"PLANEMB1";

/// `index` with `model`'s embeddings of its tables, read from `dir` when an earlier
/// process kept them there, else computed and kept there (when `dir` is given and
/// writable: a cache that cannot be written is only slower).
pub fn embedded(index: Index, model: Arc<Model>, dir: Option<&Path>) -> Index {
    let documents = index.embedding_documents();
    let Some(dir) = dir else {
        return index.embedded(model);
    };
    let mut hash = Sha256::new();
    hash.update(model.fingerprint());
    for d in &documents {
        match d {
            Some(d) => {
                hash.update([1]);
                hash.update((d.len() as u64).to_le_bytes());
                hash.update(d);
            }
            None => hash.update([0]),
        }
    }
    let key: String = hash
        .finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    let file = dir.join(format!("{key}.bin"));
    if let Ok(bytes) = std::fs::read(&file)
        && let Some(vectors) = decode(&bytes, documents.len(), model.dimensions())
    {
        return index.with_embeddings(model, vectors);
    }
    let vectors = crate::ground::embed_documents(&model, &documents);
    crate::database::keep(dir, &file, &encode(&vectors, model.dimensions()));
    index.with_embeddings(model, vectors)
}

/// `MAGIC`, the count and the dimensions (u32, little-endian), then each table's
/// vector: a byte (1: present, 0: none) and, when present, its floats.
fn encode(vectors: &[Vec<f32>], dimensions: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + vectors.len() * (1 + 4 * dimensions));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(vectors.len() as u32).to_le_bytes());
    out.extend_from_slice(&(dimensions as u32).to_le_bytes());
    for v in vectors {
        out.push(u8::from(!v.is_empty()));
        for f in v {
            out.extend_from_slice(&f.to_le_bytes());
        }
    }
    out
}

/// The vectors `encode` wrote, if `bytes` is such a file for `count` tables of
/// `dimensions` (anything else, a truncated or foreign file included, is `None`).
fn decode(bytes: &[u8], count: usize, dimensions: usize) -> Option<Vec<Vec<f32>>> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (n, rest) = rest.split_first_chunk::<4>()?;
    let (d, mut rest) = rest.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*n) as usize != count || u32::from_le_bytes(*d) as usize != dimensions {
        return None;
    }
    let mut vectors = Vec::with_capacity(count);
    for _ in 0..count {
        let (&present, after) = rest.split_first()?;
        rest = after;
        match present {
            0 => vectors.push(Vec::new()),
            1 => {
                let (floats, after) = rest.split_at_checked(4 * dimensions)?;
                rest = after;
                let v = floats.chunks_exact(4);
                vectors.push(
                    v.map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect(),
                );
            }
            _ => return None,
        }
    }
    rest.is_empty().then_some(vectors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ground::{Budget, Column, Schema, Table};

    /// Tables the question's words match, more or less, then `zeta`, which they do not.
    fn schema() -> Schema {
        let tables = [
            ("customers", &["name", "region"][..]),
            ("products", &["name", "price"]),
            ("orders", &["customer", "product", "total"]),
            ("stores", &["city"]),
            ("staff", &["name", "store"]),
            ("regions", &["country"]),
            ("suppliers", &["phone"]),
            ("shipments", &["carrier"]),
            ("returns", &["reason"]),
            ("categories", &["label"]),
            ("warehouses", &["capacity"]),
            ("zeta", &[]),
        ];
        let tables = tables
            .iter()
            .map(|(name, columns)| Table {
                name: name.to_string(),
                columns: (columns.iter())
                    .map(|c| Column {
                        name: c.to_string(),
                        ty: "TEXT".to_owned(),
                        ..Column::default()
                    })
                    .collect(),
                ..Table::default()
            })
            .collect();
        Schema { tables }
    }

    fn model() -> (tempfile::TempDir, Arc<Model>) {
        let dir = tempfile::tempdir().unwrap();
        plan_embed::testing::write_tiny_model(dir.path(), 16);
        let model = Model::load(dir.path()).unwrap();
        (dir, Arc::new(model))
    }

    #[test]
    fn a_table_that_means_what_the_question_does_rises() {
        let (_dir, model) = model();
        let question = "which customers bought the most products";
        let index = Index::new(schema());
        let place = |ranked: Vec<String>| ranked.iter().position(|t| t == "zeta").unwrap();
        let by_words = place(index.rank(question));
        assert_eq!(by_words, 11);
        // `zeta`'s embedding is the question's own; the others' are other texts'.
        let vectors = (0..12)
            .map(|i| match i {
                11 => model.embed(question),
                _ => model.embed(&format!("the staff {i}")),
            })
            .collect();
        let index = Index::new(schema()).with_embeddings(model, vectors);
        let by_both = place(index.rank(question));
        assert!(by_both < by_words, "zeta at {by_both}");
        let budget = Budget {
            tables: by_both + 1,
            ..Budget::default()
        };
        assert!(
            index
                .ground(question, budget)
                .tables
                .contains(&"zeta".to_owned())
        );
    }

    #[test]
    fn embeddings_are_kept_and_read_back() {
        let (_dir, model) = model();
        let kept = tempfile::tempdir().unwrap();
        let first = embedded(Index::new(schema()), model.clone(), Some(kept.path()));
        let files: Vec<_> = std::fs::read_dir(kept.path()).unwrap().collect();
        assert_eq!(files.len(), 1);
        let computed = Index::new(schema()).embedded(model.clone());
        assert_eq!(first.embedding_vectors(), computed.embedding_vectors());
        // NB: read back, not computed: a file with other vectors of the right shape is
        // believed.
        let file = files[0].as_ref().unwrap().path();
        let other: Vec<Vec<f32>> = (computed.embedding_vectors().iter())
            .map(|v| v.iter().map(|f| -f).collect())
            .collect();
        std::fs::write(&file, encode(&other, model.dimensions())).unwrap();
        let again = embedded(Index::new(schema()), model.clone(), Some(kept.path()));
        assert_eq!(again.embedding_vectors(), other);
        // A damaged file is embedded again, and written again.
        std::fs::write(&file, b"PLANEMB1").unwrap();
        let mended = embedded(Index::new(schema()), model, Some(kept.path()));
        assert_eq!(mended.embedding_vectors(), computed.embedding_vectors());
        assert!(std::fs::metadata(&file).unwrap().len() > 8);
    }

    #[test]
    fn vectors_come_back_as_written_and_a_damaged_file_is_refused() {
        let vectors = vec![vec![0.5, -1.0], Vec::new(), vec![2.0, 0.25]];
        let bytes = encode(&vectors, 2);
        assert_eq!(decode(&bytes, 3, 2), Some(vectors));
        assert_eq!(decode(&bytes[..bytes.len() - 1], 3, 2), None);
        assert_eq!(decode(&bytes, 2, 2), None);
        assert_eq!(decode(&bytes, 3, 3), None);
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer, 3, 2), None);
        let mut foreign = bytes;
        foreign[16] = 7;
        assert_eq!(decode(&foreign, 3, 2), None);
    }
}

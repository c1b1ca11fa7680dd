//! Sentence embeddings by a BERT model kept in a local directory, laid out as
//! sentence-transformers saves one: `config.json`, `tokenizer.json` (WordPiece),
//! `model.safetensors`, and optionally `sentence_bert_config.json` and
//! `1_Pooling/config.json`. Nothing is downloaded: the directory is wherever a package
//! installed the model. A text's embedding is its tokens' last states, mean-pooled (or
//! its `[CLS]` state, as the pooling config says), of length 1, so that a dot product is
//! the cosine.

mod bert;
#[cfg(feature = "testing")]
pub mod testing;
mod wordpiece;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Why a model directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config.json: {0}")]
    Config(String),
    #[error("tokenizer.json: {0}")]
    Tokenizer(String),
    #[error("model.safetensors: {0}")]
    Weights(String),
    #[error("model.safetensors: no tensor `{0}`")]
    Missing(String),
    #[error("model.safetensors: `{name}` is {found:?}, not {wanted:?}")]
    Shape {
        name: String,
        found: Vec<usize>,
        wanted: Vec<usize>,
    },
    #[error("model.safetensors: `{0}` holds {1}, not F32, F16 or BF16")]
    Dtype(String, String),
}

/// A loaded model: `embed` is pure and may be called from many threads at once.
pub struct Model {
    tokenizer: wordpiece::Tokenizer,
    bert: bert::Bert,
    max_tokens: usize,
    cls_pooling: bool,
    hidden: usize,
    fingerprint: String,
}

#[derive(Deserialize)]
struct SentenceConfig {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct TokenizerLimits {
    truncation: Option<Truncation>,
}

#[derive(Deserialize)]
struct Truncation {
    max_length: usize,
}

#[derive(Deserialize)]
struct Pooling {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default = "yes")]
    pooling_mode_mean_tokens: bool,
}

fn yes() -> bool {
    true
}

fn read(path: PathBuf) -> Result<Vec<u8>, LoadError> {
    std::fs::read(&path).map_err(|source| LoadError::Read { path, source })
}

fn optional<T: for<'de> Deserialize<'de>>(path: PathBuf) -> Result<Option<T>, LoadError> {
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| LoadError::Config(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LoadError::Read { path, source }),
    }
}

impl Model {
    /// The model in `dir`.
    pub fn load(dir: &Path) -> Result<Model, LoadError> {
        let config_json = read(dir.join("config.json"))?;
        let config: bert::Config =
            serde_json::from_slice(&config_json).map_err(|e| LoadError::Config(e.to_string()))?;
        let tokenizer_json = String::from_utf8(read(dir.join("tokenizer.json"))?)
            .map_err(|e| LoadError::Tokenizer(e.to_string()))?;
        let tokenizer = wordpiece::Tokenizer::parse(&tokenizer_json)?;
        let limits: TokenizerLimits = serde_json::from_str(&tokenizer_json)
            .map_err(|e| LoadError::Tokenizer(e.to_string()))?;
        let sentence: Option<SentenceConfig> = optional(dir.join("sentence_bert_config.json"))?;
        let pooling: Option<Pooling> = optional(dir.join("1_Pooling").join("config.json"))?;
        let cls_pooling = match pooling {
            None => false,
            Some(p) if p.pooling_mode_mean_tokens && !p.pooling_mode_cls_token => false,
            Some(p) if p.pooling_mode_cls_token && !p.pooling_mode_mean_tokens => true,
            Some(_) => {
                let why = "1_Pooling/config.json: only mean or [CLS] pooling, one of them";
                return Err(LoadError::Config(why.to_owned()));
            }
        };
        if tokenizer.max_id() >= config.vocab_size {
            return Err(LoadError::Tokenizer(format!(
                "ids up to {}, past the model's {} words",
                tokenizer.max_id(),
                config.vocab_size
            )));
        }
        let weights = read(dir.join("model.safetensors"))?;
        let bert = bert::Bert::load(&config, &weights)?;
        // NB: what tells one model from another: its configuration and vocabulary, and a
        // checksum of every weight (SHA-256 of 90 MB would double a small process's
        // time; CRC-32 takes milliseconds, and a model changed anywhere, fine-tuned
        // layers included, changes it).
        let mut hash = Sha256::new();
        for part in [&config_json[..], tokenizer_json.as_bytes()] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
        hash.update((weights.len() as u64).to_le_bytes());
        hash.update(crc32fast::hash(&weights).to_le_bytes());
        let fingerprint = hash
            .finalize()
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        // NB: the tightest limit any file states: the model was trained to it.
        let max_tokens = [
            limits.truncation.map(|t| t.max_length),
            sentence.and_then(|s| s.max_seq_length),
            Some(config.max_position_embeddings),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(config.max_position_embeddings)
        .clamp(3, config.max_position_embeddings);
        Ok(Model {
            tokenizer,
            bert,
            max_tokens,
            cls_pooling,
            hidden: config.hidden_size,
            fingerprint,
        })
    }

    /// 32 hex digits that differ between models (a hash of the configuration, the
    /// vocabulary and a checksum of the weights), to key embeddings kept on disk.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The length of every embedding.
    pub fn dimensions(&self) -> usize {
        self.hidden
    }

    /// The tokens a text is cut to, `[CLS]` and `[SEP]` included.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The token ids the model reads for `text`: `[CLS]`, its pieces (as many as fit),
    /// `[SEP]`.
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![self.tokenizer.cls];
        let pieces = self.tokenizer.pieces(text);
        ids.extend(pieces.iter().take(self.max_tokens - 2));
        ids.push(self.tokenizer.sep);
        ids
    }

    /// `text`'s embedding, of length 1 (all zeros for a text with no token, which is
    /// then as far from every other as can be).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let ids = self.token_ids(text);
        let states = self.bert.states(&ids);
        let h = self.hidden;
        let mut pooled = vec![0f32; h];
        match self.cls_pooling {
            true => pooled.copy_from_slice(&states[..h]),
            false => {
                for row in states.chunks_exact(h) {
                    pooled.iter_mut().zip(row).for_each(|(p, s)| *p += s);
                }
            }
        }
        let norm = pooled.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            pooled.iter_mut().for_each(|v| *v /= norm);
        }
        pooled
    }

    /// Every text's embedding, on as many threads as the machine has.
    pub fn embed_all(&self, texts: &[String]) -> Vec<Vec<f32>> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if texts.len() < 2 || threads < 2 {
            return texts.iter().map(|t| self.embed(t)).collect();
        }
        let chunk = texts.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let parts: Vec<_> = texts
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || part.iter().map(|t| self.embed(t)).collect::<Vec<_>>())
                })
                .collect();
            parts
                .into_iter()
                .flat_map(|p| {
                    // NB: a panic in the forward pass is a bug: it is the caller's.
                    p.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
                })
                .collect()
        })
    }
}

/// The dot product of two embeddings: their cosine.
pub fn similarity(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

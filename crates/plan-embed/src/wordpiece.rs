//! BERT's tokenizer, as `tokenizer.json` describes it (`BertNormalizer`,
//! `BertPreTokenizer`, `WordPiece`): text cleaned, lowercased and stripped of accents,
//! split at spaces and punctuation, and each word cut into the longest pieces of the
//! vocabulary, greedily from its start.

use std::collections::HashMap;

use serde::Deserialize;
use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::LoadError;

#[derive(Deserialize)]
struct File {
    normalizer: Option<Normalizer>,
    model: Model,
}

#[derive(Deserialize)]
struct Normalizer {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default = "yes")]
    lowercase: bool,
    strip_accents: Option<bool>,
    #[serde(default = "yes")]
    handle_chinese_chars: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct Model {
    #[serde(rename = "type")]
    kind: String,
    unk_token: String,
    #[serde(default = "continuing")]
    continuing_subword_prefix: String,
    #[serde(default = "max_chars")]
    max_input_chars_per_word: usize,
    vocab: HashMap<String, u32>,
}

fn continuing() -> String {
    "##".to_owned()
}

fn max_chars() -> usize {
    100
}

pub(crate) struct Tokenizer {
    vocab: HashMap<String, u32>,
    prefix: String,
    max_chars: usize,
    lowercase: bool,
    strip_accents: bool,
    chinese: bool,
    pub(crate) unk: u32,
    pub(crate) cls: u32,
    pub(crate) sep: u32,
}

impl Tokenizer {
    pub(crate) fn parse(json: &str) -> Result<Tokenizer, LoadError> {
        let bad = |why: String| LoadError::Tokenizer(why);
        let file: File = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
        if file.model.kind != "WordPiece" {
            return Err(bad(format!("a `{}` model, not WordPiece", file.model.kind)));
        }
        let (lowercase, strip_accents, chinese) = match file.normalizer {
            Some(n) if n.kind == "BertNormalizer" => (
                n.lowercase,
                n.strip_accents.unwrap_or(n.lowercase),
                n.handle_chinese_chars,
            ),
            Some(n) => return Err(bad(format!("a `{}` normalizer, not BERT's", n.kind))),
            None => (false, false, true),
        };
        let id = |token: &str| {
            (file.model.vocab.get(token).copied())
                .ok_or_else(|| bad(format!("no `{token}` in the vocabulary")))
        };
        Ok(Tokenizer {
            unk: id(&file.model.unk_token)?,
            cls: id("[CLS]")?,
            sep: id("[SEP]")?,
            prefix: file.model.continuing_subword_prefix,
            max_chars: file.model.max_input_chars_per_word,
            lowercase,
            strip_accents,
            chinese,
            vocab: file.model.vocab,
        })
    }

    /// The largest id the tokenizer gives.
    pub(crate) fn max_id(&self) -> u32 {
        (self.vocab.values().copied())
            .chain([self.unk, self.cls, self.sep])
            .max()
            .unwrap_or(0)
    }

    /// The ids of `text`'s pieces, without `[CLS]` and `[SEP]`.
    pub(crate) fn pieces(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        for word in self.normalized(text).split_whitespace() {
            self.word_pieces(word, &mut ids);
        }
        ids
    }

    /// `text` cleaned (control characters dropped, every space one space), spaced
    /// around punctuation and CJK ideographs, lowercased and without accents as the
    /// model was trained.
    fn normalized(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 8);
        let push = |c: char, out: &mut String| {
            if is_punctuation(c) || (self.chinese && is_cjk(c)) {
                out.push(' ');
                out.push(c);
                out.push(' ');
            } else {
                out.push(c);
            }
        };
        for c in text.chars() {
            if c == '\0' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
                continue;
            }
            if c.is_whitespace() {
                out.push(' ');
                continue;
            }
            match (self.lowercase, self.strip_accents) {
                (false, false) => push(c, &mut out),
                (lower, strip) => {
                    let lowered: Vec<char> = match lower {
                        true => c.to_lowercase().collect(),
                        false => vec![c],
                    };
                    for l in lowered {
                        if strip {
                            for d in std::iter::once(l).nfd().filter(|&d| !is_combining_mark(d)) {
                                push(d, &mut out);
                            }
                        } else {
                            push(l, &mut out);
                        }
                    }
                }
            }
        }
        out
    }

    fn word_pieces(&self, word: &str, ids: &mut Vec<u32>) {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        if chars.len() > self.max_chars {
            ids.push(self.unk);
            return;
        }
        let before = ids.len();
        let mut start = 0;
        let mut piece = String::new();
        while start < chars.len() {
            let mut end = chars.len();
            let found = loop {
                if end == start {
                    break None;
                }
                piece.clear();
                if start > 0 {
                    piece.push_str(&self.prefix);
                }
                let to = chars.get(end).map_or(word.len(), |&(i, _)| i);
                piece.push_str(&word[chars[start].0..to]);
                if let Some(&id) = self.vocab.get(piece.as_str()) {
                    break Some(id);
                }
                end -= 1;
            };
            let Some(id) = found else {
                // NB: a word with a part the vocabulary lacks is one unknown token.
                ids.truncate(before);
                ids.push(self.unk);
                return;
            };
            ids.push(id);
            start = end;
        }
    }
}

/// BERT's punctuation: ASCII's non-alphanumeric printable characters, and Unicode's
/// punctuation categories.
fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    matches!(
        get_general_category(c),
        GeneralCategory::ConnectorPunctuation
            | GeneralCategory::DashPunctuation
            | GeneralCategory::OpenPunctuation
            | GeneralCategory::ClosePunctuation
            | GeneralCategory::InitialPunctuation
            | GeneralCategory::FinalPunctuation
            | GeneralCategory::OtherPunctuation
    )
}

/// The CJK ideograph blocks BERT spaces apart.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> Tokenizer {
        let vocab = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "the", "cafe", ",", "!",
            "a", "##b", "中",
        ];
        let vocab: HashMap<&str, usize> = vocab.iter().enumerate().map(|(i, v)| (*v, i)).collect();
        let json = serde_json::json!({
            "normalizer": {"type": "BertNormalizer", "lowercase": true, "strip_accents": null},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": vocab,
                      "max_input_chars_per_word": 9}
        });
        Tokenizer::parse(&json.to_string()).unwrap()
    }

    #[test]
    fn words_are_cut_into_the_longest_pieces() {
        let t = tokenizer();
        assert_eq!(t.pieces("Unaffable, THE Café!"), [4, 5, 6, 9, 7, 8, 10]);
    }

    #[test]
    fn a_word_with_an_unknown_part_is_one_unknown_token() {
        let t = tokenizer();
        // `abx`: `a` and `##b` are known, `##x` is not; `muchtoolong` is over 9 characters.
        assert_eq!(t.pieces("ab abx muchtoolong\u{0}"), [11, 12, 1, 1]);
    }

    #[test]
    fn ideographs_and_punctuation_are_words() {
        let t = tokenizer();
        assert_eq!(t.pieces("中the—a"), [13, 7, 1, 11]);
    }

    #[test]
    fn a_tokenizer_that_is_not_bert_s_is_refused() {
        let json = r#"{"model": {"type": "BPE", "unk_token": "x", "vocab": {}}}"#;
        let e = Tokenizer::parse(json).err().unwrap();
        assert_eq!(
            e.to_string(),
            "tokenizer.json: a `BPE` model, not WordPiece"
        );
    }
}

//! A conversation's memory: the earlier goals of a session and what became of them, put
//! into the planner's prompt (`{{conversation}}`) so that a follow-up goal can refer to
//! them ("he", "that store", "the same for 2023"). Kept under a budget of tokens: when the
//! rounds are over it, the oldest ones are summarized by the planner's LLM, once, and the
//! summary stands for them from then on (the caller stores it).
//!
//! Tokens are estimated, not counted: a quarter of the bytes, which is what OpenAI's
//! tokenizers give for English prose within about 20% (more tokens for code and other
//! scripts). The budget is a bound on the prompt's growth, not an exact count.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Bytes per token, for estimates.
const BYTES_PER_TOKEN: usize = 4;

/// The default budget of a conversation in the prompt (`[planner] memory_tokens`).
pub const DEFAULT_MEMORY_TOKENS: usize = 2000;

/// Characters of one answer kept in the prompt: a long answer is cut (the summary has the
/// gist of older ones).
const ANSWER_CHARS: usize = 2000;

/// A variable of a round's plan is one of its key variables when its value is at most
/// this many characters (a string as it is, anything else as JSON): names, numbers, dates,
/// choices, short lists. Longer values are what retrievals and generations returned, which
/// the answer sums up.
const KEY_VALUE_CHARS: usize = 200;

/// Characters of one round's key variables in all (names and values).
const KEY_VARS_CHARS: usize = 600;

/// One earlier round of a session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The goal's id (its first run's).
    pub id: String,
    pub goal: String,
    /// The final answer, when it was answered.
    pub answer: Option<Value>,
    /// Why it was not, when it failed.
    pub error: Option<String>,
    /// Its plan's key variables, as `name = value` (see [`Turn::key_vars`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<String>,
}

/// What the planner is told of a session before a new goal.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// A summary of the rounds before `turns`, if any was made.
    pub summary: Option<String>,
    /// The rounds kept whole, oldest first.
    pub turns: Vec<Turn>,
}

/// The summary to store: the id of the last round it covers, and its text.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub upto: String,
    pub text: String,
}

impl Turn {
    fn text(&self) -> String {
        let outcome = match (&self.answer, &self.error) {
            (Some(Value::String(a)), _) => cut(a),
            (Some(a), _) => cut(&a.to_string()),
            (None, Some(e)) => format!("(not answered: {})", cut(e)),
            (None, None) => "(not answered)".to_owned(),
        };
        let mut text = format!("User: {}\nAnswer: {outcome}\n", self.goal.trim());
        if !self.vars.is_empty() {
            text.push_str("Variables of its plan: ");
            text.push_str(&self.vars.join("; "));
            text.push('\n');
        }
        text
    }

    /// The key variables of a plan that set `vars` (name and final value, in the order
    /// the plan first set them): those with short values, `final_answer` left out, at
    /// most [`KEY_VARS_CHARS`] characters in all. They carry what a follow-up refers to
    /// that the answer may not spell out ("the same store": `store = Berlin`).
    pub fn key_vars<'a>(vars: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Vec<String> {
        let mut out = Vec::new();
        let mut room = KEY_VARS_CHARS;
        for (name, value) in vars {
            if name == "final_answer" {
                continue;
            }
            let text = match value {
                Value::String(s) => s.trim().to_owned(),
                other => other.to_string(),
            };
            let len = text.chars().count();
            if text.is_empty() || len > KEY_VALUE_CHARS {
                continue;
            }
            let item = format!("{name} = {text}");
            let n = item.chars().count();
            if n > room {
                break;
            }
            room -= n;
            out.push(item);
        }
        out
    }
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(ANSWER_CHARS) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// Estimated tokens of `text`.
pub fn tokens(text: &str) -> usize {
    text.len().div_ceil(BYTES_PER_TOKEN)
}

impl Conversation {
    pub fn is_empty(&self) -> bool {
        self.summary.is_none() && self.turns.is_empty()
    }

    /// The conversation as the prompt shows it (empty when there is none).
    pub fn text(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "# The conversation so far\n\nThe goal below follows these earlier ones of the \
             same user, oldest first. It may refer to them (\"he\", \"that store\", \"the \
             same for 2023\"): resolve such references from here.\n\n",
        );
        if let Some(summary) = &self.summary {
            out.push_str("Summary of the earlier rounds: ");
            out.push_str(summary.trim());
            out.push_str("\n\n");
        }
        for t in &self.turns {
            out.push_str(&t.text());
            out.push('\n');
        }
        out
    }

    /// How many of the oldest turns to summarize so that the rest fits in `budget`
    /// tokens: the newest turns that fit in three quarters of it are kept (at least one;
    /// the summary has the rest), at least one is summarized. None when everything fits.
    pub fn over_budget(&self, budget: usize) -> Option<usize> {
        if tokens(&self.text()) <= budget || self.turns.len() <= 1 {
            return None;
        }
        let room = budget - budget / 4;
        let (mut size, mut keep) = (0, 0);
        for t in self.turns.iter().rev() {
            let n = tokens(&t.text());
            if keep > 0 && size + n > room {
                break;
            }
            size += n;
            keep += 1;
        }
        Some(self.turns.len() - keep.min(self.turns.len() - 1))
    }

    /// The request that asks the planner's LLM to summarize the summary so far and the
    /// first `fold` turns.
    pub fn summary_prompt(&self, fold: usize) -> String {
        let mut text = String::from(
            "Summarize this conversation between a user and an assistant for the assistant's \
             own memory: who and what was asked about, the facts and numbers the answers \
             gave, and anything a later question could refer to (people, places, periods). \
             At most 150 words, plain prose, no preamble.\n\n",
        );
        if let Some(s) = &self.summary {
            text.push_str("Earlier summary: ");
            text.push_str(s.trim());
            text.push_str("\n\n");
        }
        for t in &self.turns[..fold] {
            text.push_str(&t.text());
            text.push('\n');
        }
        text
    }

    /// The conversation once the first `fold` turns are summarized as `summary`.
    pub fn folded(&self, fold: usize, summary: String) -> (Conversation, Summary) {
        let upto = self.turns[fold - 1].id.clone();
        (
            Conversation {
                summary: Some(summary.clone()),
                turns: self.turns[fold..].to_vec(),
            },
            Summary {
                upto,
                text: summary,
            },
        )
    }

    /// What the planner's cassette keys a call by, beside the goal (empty: nothing, so
    /// that an ask without a conversation keeps its key).
    pub(crate) fn key(&self, key: &mut Map<String, Value>) {
        if !self.is_empty() {
            key.insert("conversation".into(), json!(self.text()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(i: usize, answer: &str) -> Turn {
        Turn {
            id: format!("g{i}"),
            goal: format!("question {i}"),
            answer: Some(json!(answer)),
            error: None,
            vars: Vec::new(),
        }
    }

    #[test]
    fn a_round_shows_its_plan_s_short_variables_within_their_budget() {
        let long = "doc ".repeat(100);
        let vars = [
            ("docs", json!(long)),
            ("top_seller", json!("Alice Chen")),
            ("final_answer", json!("Alice Chen sold the most")),
            ("year", json!(2024)),
            ("stores", json!(["Berlin", "Paris"])),
        ];
        let kept = Turn::key_vars(vars.iter().map(|(n, v)| (*n, v)));
        assert_eq!(
            kept,
            [
                "top_seller = Alice Chen",
                "year = 2024",
                r#"stores = ["Berlin","Paris"]"#
            ]
        );
        let t = Turn {
            vars: kept,
            ..turn(1, "Alice Chen sold the most")
        };
        assert!(
            t.text()
                .ends_with("Variables of its plan: top_seller = Alice Chen; year = 2024; stores = [\"Berlin\",\"Paris\"]\n"),
            "{}",
            t.text()
        );
        let many: Vec<(String, Value)> = (0..100)
            .map(|i| (format!("v{i}"), json!("x".repeat(50))))
            .collect();
        let kept = Turn::key_vars(many.iter().map(|(n, v)| (n.as_str(), v)));
        let chars: usize = kept.iter().map(|k| k.chars().count()).sum();
        assert!(chars <= KEY_VARS_CHARS && kept.len() > 5, "{chars}");
    }

    #[test]
    fn a_conversation_that_fits_is_kept_whole() {
        let c = Conversation {
            summary: None,
            turns: vec![turn(1, "one"), turn(2, "two")],
        };
        assert_eq!(c.over_budget(1000), None);
        let text = c.text();
        assert!(text.contains("User: question 1\nAnswer: one"), "{text}");
        assert!(text.find("question 1") < text.find("question 2"));
    }

    #[test]
    fn over_the_budget_the_oldest_turns_are_folded_and_the_newest_kept() {
        let long = "x".repeat(400);
        let c = Conversation {
            summary: None,
            turns: (1..=6).map(|i| turn(i, &long)).collect(),
        };
        let fold = c.over_budget(300).expect("over the budget");
        assert!((1..6).contains(&fold), "{fold}");
        let (after, summary) = c.folded(fold, "short".into());
        assert_eq!(summary.upto, format!("g{fold}"));
        assert_eq!(after.turns.last(), c.turns.last());
        assert!(tokens(&after.text()) < tokens(&c.text()));
        assert!(c.summary_prompt(fold).contains("question 1"));
    }

    #[test]
    fn an_empty_conversation_adds_nothing() {
        let c = Conversation::default();
        assert_eq!(c.text(), "");
        let mut key = Map::new();
        c.key(&mut key);
        assert!(key.is_empty());
    }
}

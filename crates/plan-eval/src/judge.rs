//! The LLM judge (`[eval.judge]`): it gets the goal, the expected answer if any and the
//! answer, with a rubric prompt (`judge.md`, or the tools file's own), and replies
//! `{"verdict": "pass"|"fail", "score": 0..1, "reason": ...}`, read leniently (the first
//! JSON object in the reply). A judge that cannot be reached, or a reply that cannot be
//! read, is a failed grading with that reason, never a crash. Its calls are recorded and
//! replayed with the planner's (tool `judge`, args `goal`, `expected`, `answer`).

use std::time::Instant;

use plan_host::{CassetteEntry, Host};
use plan_llm::{ChatClient, Message, Usage};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::Case;

/// The built-in rubric.
const RUBRIC: &str = include_str!("judge.md");
/// The cassette's name for the judge's calls.
pub const JUDGE_TOOL: &str = "judge";

/// What the judge said of one answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub passed: bool,
    pub score: f64,
    pub reason: String,
    /// The tokens the judge's reply cost, when its server says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// An LLM that grades answers.
pub struct Judge {
    /// None when every answer is graded from cassettes.
    chat: Option<ChatClient>,
    /// Its model's price (`[pricing]`), if it has one.
    price: Option<plan_manifest::Price>,
    rubric: String,
}

impl Judge {
    /// The judge `host`'s tools file configures (`[eval.judge]`), if any: its backend, or
    /// `[defaults.backend]`; none is needed when every case `replays` its calls.
    pub fn for_host(host: &Host, replays: bool) -> Result<Option<Judge>, String> {
        let manifest = host.manifest();
        let Some(cfg) = manifest.eval.as_ref().and_then(|e| e.judge.as_ref()) else {
            return Ok(None);
        };
        let rubric = match &cfg.prompt {
            None => RUBRIC.to_owned(),
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("[eval.judge] prompt {path}: {e}"))?,
        };
        if replays || host.replay().is_some() {
            return Ok(Some(Judge {
                chat: None,
                price: None,
                rubric,
            }));
        }
        let backend = cfg
            .backend
            .as_ref()
            .or(manifest.default_backend.as_ref())
            .ok_or("[eval.judge] has no backend: configure [eval.judge.backend] (or [defaults.backend])")?;
        let chat = host
            .connector()
            .chat("the judge", backend)
            .map_err(|e| e.message)?
            .with_temperature(cfg.temperature);
        let price = match backend {
            plan_manifest::BackendConfig::Openai { model, .. } => {
                manifest.pricing.get(model).copied()
            }
            _ => None,
        };
        Ok(Some(Judge {
            chat: Some(chat),
            price,
            rubric,
        }))
    }

    /// The judge's verdict on `answer` to `case`: from `host`'s `--replay` cassette when
    /// it has one, else asked and recorded to its `--record` cassette, if any.
    pub async fn grade(&self, host: &Host, case: &Case, answer: &Value) -> Verdict {
        let answer = crate::grade::answer_text(answer);
        let expected = case.expected.as_deref().unwrap_or("(none given)");
        let mut key = Map::new();
        key.insert("goal".into(), json!(case.goal));
        key.insert("expected".into(), json!(case.expected));
        key.insert("answer".into(), json!(answer));
        let mut usage = None;
        let reply = match (host.replay(), &self.chat) {
            (Some(replay), _) => replay
                .answer(JUDGE_TOOL, &key.into(), None)
                .await
                .map(|v| match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                })
                .map_err(|e| e.message),
            (None, Some(chat)) => {
                let prompt = self
                    .rubric
                    .replace("{{goal}}", &case.goal)
                    .replace("{{expected}}", expected)
                    .replace("{{answer}}", &answer);
                let asked = Instant::now();
                let reply = chat
                    .reply(&[Message::user(prompt)])
                    .await
                    .map(|r| {
                        usage = r.usage.map(|u| u.priced(self.price.as_ref()));
                        r.text
                    })
                    .map_err(|e| e.message);
                match (reply, host.recorder()) {
                    (Ok(text), Some(rec)) => rec
                        .record(&CassetteEntry {
                            tool: JUDGE_TOOL.into(),
                            args: key,
                            output: Value::String(text.clone()),
                            latency_ms: Some(
                                u64::try_from(asked.elapsed().as_millis()).unwrap_or(u64::MAX),
                            ),
                            step: None,
                            usage,
                        })
                        .map(|()| text)
                        .map_err(|e| e.message),
                    (reply, _) => reply,
                }
            }
            (None, None) => Err("no cassette has this case's judge".into()),
        };
        let verdict = match reply {
            Ok(text) => read(&text).unwrap_or_else(|why| Verdict {
                passed: false,
                score: 0.0,
                reason: format!(
                    "the judge's reply could not be read ({why}): {}",
                    cut(&text)
                ),
                usage: None,
            }),
            Err(e) => Verdict {
                passed: false,
                score: 0.0,
                reason: format!("the judge could not grade: {e}"),
                usage: None,
            },
        };
        Verdict { usage, ..verdict }
    }
}

fn cut(s: &str) -> String {
    let mut t: String = s.chars().take(200).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t
}

/// The verdict in a reply: its first JSON object with a `verdict` of `pass` or `fail`
/// (any case); `score` a number from 0 to 1 (default 1 for a pass, 0 for a fail).
fn read(text: &str) -> Result<Verdict, String> {
    let start = text.find('{').ok_or("no JSON object")?;
    let mut objects = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    let v = match objects.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(e.to_string()),
        None => return Err("no JSON object".into()),
    };
    let passed = match v["verdict"]
        .as_str()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("pass") => true,
        Some("fail") => false,
        _ => return Err("no verdict \"pass\" or \"fail\"".into()),
    };
    let score = v["score"]
        .as_f64()
        .filter(|s| s.is_finite())
        .map_or(if passed { 1.0 } else { 0.0 }, |s| s.clamp(0.0, 1.0));
    Ok(Verdict {
        passed,
        score,
        reason: v["reason"].as_str().unwrap_or_default().to_owned(),
        usage: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_leniently() {
        let v = read(
            "Sure.\n```json\n{\"verdict\": \"PASS\", \"score\": 0.8, \"reason\": \"right\"}\n```",
        )
        .unwrap();
        assert_eq!((v.passed, v.score, v.reason.as_str()), (true, 0.8, "right"));
        let v = read("{\"verdict\": \"fail\"} trailing").unwrap();
        assert_eq!((v.passed, v.score), (false, 0.0));
        assert_eq!(
            read("{\"verdict\": \"pass\", \"score\": 7}").unwrap().score,
            1.0
        );
        assert!(read("I think it passes.").is_err());
        assert!(read("{\"verdict\": \"maybe\"}").is_err());
        assert!(read("{\"verdict\": ").is_err());
    }
}

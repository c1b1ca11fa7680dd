//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`: OpenAI, Ollama,
//! vLLM, llama.cpp's server), whole or streamed.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{CallError, CallErrorKind};
use crate::net::{Endpoint, Taken};

/// Who says a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: Role::System,
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// The tokens a reply cost, as the server counted them (`usage`), and what they cost when
/// the model has a price (`[pricing]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of the priced calls only, when any was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cost = match (self.cost, other.cost) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

impl Usage {
    /// The `usage` of a completion or of a stream's event: `prompt_tokens` and
    /// `completion_tokens` (or `input_tokens` and `output_tokens`); None without one.
    pub fn of(v: &Value) -> Option<Usage> {
        let u = v.get("usage").filter(|u| u.is_object())?;
        let n = |a: &str, b: &str| u.get(a).or_else(|| u.get(b)).and_then(Value::as_u64);
        let input = n("prompt_tokens", "input_tokens");
        let output = n("completion_tokens", "output_tokens");
        (input.is_some() || output.is_some()).then(|| Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            cost: None,
        })
    }

    /// The same tokens, with what they cost at `price` (none without one).
    pub fn priced(self, price: Option<&plan_manifest::Price>) -> Usage {
        Usage {
            cost: price.map(|p| p.cost(self.input_tokens, self.output_tokens)),
            ..self
        }
    }
}

/// A reply and what it cost, when the server said.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    pub text: String,
    pub usage: Option<Usage>,
}

/// A model behind an OpenAI-compatible endpoint. Built by [`crate::Connector::chat`].
#[derive(Debug)]
pub struct ChatClient {
    endpoint: Endpoint,
    model: String,
    temperature: Option<f64>,
}

impl ChatClient {
    pub(crate) fn new(endpoint: Endpoint, model: String, temperature: Option<f64>) -> Self {
        ChatClient {
            endpoint,
            model,
            temperature,
        }
    }

    /// The same client with another sampling temperature (`None`: the server's default).
    pub fn with_temperature(mut self, temperature: Option<f64>) -> Self {
        self.temperature = temperature.filter(|t| t.is_finite());
        self
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// How long one reply may take, all attempts together (see [`Endpoint::budget`]).
    pub fn budget(&self) -> Option<std::time::Duration> {
        self.endpoint.budget()
    }

    /// One line for traces and errors (never includes secrets).
    pub fn describe(&self) -> String {
        format!("openai model {} at {}", self.model, self.endpoint.url())
    }

    fn body(&self, messages: &[Message], stream: bool) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "stream": stream,
        });
        if let (Some(t), Value::Object(m)) = (self.temperature, &mut body) {
            m.insert("temperature".into(), json!(t));
        }
        if let (true, Value::Object(m)) = (stream, &mut body) {
            // NB: the tokens of a streamed reply come in a last event of their own.
            m.insert("stream_options".into(), json!({"include_usage": true}));
        }
        body
    }

    /// The assistant's reply to `messages` (`choices[0].message.content`).
    pub async fn complete(&self, messages: &[Message]) -> Result<String, CallError> {
        self.reply(messages).await.map(|r| r.text)
    }

    /// [`ChatClient::complete`], with the tokens it cost when the server says.
    pub async fn reply(&self, messages: &[Message]) -> Result<Reply, CallError> {
        let resp = self.endpoint.post_json(&self.body(messages, false)).await?;
        match resp.pointer("/choices/0/message/content").and_then(text) {
            Some(text) => Ok(Reply {
                text,
                usage: Usage::of(&resp),
            }),
            None => Err(self.bad_response(&resp, "choices[0].message.content")),
        }
    }

    /// The reply to `messages`, streamed: `on_text` gets each piece as the server sends
    /// it (`choices[0].delta.content` of each event), and the whole reply is returned at
    /// the end. A server that answers in one piece (it ignored `"stream": true`) works
    /// too: `on_text` then gets the whole reply at once. A stream that ends before the
    /// server said the reply is complete (`[DONE]` or a `finish_reason`) is an error:
    /// the reply would be cut.
    pub async fn complete_streaming(
        &self,
        messages: &[Message],
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<String, CallError> {
        self.reply_streaming(messages, on_text)
            .await
            .map(|r| r.text)
    }

    /// [`ChatClient::complete_streaming`], with the tokens it cost when the server says
    /// (`stream_options.include_usage`: an event after the last piece, read for
    /// [`crate::net::TRAILER_WAIT`] at most).
    pub async fn reply_streaming(
        &self,
        messages: &[Message],
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Reply, CallError> {
        let mut reply = String::new();
        let mut usage: Option<Usage> = None;
        // NB: set only by the event that ends the answer, which ends the attempt too, so
        // a retried attempt never inherits it.
        let mut complete = false;
        let mut sink = |data: &str| -> Result<Taken, CallError> {
            let data = data.trim();
            if data.is_empty() {
                return Ok(Taken::Ignored);
            }
            if data == "[DONE]" {
                complete = true;
                return Ok(Taken::End);
            }
            let event: Value = serde_json::from_str(data)
                .map_err(|_| self.bad_response(&Value::String(data.to_owned()), "a JSON event"))?;
            if let Some(err) = event.get("error") {
                return Err(CallError::new(
                    CallErrorKind::BadResponse,
                    format!(
                        "POST {}: the stream reported an error: {}",
                        self.endpoint.url(),
                        self.endpoint.preview(&err.to_string())
                    ),
                ));
            }
            if let Some(u) = Usage::of(&event) {
                usage = Some(u);
            }
            let Some(choice) = event.pointer("/choices/0") else {
                // NB: the usage event has no choices.
                if usage.is_some() && event.get("choices").is_some_and(Value::is_array) {
                    return Ok(Taken::Ignored);
                }
                return Err(self.bad_response(&event, "choices[0]"));
            };
            // A whole completion (the server did not stream) ends the answer by itself.
            let whole = choice.get("message").is_some_and(Value::is_object);
            let piece = choice
                .pointer("/delta/content")
                .or_else(|| choice.pointer("/message/content"));
            let mut taken = match piece {
                // A role-only first delta, or a last one with only `finish_reason`.
                None | Some(Value::Null) => Taken::Ignored,
                Some(p) => match text(p) {
                    Some(t) if t.is_empty() => Taken::Ignored,
                    Some(t) => {
                        on_text(&t);
                        reply.push_str(&t);
                        Taken::Used
                    }
                    None => return Err(self.bad_response(&event, "choices[0].delta.content")),
                },
            };
            if whole {
                complete = true;
                taken = Taken::End;
            } else if choice.get("finish_reason").is_some_and(|r| !r.is_null()) {
                complete = true;
                taken = Taken::Finished;
            }
            Ok(taken)
        };
        self.endpoint
            .post_events(&self.body(messages, true), &mut sink)
            .await?;
        if !complete {
            return Err(CallError::new(
                CallErrorKind::BadResponse,
                format!(
                    "POST {}: the stream ended before the reply was complete (no [DONE] and no finish_reason) after {} bytes",
                    self.endpoint.url(),
                    reply.len()
                ),
            ));
        }
        Ok(Reply { text: reply, usage })
    }

    #[cold]
    fn bad_response(&self, got: &Value, wanted: &str) -> CallError {
        let shown = match got {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        CallError::new(
            CallErrorKind::BadResponse,
            format!(
                "POST {}: response has no {wanted} string: {}",
                self.endpoint.url(),
                self.endpoint.preview(&shown)
            ),
        )
    }
}

/// Message content as text: a string, or a list of typed parts (some servers) whose
/// `text` fields are joined.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
        ),
        _ => None,
    }
}

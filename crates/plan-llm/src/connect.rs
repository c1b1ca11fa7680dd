//! `Connector`: turns backend configuration into endpoints and chat clients, checking it
//! (URL scheme, timeouts, retries, concurrency, the API key's variable) with errors that
//! name who the endpoint serves. One connector shares one pooled HTTP client and one
//! redactor among everything it builds.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::chat::ChatClient;
use crate::error::{CallError, CallErrorKind};
use crate::net::{Endpoint, NoLinkLocal, RetryPolicy, redirect_policy};
use crate::redact::Redactor;
use crate::secret::{EnvLookup, Secret};
use plan_manifest::BackendConfig;

/// Per-attempt timeout of a chat endpoint that sets none: LLMs can be slow.
pub const DEFAULT_CHAT_TIMEOUT: Duration = Duration::from_secs(120);
/// Concurrent requests to a chat endpoint that sets no `concurrency`.
pub const DEFAULT_CHAT_CONCURRENCY: usize = 4;
/// Sanity caps on configured numbers.
const MAX_TRIES: u32 = 100;
const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// The settings of one endpoint, as a tools file gives them.
#[derive(Clone, Copy, Debug)]
pub struct EndpointConfig<'a> {
    pub url: &'a str,
    /// Name of the environment variable holding the bearer key.
    pub api_key_env: Option<&'a str>,
    pub timeout_secs: Option<f64>,
    pub max_retries: Option<u32>,
    pub concurrency: Option<usize>,
    /// What applies when the configuration leaves them out.
    pub default_timeout: Duration,
    pub default_concurrency: usize,
}

/// Builds endpoints. Cheap to keep; the HTTP client (TLS set-up) is made on first use, so
/// a run served from a cassette never pays for it.
pub struct Connector {
    client: OnceLock<reqwest::Client>,
    env: EnvLookup,
    redactor: Arc<Redactor>,
    retry_base_delay: Duration,
    retry_max_delay: Duration,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("retry_base_delay", &self.retry_base_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// Keys are read through `env` and registered with `redactor`, which every error body
    /// passes through.
    pub fn new(
        env: EnvLookup,
        redactor: Arc<Redactor>,
        retry_base_delay: Duration,
        retry_max_delay: Duration,
    ) -> Self {
        Connector {
            client: OnceLock::new(),
            env,
            redactor,
            retry_base_delay,
            retry_max_delay,
        }
    }

    /// The secrets read so far.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// A chat client for an `openai` backend. `who` names what it serves in error
    /// messages (``tool `llm_generate` ``, `the planner`).
    pub fn chat(&self, who: &str, cfg: &BackendConfig) -> Result<ChatClient, CallError> {
        let BackendConfig::Openai {
            base_url,
            model,
            api_key_env,
            temperature,
            timeout_secs,
            max_retries,
            concurrency,
        } = cfg
        else {
            return Err(CallError::new(
                CallErrorKind::Config,
                format!(
                    "{who} needs an `openai` backend (an OpenAI-compatible chat completions server)"
                ),
            ));
        };
        if let Some(t) = temperature.filter(|t| !t.is_finite()) {
            return Err(CallError::new(
                CallErrorKind::Config,
                format!("{who}: temperature {t} is not a finite number"),
            ));
        }
        let endpoint = self.endpoint(
            who,
            &EndpointConfig {
                url: &completions_url(base_url),
                api_key_env: api_key_env.as_deref(),
                timeout_secs: *timeout_secs,
                max_retries: *max_retries,
                concurrency: *concurrency,
                default_timeout: DEFAULT_CHAT_TIMEOUT,
                default_concurrency: DEFAULT_CHAT_CONCURRENCY,
            },
        )?;
        Ok(ChatClient::new(endpoint, model.clone(), *temperature))
    }

    /// An endpoint, its configuration checked. `who` names what it serves in errors.
    pub fn endpoint(&self, who: &str, cfg: &EndpointConfig<'_>) -> Result<Endpoint, CallError> {
        let config_err = |msg: String| CallError::new(CallErrorKind::Config, msg);
        let auth = match cfg.api_key_env {
            None => None,
            Some(var) => {
                // NB: name the variable, never a value.
                let what = match (self.env)(var) {
                    Ok(v) if !v.is_empty() => {
                        self.redactor.add(&v);
                        Ok(Secret::new(v))
                    }
                    Ok(_) => Err("is empty"),
                    Err(std::env::VarError::NotPresent) => Err("is not set"),
                    Err(std::env::VarError::NotUnicode(_)) => Err("is not valid UTF-8"),
                };
                match what {
                    Ok(secret) => Some(secret),
                    Err(what) => {
                        return Err(config_err(format!(
                            "environment variable {var} (the API key for {who}) {what}"
                        )));
                    }
                }
            }
        };
        let timeout = match cfg.timeout_secs {
            None => cfg.default_timeout,
            Some(s) if s > 0.0 && s <= MAX_TIMEOUT_SECS => Duration::try_from_secs_f64(s)
                .map_err(|_| config_err(format!("{who}: bad timeout_secs {s}")))?,
            Some(s) => {
                return Err(config_err(format!(
                    "{who}: timeout_secs must be more than 0 and at most {MAX_TIMEOUT_SECS}, not {s}"
                )));
            }
        };
        let tries = match cfg.max_retries {
            None => RetryPolicy::default().tries,
            Some(n) if n < MAX_TRIES => n + 1,
            Some(n) => {
                return Err(config_err(format!(
                    "{who}: max_retries {n} is too many (limit {})",
                    MAX_TRIES - 1
                )));
            }
        };
        let permits = match cfg.concurrency {
            None => cfg.default_concurrency,
            Some(n) if (1..=Semaphore::MAX_PERMITS).contains(&n) => n,
            Some(n) => {
                return Err(config_err(format!(
                    "{who}: concurrency must be at least 1, not {n}"
                )));
            }
        };
        let url = cfg.url;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(config_err(format!(
                "{who}: URL `{url}` must start with http:// or https://"
            )));
        }
        Ok(Endpoint {
            client: self.client()?,
            url: url.to_owned(),
            auth,
            timeout: Some(timeout),
            retry: RetryPolicy {
                tries,
                base_delay: self.retry_base_delay,
                max_delay: self.retry_max_delay,
            },
            limit: Semaphore::new(permits),
            redactor: self.redactor.clone(),
        })
    }

    fn client(&self) -> Result<reqwest::Client, CallError> {
        if let Some(c) = self.client.get() {
            return Ok(c.clone());
        }
        let c = http_client()?;
        Ok(self.client.get_or_init(|| c).clone())
    }
}

/// An HTTP client as every endpoint of planvm gets one: rustls, redirects only within the
/// first URL's origin, host names never resolved to link-local addresses. Each is a pool
/// of its own: keep it.
pub fn http_client() -> Result<reqwest::Client, CallError> {
    install_crypto();
    reqwest::Client::builder()
        .user_agent(concat!("planvm/", env!("CARGO_PKG_VERSION")))
        .redirect(redirect_policy())
        .dns_resolver(Arc::new(NoLinkLocal))
        .build()
        .map_err(|e| {
            CallError::new(
                CallErrorKind::Config,
                format!("cannot set up the HTTP client: {e}"),
            )
        })
}

/// Makes ring the process's TLS provider, unless one is installed already. Whatever builds
/// a `reqwest` client calls it first: with `rustls-no-provider`, a client built without a
/// provider panics.
pub fn install_crypto() {
    // NB: `Err` means another provider won the race: any provider will do.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `{base_url}/chat/completions`, tolerating a trailing slash on the base.
pub fn completions_url(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

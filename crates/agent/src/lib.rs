//! toolgate's agent loop: a model behind an OpenAI-compatible Chat Completions endpoint (OpenAI,
//! vLLM, llama.cpp's server, Ollama, LiteLLM) or Anthropic Messages, given the registry's tools
//! that the principal may call, with every tool call it asks for run through the production
//! pipeline inside a run with the principal's budget.
//!
//! [`run`] goes round until the model answers ([`End::Answer`]), a budget is spent
//! ([`End::BudgetExhausted`], naming `max_turns`, `max_tool_calls`, `timeout_ms` or
//! `max_attempts_per_tool`), a call waits for a person ([`End::ApprovalPending`]), or the caller
//! cancels it ([`End::Cancelled`]). The
//! [`Transcript`] holds every step, the provider messages, and the run's consumption.
//!
//! ```no_run
//! # async fn demo(runtime: &toolgate_runtime::Runtime) -> Result<(), toolgate_agent::AgentError> {
//! use toolgate_agent::{AgentRequest, ApiKey, DEFAULT_MAX_TOKENS, ModelSpec};
//!
//! let model: ModelSpec = "anthropic:claude-sonnet-4-5".parse()?;
//! let key = ApiKey::from_env(model.provider(), |name| std::env::var(name).ok())?;
//! let transcript = toolgate_agent::run(
//!     runtime,
//!     AgentRequest {
//!         model,
//!         base_url: None,
//!         key,
//!         prompt: "What is 17 * 23?".into(),
//!         system: None,
//!         principal: runtime.principal(None)?,
//!         budget: toolgate_core::Budget { max_turns: Some(5), ..Default::default() },
//!         approval: None,
//!         origin: None,
//!         tools: Some(vec!["calculator".into()]),
//!         max_tokens: DEFAULT_MAX_TOKENS,
//!         cancel: Default::default(),
//!         cancelled_by: Default::default(),
//!     },
//!     |entry| print!("{}", entry.human()),
//! )
//! .await?;
//! print!("{}", transcript.human_end());
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs, unreachable_pub)]

mod error;
mod model;
mod provider;
mod run;
mod transcript;

pub use error::{AgentError, AgentErrorKind};
pub use model::{ApiKey, BaseUrl, ModelSpec, Provider};
pub use run::{AgentRequest, DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, run};
pub use transcript::{CallView, Consumption, End, Entry, ResultView, Transcript};

//! toolgate core: tool definitions, validation, the registry, the result envelope, the tool
//! context and the call pipeline. No SQL, no HTTP server, no wire formats beyond the envelope.
//!
//! - A [`ToolDefinition`] is what a person or program writes (files via [`Format`], or
//!   [`ToolBuilder`]); [`validate`] turns it into a [`ToolSpec`] or a [`ValidationReport`] listing
//!   every problem. The fields and rules are in `docs/tool-model.md` in the repository.
//! - A [`Registry`] holds specs and their handlers ([`Tool`]); readers never block.
//! - A [`Pipeline`] runs every call through the same stages and always answers with one
//!   [`ToolResult`], whose contract is `docs/envelope.md`.
//!
//! ```
//! use serde_json::json;
//! use toolgate_core::{CallRequest, ParamType, Parameter, Pipeline, Registry, ToolBuilder};
//! use std::sync::Arc;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let registry = Arc::new(Registry::new());
//! registry.register(Arc::new(
//!     ToolBuilder::new("echo", "Returns its text unchanged. Use to test a connection.")
//!         .param(Parameter::new("text", ParamType::String).description("Text").required())
//!         .handler(|args, _ctx| async move { Ok(args["text"].clone()) }),
//! ))?;
//! let pipeline = Pipeline::new(Arc::clone(&registry));
//! let result = pipeline.call(CallRequest::new("echo", json!({"text": "hi"}))).await;
//! assert_eq!(result.data(), Some(&json!("hi")));
//! # Ok::<(), toolgate_core::CoreError>(())
//! # }).unwrap();
//! ```

#![warn(missing_docs, unreachable_pub)]

mod boxing;
mod budget;
mod content;
mod context;
mod definition;
mod editor_schema;
mod envelope;
mod error;
mod format;
pub mod limits;
mod located;
mod names;
mod origin;
pub mod pipeline;
mod problems;
pub mod registry;
mod runkind;
pub mod schema;
mod schema_level;
mod spec;
pub mod telemetry;
mod tool;
mod validate;

pub use boxing::box_in_place;
pub use budget::{Budget, DEFAULT_ATTEMPTS_PER_TOOL, Exhausted, RunId, RunStatus, Usage};
pub use content::{
    Annotations, Content, ContentMeta, EmbeddedResource, Icon, IconTheme, Priority,
    PriorityOutOfRange, Role,
};
pub use context::{
    AuthClaims, ClientBridge, ElicitAnswer, Extensions, HttpClient, HttpRequest, HttpResponse,
    LogLevel, Principal, ProgressSink, Root, SamplingReply, SamplingRequest, ToolContext,
};
pub use definition::{
    Category, Consequence, Constraints, Effect, Isolation, ParamType, Parameter, RUN_KINDS,
    RunSpec, SafetyLevel, SchemaLink, TaskSupport, ToolDefinition,
};
pub use editor_schema::{DEFINITION_ALIASES, add_aliases, definition_schema, published};
pub use envelope::{CallId, ErrorKind, Outcome, ToolResult};
pub use error::{CANCELLED_MESSAGE, CoreError, CoreErrorKind, ErrorChain, ToolError, error_chain};
pub use format::Format;
pub use located::{ParseProblem, TextPosition, locate};
pub use names::{
    MAX_NAME_LEN, NameProblem, Permission, PrincipalId, RESERVED_NAMES, ToolName, parse_host_port,
};
pub use origin::{CallOrigin, CancelNote, MAX_ORIGIN_FIELD_CHARS};
pub use pipeline::{
    ApprovalHandler, ApprovalRequest, AutoDeny, Call, CallObserver, CallRecord, CallRequest,
    Decision, Executor, InProcessExecutor, Next, Pipeline, PipelineBuilder, PreApproved,
    PrincipalQuotaStage, PromptApproval, Quota, RateLimit, RateLimitStage, RetryPolicy,
    SharedCounter, SharedSlot, Stage, json_len_at_most, panic_message,
};
pub use pipeline::{MemoryRuns, RunBudgetStage, RunLedger, Settled, run_not_found};
pub use problems::document_problems;
pub use registry::{Page, Query, RegisteredTool, Registry, Snapshot};
pub use runkind::RunKind;
pub use schema_level::{SchemaLevel, TierCaps};
pub use spec::{Limits, Resolved, ToolSpec, write_canonical, write_json_string};
pub use tokio_util::sync::CancellationToken;
pub use tool::{BoxFuture, FnTool, Tool, ToolBuilder, ToolOutput, schema_of};
pub use validate::{Issue, Lookup, ValidationEnv, ValidationReport, validate, validate_in};

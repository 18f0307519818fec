//! The library API for tool authors: the [`Tool`] trait, a builder that takes a closure
//! (the factory pattern), and typed tools whose schema comes from Rust types (schemars).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::context::ToolContext;
use crate::definition::{Category, Consequence, Constraints, Effect, Parameter, ToolDefinition};
use crate::error::ToolError;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a handler returns: data, or a failure the pipeline turns into an error result.
pub type ToolOutput = Result<Value, ToolError>;

/// A tool: a definition and a handler. Tools are immutable and shared between calls.
///
/// The handler receives arguments that already passed input validation (defaults applied)
/// and must watch `ctx.cancellation()` in long operations.
pub trait Tool: Send + Sync + 'static {
    /// The tool's definition; validated when the tool is registered.
    fn definition(&self) -> ToolDefinition;

    /// Runs one attempt.
    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput>;

    /// Whether the tool asks its client's questions before its call becomes an MCP task: under
    /// MCP 2026-07-28, a task-augmented call to it is answered with input-required rounds
    /// first, and becomes a task on the round that answers everything the round before asked
    /// (what it asks after that, it asks through the task: `tasks/get` shows the questions and
    /// `tasks/update` answers them). Default: no (the task is created at once, and every
    /// question is asked through it).
    fn asks_before_task(&self) -> bool {
        false
    }
}

type Handler = dyn Fn(Value, ToolContext) -> BoxFuture<'static, ToolOutput> + Send + Sync;

/// A tool made from a definition and a closure. Build one with [`ToolBuilder`].
#[derive(Clone)]
pub struct FnTool {
    definition: ToolDefinition,
    handler: Arc<Handler>,
    asks_before_task: bool,
}

impl Tool for FnTool {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        (self.handler)(args, ctx)
    }

    fn asks_before_task(&self) -> bool {
        self.asks_before_task
    }
}

impl fmt::Debug for FnTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.definition.name)
            .finish_non_exhaustive()
    }
}

/// Builds a [`ToolDefinition`] field by field and finishes with a handler closure.
///
/// ```
/// use toolgate_core::{ParamType, Parameter, ToolBuilder};
/// use serde_json::json;
///
/// let greeting = String::from("Hello");
/// let tool = ToolBuilder::new("greet", "Greets a person by name. Use when asked to say hello.")
///     .param(Parameter::new("who", ParamType::String).description("Name").required())
///     .handler(move |args, _ctx| {
///         let greeting = greeting.clone();
///         async move { Ok(json!({"text": format!("{greeting}, {}!", args["who"].as_str().unwrap_or("?"))})) }
///     });
/// # let _ = tool;
/// ```
#[derive(Clone, Debug)]
pub struct ToolBuilder {
    def: ToolDefinition,
    asks_before_task: bool,
}

impl ToolBuilder {
    /// Starts a definition.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            def: ToolDefinition::new(name, description),
            asks_before_task: false,
        }
    }

    /// Starts from an existing definition.
    pub fn from_definition(def: ToolDefinition) -> Self {
        Self {
            def,
            asks_before_task: false,
        }
    }

    /// Display name.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.def.title = Some(title.into());
        self
    }

    /// Functional domain.
    #[must_use]
    pub fn category(mut self, category: Category) -> Self {
        self.def.category = Some(category);
        self
    }

    /// Mutation class.
    #[must_use]
    pub fn effect(mut self, effect: Effect) -> Self {
        self.def.effect = Some(effect);
        self
    }

    /// Real-world impact.
    #[must_use]
    pub fn consequence(mut self, consequence: Consequence) -> Self {
        self.def.consequence = Some(consequence);
        self
    }

    /// Whether each call needs an explicit yes.
    #[must_use]
    pub fn requires_confirmation(mut self, yes: bool) -> Self {
        self.def.requires_confirmation = Some(yes);
        self
    }

    /// Whether MCP clients may run its calls as tasks (default: `optional` when it requires
    /// confirmation, otherwise `forbidden`).
    #[must_use]
    pub fn tasks(mut self, support: crate::TaskSupport) -> Self {
        self.def.tasks = Some(support);
        self
    }

    /// The tool asks its client's questions before its call becomes an MCP task (see
    /// [`Tool::asks_before_task`]).
    #[must_use]
    pub fn asks_before_task(mut self) -> Self {
        self.asks_before_task = true;
        self
    }

    /// Adds a typed parameter.
    #[must_use]
    pub fn param(mut self, parameter: Parameter) -> Self {
        self.def.parameters.push(parameter);
        self
    }

    /// Uses a raw input schema instead of typed parameters.
    #[must_use]
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.def.input_schema = Some(schema);
        self
    }

    /// Declares the output schema (validated after each call).
    #[must_use]
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.def.output_schema = Some(schema);
        self
    }

    /// Execution constraints.
    #[must_use]
    pub fn constraints(mut self, constraints: Constraints) -> Self {
        self.def.constraints = Some(constraints);
        self
    }

    /// Adds a permission callers must hold.
    #[must_use]
    pub fn permission(mut self, permission: impl Into<String>) -> Self {
        self.def.required_permissions.push(permission.into());
        self
    }

    /// Adds a tag.
    #[must_use]
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.def.tags.push(tag.into());
        self
    }

    /// Semantic version.
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.def.version = Some(version.into());
        self
    }

    /// Adds a tool this one calls.
    #[must_use]
    pub fn depends_on(mut self, tool: impl Into<String>) -> Self {
        self.def.depends_on.push(tool.into());
        self
    }

    /// Whether automatic retries are safe.
    #[must_use]
    pub fn idempotent(mut self, yes: bool) -> Self {
        self.def.idempotent = Some(yes);
        self
    }

    /// Adds a metadata entry.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.def.metadata.insert(key.into(), value);
        self
    }

    /// The definition built so far.
    pub fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    /// Finishes with a handler over JSON arguments. The closure may capture context (a factory).
    pub fn handler<F, Fut>(self, f: F) -> FnTool
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolOutput> + Send + 'static,
    {
        FnTool {
            definition: self.def,
            handler: Arc::new(move |args, ctx| Box::pin(f(args, ctx))),
            asks_before_task: self.asks_before_task,
        }
    }

    /// Finishes with a typed handler: the input schema is derived from `I`, the output schema
    /// from `O`, and arguments are deserialized into `I` before the closure runs.
    pub fn typed<I, O, F, Fut>(mut self, f: F) -> FnTool
    where
        I: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        self.def.parameters.clear();
        self.def.input_schema = Some(schema_of::<I>());
        let output = schema_of::<O>();
        if output.get("type").is_some() {
            self.def.output_schema = Some(output);
        }
        let f = Arc::new(f);
        let name = self.def.name.clone();
        let asks_before_task = self.asks_before_task;
        FnTool {
            asks_before_task,
            definition: self.def,
            handler: Arc::new(move |args, ctx| {
                let f = Arc::clone(&f);
                let name = name.clone();
                Box::pin(async move {
                    let input: I = serde_json::from_value(args).map_err(|e| {
                        ToolError::validation(format!("Invalid arguments for {name}: {e}"))
                    })?;
                    let output = f(input, ctx).await?;
                    serde_json::to_value(output).map_err(|e| {
                        ToolError::execution(format!(
                            "Tool {name} produced unserializable output: {e}"
                        ))
                    })
                })
            }),
        }
    }
}

/// The JSON Schema of a Rust type, without `$schema` and `title` (they confuse some providers).
pub fn schema_of<T: JsonSchema>() -> Value {
    let mut value = schemars::schema_for!(T).to_value();
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
        map.remove("title");
    }
    value
}

//! Run kinds: how a declarative definition's `[run]` section becomes a handler. Crates that
//! implement a kind (the `http` kind lives in toolgate-builtins) install it on the registry,
//! which then checks every such definition's run section when it is registered and runs it.

use std::sync::Arc;

use crate::definition::ToolDefinition;
use crate::tool::Tool;
use crate::validate::Issue;

/// One `run.kind`.
pub trait RunKind: Send + Sync + 'static {
    /// The `kind` value this implements, like `"http"`.
    fn kind(&self) -> &'static str;

    /// Checks the run section of `def` (which passed every other validation) and builds the
    /// handler. Reports every problem at once, with paths under `run.`.
    fn prepare(&self, def: &ToolDefinition) -> Result<Arc<dyn Tool>, Vec<Issue>>;
}

//! The CLI's handle on the runtime: opens a [`Runtime`] from the global options, prints its
//! startup warnings, and gives the commands what they use. The assembly itself (config, store,
//! registry, pipeline) is the runtime's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolgate_core::{Issue, Pipeline, Registry, ToolSpec};
use toolgate_runtime::{Config, ConfigSource, Runtime, RuntimeOptions};
use toolgate_store::{DbUrl, Store, Tier};

use crate::cli::GlobalArgs;

pub use toolgate_runtime::{Failure, Loaded, register_in_order};

/// The runtime this command opened, closed by [`close_opened`] when the command ends.
static OPENED: Mutex<Option<Arc<Runtime>>> = Mutex::new(None);

/// Ends the runtime the command opened, if any, and only once: calls still running are
/// cancelled, upstream MCP servers stop (their processes reaped, no start cut short reported as a
/// failure), and the store writes its pending audit entries and checkpoint before it closes —
/// rather than the async runtime dropping those tasks mid-write when `main` returns.
pub async fn close_opened() {
    let runtime = OPENED.lock().ok().and_then(|mut opened| opened.take());
    if let Some(runtime) = runtime {
        runtime.drain(Duration::ZERO).await;
        runtime.store().close().await;
    }
}

/// Everything a command needs.
pub struct App {
    /// The runtime: config, store, registry, principals, the pipeline.
    pub runtime: Arc<Runtime>,
    /// The store (the runtime's).
    pub store: Store,
    /// The registry (the runtime's).
    pub registry: Arc<Registry>,
    /// The plan in force.
    pub plan: Tier,
}

/// The runtime options of the global arguments (`--config`, `--db`, `--root`, `--tools-dir`),
/// leaving out the definitions named in `exclude`.
pub fn runtime_options(global: &GlobalArgs, exclude: &[String]) -> anyhow::Result<RuntimeOptions> {
    Ok(RuntimeOptions {
        config: match &global.config {
            Some(path) => ConfigSource::File(path.clone()),
            None => ConfigSource::Default,
        },
        db: global.db.as_deref().map(DbUrl::parse).transpose()?,
        root: global.root.clone(),
        tools_dir: global.tools_dir.clone(),
        exclude: exclude.to_vec(),
        ..RuntimeOptions::default()
    })
}

impl App {
    /// Opens the runtime: reads the config, opens the store, registers the built-ins (jailed to
    /// the root), the stored custom definitions and the tools-dir files. Bad tools-dir files
    /// are reported on stderr and skipped.
    pub async fn new(global: &GlobalArgs) -> anyhow::Result<Self> {
        Self::with_excluded(global, &[]).await
    }

    /// Like [`App::new`], leaving out tools-dir definitions with the given names.
    pub async fn with_excluded(global: &GlobalArgs, exclude: &[String]) -> anyhow::Result<Self> {
        Self::open(runtime_options(global, exclude)?).await
    }

    /// Opens the runtime with `options` and prints its startup warnings on stderr.
    pub async fn open(options: RuntimeOptions) -> anyhow::Result<Self> {
        let runtime = Runtime::open(options).await?;
        if let Ok(mut opened) = OPENED.lock() {
            *opened = Some(Arc::clone(&runtime));
        }
        for warning in runtime.warnings() {
            eprintln!("warning: {warning}");
        }
        Ok(Self {
            store: runtime.store().clone(),
            registry: Arc::clone(runtime.registry()),
            plan: runtime.plan().clone(),
            runtime,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        self.runtime.config()
    }

    /// Whether `tool` exists for the CLI's caller: built-ins outside the plan in force do not
    /// (the same rule `Principal::may_call` applies to calls, see `Tier::restrict`).
    pub fn sees(&self, tool: &str) -> bool {
        self.runtime.sees(tool)
    }

    /// The runtime's production pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        self.runtime.pipeline()
    }
}

/// Warnings validation adds for a command tool (see [`toolgate_runtime::access_warnings`]).
pub fn access_warnings(app: &App, spec: &ToolSpec) -> Vec<Issue> {
    toolgate_runtime::access_warnings(&app.runtime, spec)
}

//! Assembling the registry and pipeline from the global options and the config file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use toolgate_core::{
    CoreError, Pipeline, PipelineBuilder, RateLimitStage, Registry, ToolDefinition, ToolSpec,
    ValidationReport,
};

use crate::cli::GlobalArgs;
use crate::config::Config;

/// Everything a command needs.
pub struct App {
    pub config: Config,
    pub registry: Arc<Registry>,
}

/// One definition file and what became of it.
pub struct Loaded {
    pub path: PathBuf,
    pub outcome: Result<ToolSpec, CoreError>,
}

impl App {
    /// Reads the config, registers the built-ins (jailed to the root) and the tools-dir files.
    /// Bad files in the tools dir are reported on stderr and skipped.
    pub fn new(global: &GlobalArgs) -> anyhow::Result<Self> {
        Self::with_excluded(global, &[])
    }

    /// Like [`App::new`], leaving out tools-dir definitions with the given names.
    pub fn with_excluded(global: &GlobalArgs, exclude: &[String]) -> anyhow::Result<Self> {
        let config = match &global.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        let root = match global.root.clone().or_else(|| config.root.clone()) {
            Some(root) => root,
            None => std::env::current_dir().context("Cannot determine the current directory")?,
        };
        let registry = Arc::new(Registry::new());
        let builtins = toolgate_builtins::builtin_tools(&root)
            .with_context(|| format!("Cannot use {} as the file tools' root", root.display()))?;
        registry
            .register_all(builtins, true)
            .context("Built-in tools failed to register (a bug: please report it)")?;
        let app = Self { config, registry };
        if let Some(dir) = global
            .tools_dir
            .clone()
            .or_else(|| app.config.tools_dir.clone())
        {
            let files = definition_files(&dir)?;
            let parsed: Vec<(PathBuf, Result<ToolDefinition, CoreError>)> = files
                .into_iter()
                .map(|p| {
                    let def = ToolDefinition::load(&p);
                    (p, def)
                })
                .filter(|(_, d)| d.as_ref().map_or(true, |d| !exclude.contains(&d.name)))
                .collect();
            for loaded in register_in_order(&app.registry, parsed) {
                if let Err(e) = &loaded.outcome {
                    eprintln!(
                        "warning: skipped {}: {}",
                        loaded.path.display(),
                        describe(e)
                    );
                }
            }
        }
        Ok(app)
    }

    /// The pipeline, with the config's rate limit if any.
    pub fn pipeline(&self) -> Pipeline {
        let mut builder = PipelineBuilder::new(Arc::clone(&self.registry));
        if let Some(limit) = self.config.rate_limit() {
            builder = builder.stage(Arc::new(RateLimitStage::new(limit)));
        }
        builder.build()
    }
}

/// Every `*.toml`, `*.json`, `*.yaml`, `*.yml` directly in `dir`, sorted.
pub fn definition_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("Cannot read tools directory {}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && toolgate_core::Format::from_path(p).is_some())
        .collect();
    files.sort();
    Ok(files)
}

/// Registers definitions, retrying those whose dependencies come later, until nothing changes.
pub fn register_in_order(
    registry: &Registry,
    parsed: Vec<(PathBuf, Result<ToolDefinition, CoreError>)>,
) -> Vec<Loaded> {
    let mut done = Vec::new();
    let mut pending = Vec::new();
    for (path, def) in parsed {
        match def {
            Ok(def) => pending.push((path, def)),
            Err(e) => done.push(Loaded {
                path,
                outcome: Err(e),
            }),
        }
    }
    loop {
        let before = pending.len();
        let mut waiting = Vec::new();
        let mut last_errors = Vec::new();
        for (path, def) in pending {
            match registry.register_definition(def.clone()) {
                Ok(spec) => done.push(Loaded {
                    path,
                    outcome: Ok(spec),
                }),
                Err(e) if only_unknown_dependencies(&e) => {
                    last_errors.push(e);
                    waiting.push((path, def));
                }
                Err(e) => done.push(Loaded {
                    path,
                    outcome: Err(e),
                }),
            }
        }
        if waiting.is_empty() || waiting.len() == before {
            for ((path, _), e) in waiting.into_iter().zip(last_errors) {
                done.push(Loaded {
                    path,
                    outcome: Err(e),
                });
            }
            break;
        }
        pending = waiting;
    }
    done
}

fn only_unknown_dependencies(e: &CoreError) -> bool {
    e.report().is_some_and(|r: &ValidationReport| {
        !r.errors.is_empty() && r.errors.iter().all(|i| i.code == "depends_on.unknown")
    })
}

/// A one-line description of a load failure.
pub fn describe(e: &CoreError) -> String {
    match e.report() {
        Some(r) => r
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
        None => e.to_string(),
    }
}

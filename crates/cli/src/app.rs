//! Assembling the registry and pipeline from the global options and the config file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate_sandbox::{Runner, SandboxConfig, SandboxExecutor};

use anyhow::Context;
use toolgate_core::{
    CoreError, CoreErrorKind, Issue, Pipeline, PipelineBuilder, RateLimitStage, Registry,
    ToolDefinition, ToolSpec, ValidationReport,
};

use toolgate_builtins::{BuiltinOptions, FileRoot, OutputTypes};
use toolgate_net::PolicyClient;
use toolgate_store::{AuditObserver, AuditStage, DbUrl, Plan, Store, StoreOptions};

use crate::cli::GlobalArgs;
use crate::config::Config;
use crate::plans::StorePlans;

/// Everything a command needs.
pub struct App {
    pub config: Config,
    pub registry: Arc<Registry>,
    pub store: Store,
    pub plan: Plan,
    /// Where the file tools are rooted (or why they serve nothing).
    pub file_root: FileRoot,
    /// The client every tool's outbound request goes through (the `[network]` policy).
    pub http: Arc<PolicyClient>,
    /// Runs every call's attempt: command tools and isolated tools in the sandbox (this binary
    /// re-executed as the launcher), the rest in process.
    pub executor: Arc<SandboxExecutor>,
}

/// The in-process tools the hidden worker mode can run: the built-ins with default options.
/// (Built-ins need no isolation; an embedder's own binary passes its isolated tools here.)
pub fn worker_tools() -> Vec<Arc<dyn toolgate_core::Tool>> {
    let root = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    toolgate_builtins::builtin_tools_with(BuiltinOptions::new(root)).unwrap_or_default()
}

/// One definition file and what became of it.
pub struct Loaded {
    pub path: PathBuf,
    pub outcome: Result<ToolSpec, Failure>,
}

/// The database used when `--db` is not given: `toolgate.db` in the user's data directory.
pub fn default_db_path() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("toolgate")
        .join("toolgate.db")
}

impl App {
    /// Whether `tool` exists for the CLI's caller: built-ins outside the plan in force do not
    /// (the same rule `Principal::may_call` applies to calls, see `Plan::restrict`).
    pub fn sees(&self, tool: &str) -> bool {
        !self.plan.hides(tool)
    }

    /// Reads the config, opens the store, registers the built-ins (jailed to the root), the
    /// stored custom definitions and the tools-dir files. Bad tools-dir files are reported on
    /// stderr and skipped.
    pub async fn new(global: &GlobalArgs) -> anyhow::Result<Self> {
        Self::with_excluded(global, &[]).await
    }

    /// Like [`App::new`], leaving out tools-dir definitions with the given names.
    pub async fn with_excluded(global: &GlobalArgs, exclude: &[String]) -> anyhow::Result<Self> {
        let config = match &global.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        let plan = config.plan()?;
        let root = match global.root.clone().or_else(|| config.root.clone()) {
            Some(root) => FileRoot::Dir(root),
            None => implicit_root(
                std::env::current_dir().context("Cannot determine the current directory")?,
                &home_folders(),
            ),
        };
        let url = match &global.db {
            Some(raw) => DbUrl::parse(raw).map_err(anyhow::Error::msg)?,
            None => DbUrl::Sqlite(default_db_path()),
        };
        let anchor = config.audit.anchor(&url, |name| std::env::var(name).ok())?;
        let store = Store::open_with(&url, &StoreOptions::default(), &anchor)
            .await
            .map_err(anyhow::Error::msg)?;
        let registry = Arc::new(Registry::with_caps(plan.caps()));
        // Declarative `http` definitions (stored or in the tools directory) get their handlers.
        registry.add_run_kind(Arc::new(toolgate_builtins::HttpKind::new()));
        // Declarative `command` definitions run their program in the sandbox they ask for.
        registry.add_run_kind(Arc::new(toolgate_sandbox::CommandKind));
        let http = PolicyClient::new(config.network.clone().with_env())
            .context("Cannot set up the HTTP client for network tools")?;
        let mut output_types = OutputTypes::with_defaults();
        // Stored output types first; the config file's win on a name clash.
        for (name, definition) in store.output_types().await.map_err(anyhow::Error::msg)? {
            if config.output_types.contains_key(&name) {
                continue;
            }
            if let Err(e) = output_types.insert(&name, definition) {
                eprintln!("warning: stored output type {name} no longer loads: {e}");
            }
        }
        for (name, path) in &config.output_types {
            output_types.load_file(name, path).with_context(|| {
                format!("Invalid output type {name:?} in the config file's [output_types]")
            })?;
        }
        let options = BuiltinOptions {
            root: root.clone(),
            search: config.search.clone().with_env(),
            wikipedia: config.wikipedia.clone().with_env(),
            plans: Arc::new(StorePlans(store.clone())),
            output_types: Arc::new(output_types),
        };
        let builtins = toolgate_builtins::builtin_tools_with(options).with_context(|| {
            format!(
                "Cannot use {} as the file tools' root",
                root.dir().unwrap_or(Path::new("")).display()
            )
        })?;
        registry
            .register_all(builtins, true)
            .context("Built-in tools failed to register (a bug: please report it)")?;
        // Stored definitions join the registry (a bad one is reported and skipped); those the
        // caller is about to replace are left out.
        let stored = store
            .definitions()
            .await
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .map(|d| d.definition)
            .filter(|d| !exclude.contains(&d.name))
            .map(|d| (PathBuf::from(format!("(stored) {}", d.name)), Ok(d)))
            .collect();
        for loaded in register_in_order(&registry, stored) {
            if let Err(e) = &loaded.outcome {
                eprintln!(
                    "warning: {} no longer loads: {}",
                    loaded.path.display(),
                    e.one_line()
                );
            }
        }
        let launcher = std::env::current_exe()
            .context("Cannot find the toolgate binary (needed to launch sandboxed tools)")?;
        let mut sandbox = SandboxConfig::new(launcher);
        sandbox.policy = config.network.clone().with_env();
        let executor = Arc::new(SandboxExecutor::new(Arc::new(Runner::new(sandbox))));
        let app = Self {
            config,
            registry,
            store,
            plan,
            file_root: root,
            http: Arc::new(http),
            executor,
        };
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
                        e.one_line()
                    );
                }
            }
        }
        Ok(app)
    }

    /// The pipeline: the config's rate limit if any, and the audit log (a record before any
    /// write, delete or side effect runs, and one for every call's outcome).
    pub fn pipeline(&self) -> Pipeline {
        let mut builder = PipelineBuilder::new(Arc::clone(&self.registry));
        if let Some(limit) = self.config.rate_limit() {
            builder = builder.stage(Arc::new(RateLimitStage::new(limit)));
        }
        builder
            .http_client(self.http.clone())
            .executor(self.executor.clone())
            .stage(Arc::new(AuditStage::new(self.store.clone())))
            .observer(Arc::new(AuditObserver::new(self.store.clone())))
            .build()
    }
}

/// The file tools' root when none is given (`--root`, `TOOLGATE_ROOT`, `root` in the config):
/// the working directory, unless it is `/` or one of the user's home folders. A desktop client
/// starts `toolgate serve --stdio` in a directory of its own choosing (often `/`), and serving
/// that whole tree is never what was meant, so the file tools are then disabled with a message
/// naming the setting to add.
pub fn implicit_root(cwd: PathBuf, homes: &[PathBuf]) -> FileRoot {
    let canonical = std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone());
    let what = if canonical.parent().is_none() {
        "the file system's root"
    } else if homes
        .iter()
        .any(|h| *h == cwd || std::fs::canonicalize(h).is_ok_and(|h| h == canonical))
    {
        "your home folder"
    } else {
        return FileRoot::Dir(cwd);
    };
    FileRoot::Disabled {
        reason: format!(
            "The file tools are off: toolgate was started in {} ({what}) with no root set, and they never serve that whole tree. Give them a folder with --root DIR, the TOOLGATE_ROOT environment variable or root = \"DIR\" in toolgate.toml (for a desktop client: in the server entry's args or env)",
            cwd.display()
        ),
    }
}

/// The user's home folders: `$HOME` and the home the user database (passwd) gives.
pub fn home_folders() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    #[cfg(unix)]
    if let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::getuid()) {
        homes.push(user.dir);
    }
    homes
}

/// How a startup line names the file tools' root.
pub fn describe_root(root: &FileRoot) -> String {
    match root {
        FileRoot::Dir(dir) => format!("file root {}", dir.display()),
        FileRoot::Disabled { .. } => "file tools off (no root set: add --root DIR)".to_owned(),
    }
}

/// Warnings validation adds for a command tool: `read_paths` and `write_paths` the user its
/// sandboxed program runs as cannot reach (a folder under a `0700` directory when toolgate runs
/// as root and programs as `nobody`), naming the directory and its mode.
pub fn access_warnings(app: &App, spec: &ToolSpec) -> Vec<Issue> {
    toolgate_sandbox::access_warnings(
        spec.definition(),
        spec.limits().isolation,
        &app.executor.runner().program_user(),
    )
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

/// Registers the parsed definitions ([`Registry::register_each`]: dependencies may come later,
/// cycles are named) and pairs every file with its outcome.
pub fn register_in_order(
    registry: &Registry,
    parsed: Vec<(PathBuf, Result<ToolDefinition, CoreError>)>,
) -> Vec<Loaded> {
    let mut done = Vec::new();
    let mut paths = Vec::new();
    let mut defs = Vec::new();
    for (path, def) in parsed {
        match def {
            Ok(def) => {
                paths.push(path);
                defs.push(def);
            }
            Err(e) => done.push(Loaded {
                path,
                outcome: Err(Failure::from_error(&e, None)),
            }),
        }
    }
    let outcomes = registry.register_each(defs.clone());
    for ((path, def), outcome) in paths.into_iter().zip(defs).zip(outcomes) {
        done.push(Loaded {
            path,
            outcome: outcome.map_err(|e| Failure::from_error(&e, Some(&def))),
        });
    }
    done
}

/// Why a definition file did not load: every problem found, or one message when the file could
/// not even be read or parsed.
#[derive(Debug)]
pub struct Failure {
    pub report: Option<ValidationReport>,
    pub message: String,
}

impl Failure {
    /// From a registry or parse error. A name clash (built-in or duplicate) is reported at
    /// `name` together with whatever else is wrong with the definition.
    pub fn from_error(e: &CoreError, def: Option<&ToolDefinition>) -> Self {
        let message = match e {
            CoreError::InFile { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        if let Some(r) = e.report() {
            return Self {
                report: Some(r.clone()),
                message,
            };
        }
        let clash = match e.kind() {
            CoreErrorKind::Forbidden => Some("name.builtin"),
            CoreErrorKind::Conflict => Some("name.duplicate"),
            _ => None,
        };
        match (clash, def) {
            (Some(code), Some(def)) => {
                let mut report = match toolgate_core::validate(def) {
                    Ok(spec) => ValidationReport {
                        errors: Vec::new(),
                        warnings: spec.warnings().to_vec(),
                    },
                    Err(report) => report,
                };
                report.errors.insert(
                    0,
                    Issue {
                        path: "name".into(),
                        code: code.into(),
                        message: message.clone(),
                    },
                );
                Self {
                    report: Some(report),
                    message,
                }
            }
            _ => Self {
                report: None,
                message,
            },
        }
    }

    /// One line: every error, or the message.
    pub fn one_line(&self) -> String {
        match &self.report {
            Some(r) => r
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            None => self.message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    /// The store's plan table names exactly the built-ins toolgate ships, in the same order: a
    /// new built-in cannot slip into (or out of) the plans unnoticed.
    #[test]
    fn the_plans_know_every_built_in() {
        assert_eq!(
            toolgate_store::ALL_BUILTINS.as_slice(),
            toolgate_builtins::BUILTIN_NAMES
        );
    }
}

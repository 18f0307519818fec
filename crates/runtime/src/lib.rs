//! toolgate's runtime: the one place that assembles a working toolgate (store, registry with its
//! run kinds, the production call pipeline) and the use cases every front-end offers. It knows
//! no transport: the CLI and the server parse, authenticate and present; the runtime does.
//!
//! [`Runtime::open`] reads the config, opens the store, registers the built-ins, the stored
//! definitions and the tools directory, and builds the one production [`Pipeline`]: per-principal
//! quotas, the config's rate limit, the durable approval gate (announced as an event and to the
//! webhook), the audit stage and observer, the event hub, the network-policy HTTP client and the
//! sandbox executor. [`Runtime::call`] runs one call in a tracked task that survives its caller;
//! [`Runtime::drain`] lets calls in flight finish at shutdown. [`Runtime::run_tool_calls`] runs
//! the tool calls of one model turn (parsed by `toolgate_export`'s per-provider parsers): reads
//! concurrently, everything else in the model's order.
//!
//! The use cases: [`definitions`] (add, update, remove a custom definition), [`decide`]
//! (approve, deny, run an approved call) and [`views`] (the typed list and show views whose JSON
//! is the one shape the CLI's `--json`, the REST API and the web UI share) and [`servers`] (the
//! upstream MCP servers: list, show, approve their tools, restart, remove, add, import). Their
//! refusals are [`OpError`]s.

#![warn(missing_docs, unreachable_pub)]

mod approvals;
mod assembly;
mod calls;
mod config;
pub mod decide;
pub mod definitions;
mod error;
mod events;
mod op_error;
mod plans;
mod principals;
mod running;
mod runs;
pub mod servers;
mod tool_calls;
pub mod views;
mod webhook;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;
use toolgate_builtins::{BuiltinOptions, FileRoot, OutputTypes};
use toolgate_core::{
    CancellationToken, CoreError, HttpClient, Pipeline, PipelineBuilder, Principal,
    PrincipalQuotaStage, RateLimit, RateLimitStage, Registry, ToolDefinition,
};
use toolgate_gateway::upstream::http::PolicyConnector;
use toolgate_gateway::upstream::{Connector, HttpConnector, StdioSpawner};
use toolgate_net::{NetPolicy, PolicyClient};
use toolgate_redis::RedisQuotas;
use toolgate_sandbox::{Runner, SandboxConfig, SandboxExecutor};
use toolgate_store::{AuditObserver, AuditStage, DbUrl, HintFn, Store, StoreOptions, Tier};

pub use approvals::{APPROVAL_POLL, approval_summary, default_hint};
pub use assembly::{
    Failure, Loaded, access_warnings, default_db_path, definition_files, describe_root,
    home_folders, implicit_root, register_in_order, worker_tools,
};
pub use config::{
    AUDIT_KEY_ENV, ApprovalsConfig, AuditConfig, ClusterConfig, Config, PrincipalConfig,
    RateLimitConfig, ServerConfig, config_schema,
};
pub use error::{RuntimeError, RuntimeErrorKind};
pub use events::{EventHub, HubEvent};
pub use op_error::{OpError, OpErrorKind};
pub use plans::StorePlans;
pub use principals::{PrincipalEntry, Principals};
pub use webhook::{
    DEFAULT_WEBHOOK_FIRST_BACKOFF, DEFAULT_WEBHOOK_MAX_ATTEMPTS, DEFAULT_WEBHOOK_TIMEOUT, Delivery,
    DeliveryStatus, WEBHOOK_EVENT, WEBHOOK_MAX_BACKOFF, Webhook, WebhookConfig, sign, verify,
};

/// Where the runtime's configuration comes from.
#[derive(Debug, Default)]
pub enum ConfigSource {
    /// No config file: every default.
    #[default]
    Default,
    /// A `toolgate.toml` file (relative paths in it are taken relative to the file).
    File(PathBuf),
    /// A config already in hand (tests, embedders).
    Value(Box<Config>),
}

/// How to open a [`Runtime`]. Every field has a default: no config file, the default database,
/// the implicit file root, no tools directory.
pub struct RuntimeOptions {
    /// The config file, or a config value.
    pub config: ConfigSource,
    /// The database; `None` means `sqlite:` [`default_db_path`].
    pub db: Option<DbUrl>,
    /// How to open the store (a PostgreSQL schema of its own, for tests).
    pub store: StoreOptions,
    /// The file tools' root; `None` means the config's `root`, else [`implicit_root`].
    pub root: Option<PathBuf>,
    /// Definition files to load; `None` means the config's `tools_dir`, if any.
    pub tools_dir: Option<PathBuf>,
    /// Names of tools-directory and stored definitions to leave out (a caller about to replace
    /// them).
    pub exclude: Vec<String>,
    /// The binary re-executed as the sandbox launcher (it must call
    /// `toolgate_sandbox::hidden_main` first thing); `None` means the current executable.
    pub launcher: Option<PathBuf>,
    /// How the default approval gate tells a caller to decide a pending approval (the hint
    /// differs per front-end); `None` means [`default_hint`].
    pub approval_hint: Option<HintFn>,
    /// Whether to set up the config's approval webhook (`[approvals] webhook_url`): a serving
    /// front-end announces new approvals, a one-shot command does not.
    pub announce_approvals: bool,
    /// A webhook to announce new approvals with instead of the config's (a test's receiver);
    /// used whatever `announce_approvals` says.
    pub webhook: Option<Arc<Webhook>>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            config: ConfigSource::Default,
            db: None,
            store: StoreOptions::default(),
            root: None,
            tools_dir: None,
            exclude: Vec::new(),
            launcher: None,
            approval_hint: None,
            announce_approvals: false,
            webhook: None,
        }
    }
}

impl std::fmt::Debug for RuntimeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeOptions")
            .field("config", &self.config)
            .field("db", &self.db)
            .field("root", &self.root)
            .field("tools_dir", &self.tools_dir)
            .field("exclude", &self.exclude)
            .field("launcher", &self.launcher)
            .field("announce_approvals", &self.announce_approvals)
            .field("webhook", &self.webhook)
            .finish_non_exhaustive()
    }
}

/// The parts a [`Runtime`] is assembled from. [`Runtime::open`] makes them from
/// [`RuntimeOptions`]; an embedder or a test that brings its own registry and store fills them
/// in and calls [`Runtime::assemble`], which builds the same pipeline.
pub struct Parts {
    /// The configuration (its principals and rate limit are taken from the fields below).
    pub config: Config,
    /// The opened store the runtime reads definitions from and audits into.
    pub store: Store,
    /// The registry, with whatever tools and run kinds it should have.
    pub registry: Arc<Registry>,
    /// Where the file tools are rooted (or why they serve nothing).
    pub file_root: FileRoot,
    /// The principals and the default plan.
    pub principals: Principals,
    /// A per-(principal, tool) rate limit for everyone.
    pub rate_limit: Option<RateLimit>,
    /// How long a call that needs confirmation waits for a decision.
    pub approval_ttl: Duration,
    /// How the approval gate tells a caller to decide.
    pub approval_hint: HintFn,
    /// Where every new pending approval is announced (signed), if anywhere.
    pub webhook: Option<Arc<Webhook>>,
    /// The client every tool's outbound request goes through; `None` keeps the pipeline's
    /// default client.
    pub http: Option<Arc<dyn HttpClient>>,
    /// Runs every call's attempt; `None` runs every tool in process.
    pub executor: Option<Arc<SandboxExecutor>>,
    /// Startup warnings to pass on (definitions that no longer load, …).
    pub warnings: Vec<String>,
    /// The upstream MCP servers (`[servers]` and the stored entries) with their pins.
    pub servers: servers::Loaded,
    /// Starts stdio upstreams: the sandbox runner's sessions ([`servers::SandboxSpawner`]);
    /// `None` leaves stdio servers unavailable.
    pub stdio: Option<Arc<dyn StdioSpawner>>,
    /// Opens Streamable HTTP upstreams (through the network policy); `None` leaves HTTP
    /// servers unavailable.
    pub upstream_http: Option<HttpConnector>,
    /// Where rate limits and concurrency caps are counted instead of the store (`[cluster]
    /// redis_url`); `None` counts them in PostgreSQL, or in this process on SQLite.
    pub redis: Option<Arc<RedisQuotas>>,
}

impl Parts {
    /// Parts over `store` and `registry` with every default: no config file, the local
    /// principal under the enterprise plan, no rate limit, the default approval time-to-live
    /// and hint, no webhook, the default HTTP client and in-process execution.
    pub fn new(store: Store, registry: Arc<Registry>) -> Result<Self, RuntimeError> {
        let config = Config::default();
        let principals = Principals::new(Vec::new(), config.plan()?)?;
        Ok(Self {
            config,
            store,
            registry,
            file_root: FileRoot::Disabled {
                reason: "The file tools have no root in this runtime".into(),
            },
            principals,
            rate_limit: None,
            approval_ttl: toolgate_store::DEFAULT_APPROVAL_TTL,
            approval_hint: default_hint(),
            webhook: None,
            http: None,
            executor: None,
            warnings: Vec::new(),
            servers: servers::Loaded::default(),
            stdio: None,
            upstream_http: None,
            redis: None,
        })
    }
}

/// A working toolgate: config, store, registry, principals and the one production pipeline,
/// with the calls in flight. Share it as `Arc<Runtime>`; front-ends (the CLI, the server) only
/// parse, authenticate and present.
pub struct Runtime {
    config: Config,
    store: Store,
    registry: Arc<Registry>,
    file_root: FileRoot,
    principals: Principals,
    executor: Option<Arc<SandboxExecutor>>,
    hub: EventHub,
    webhook: Option<Arc<Webhook>>,
    approval_ttl: Duration,
    pipeline: Pipeline,
    /// Calls in flight (a call whose caller goes away finishes in a task of its own, so a
    /// dropped caller cannot cut its audit).
    calls: TaskTracker,
    /// Fires when calls still running after the grace period must stop.
    cancel_calls: CancellationToken,
    /// Approved calls running in this process, by approval id (to cancel one).
    running: running::RunningApprovals,
    /// Fires once [`Runtime::drain`] is done: followers stop, long-lived streams end.
    stopped: CancellationToken,
    warnings: Vec<String>,
    servers: servers::Servers,
    redis: Option<Arc<RedisQuotas>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("registry", &self.registry)
            .field("store", &self.store.url().to_string())
            .field("principals", &self.principals)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Reads the config, opens the store, registers the built-ins (jailed to the root), the
    /// stored definitions and the tools-directory files, and builds the production pipeline.
    /// Definitions that do not load are skipped and named in [`Runtime::warnings`].
    pub async fn open(options: RuntimeOptions) -> Result<Arc<Self>, RuntimeError> {
        Ok(Self::assemble(Self::prepare(options).await?))
    }

    /// What [`Runtime::open`] assembles, before the pipeline is built: an embedder or a test
    /// harness may adjust the parts (principals, a webhook of its own) and then call
    /// [`Runtime::assemble`].
    pub async fn prepare(options: RuntimeOptions) -> Result<Parts, RuntimeError> {
        let RuntimeOptions {
            config,
            db,
            store: store_options,
            root,
            tools_dir,
            exclude,
            launcher,
            approval_hint,
            announce_approvals,
            webhook,
        } = options;
        let config = match config {
            ConfigSource::Default => Config::default(),
            ConfigSource::File(path) => Config::load(&path)?,
            ConfigSource::Value(config) => *config,
        };
        let plan = config.plan()?;
        let principals = Principals::new(config.principal_entries()?, plan.clone())?;
        let root = match root.or_else(|| config.root.clone()) {
            Some(root) => FileRoot::Dir(root),
            None => implicit_root(
                std::env::current_dir().map_err(|source| RuntimeError::Io {
                    what: "Cannot determine the current directory".into(),
                    source,
                })?,
                &home_folders(),
            ),
        };
        let url = db.unwrap_or_else(|| DbUrl::Sqlite(default_db_path()));
        let anchor = config.audit.anchor(&url, |name| std::env::var(name).ok())?;
        let store = Store::open_with(&url, &store_options, &anchor).await?;
        let mut warnings = Vec::new();
        let registry = Arc::new(Registry::with_caps(plan.caps()));
        // Declarative `http` definitions (stored or in the tools directory) get their handlers.
        registry.add_run_kind(Arc::new(toolgate_builtins::HttpKind::new()));
        // Declarative `command` definitions run their program in the sandbox they ask for.
        registry.add_run_kind(Arc::new(toolgate_sandbox::CommandKind));
        let http = PolicyClient::new(config.network.clone().with_env()).map_err(|source| {
            RuntimeError::Network {
                what: "Cannot set up the HTTP client for network tools".into(),
                source,
            }
        })?;
        let mut output_types = OutputTypes::with_defaults();
        // Stored output types first; the config file's win on a name clash.
        for (name, definition) in store.output_types().await? {
            if config.output_types.contains_key(&name) {
                continue;
            }
            if let Err(e) = output_types.insert(&name, definition) {
                warnings.push(format!("stored output type {name} no longer loads: {e}"));
            }
        }
        for (name, path) in &config.output_types {
            output_types
                .load_file(name, path)
                .map_err(|source| RuntimeError::OutputType {
                    what: format!(
                        "Invalid output type {name:?} in the config file's [output_types]"
                    ),
                    source,
                })?;
        }
        let options = BuiltinOptions {
            root: root.clone(),
            search: config.search.clone().with_env(),
            wikipedia: config.wikipedia.clone().with_env(),
            plans: Arc::new(StorePlans(store.clone())),
            output_types: Arc::new(output_types),
        };
        let builtins = toolgate_builtins::builtin_tools_with(options).map_err(|source| {
            RuntimeError::Builtins {
                what: format!(
                    "Cannot use {} as the file tools' root",
                    root.dir().unwrap_or(std::path::Path::new("")).display()
                ),
                source,
            }
        })?;
        registry.register_all(builtins, true).map_err(|e| {
            RuntimeError::Internal(format!(
                "Built-in tools failed to register (a bug: please report it): {e}"
            ))
        })?;
        // Stored definitions join the registry (a bad one is reported and skipped); those the
        // caller is about to replace are left out.
        let stored = store
            .definitions()
            .await?
            .into_iter()
            .map(|d| d.definition)
            .filter(|d| !exclude.contains(&d.name))
            .map(|d| (PathBuf::from(format!("(stored) {}", d.name)), Ok(d)))
            .collect();
        for loaded in register_in_order(&registry, stored) {
            if let Err(e) = &loaded.outcome {
                warnings.push(format!(
                    "{} no longer loads: {}",
                    loaded.path.display(),
                    e.one_line()
                ));
            }
        }
        let launcher = match launcher {
            Some(launcher) => launcher,
            None => std::env::current_exe().map_err(|source| RuntimeError::Io {
                what: "Cannot find the toolgate binary (needed to launch sandboxed tools)".into(),
                source,
            })?,
        };
        let mut sandbox = SandboxConfig::new(launcher);
        sandbox.policy = config.network.clone().with_env();
        let runner = Arc::new(Runner::new(sandbox));
        let executor = Arc::new(SandboxExecutor::new(Arc::clone(&runner)));
        let servers = servers::Loaded::read(&config, &store).await?;
        warnings.extend(servers.warnings.iter().cloned());
        if let Some(dir) = tools_dir.or_else(|| config.tools_dir.clone()) {
            let parsed: Vec<(PathBuf, Result<ToolDefinition, CoreError>)> = definition_files(&dir)?
                .into_iter()
                .map(|p| {
                    let def = ToolDefinition::load(&p);
                    (p, def)
                })
                .filter(|(_, d)| d.as_ref().map_or(true, |d| !exclude.contains(&d.name)))
                .collect();
            for loaded in register_in_order(&registry, parsed) {
                if let Err(e) = &loaded.outcome {
                    warnings.push(format!(
                        "skipped {}: {}",
                        loaded.path.display(),
                        e.one_line()
                    ));
                }
            }
        }
        let webhook = match webhook {
            Some(webhook) => Some(webhook),
            None if announce_approvals => approval_webhook(&config)?,
            None => None,
        };
        let rate_limit = config.rate_limit();
        let redis = match config.cluster.redis()? {
            Some((url, prefix)) => Some(Arc::new(
                RedisQuotas::new(&url, prefix).map_err(|e| RuntimeError::Config(e.to_string()))?,
            )),
            None => None,
        };
        let approval_ttl = config.approvals.ttl();
        // Streamable HTTP upstreams go through the same network policy as tools.
        let upstream_http = PolicyConnector::from_client(http.clone()).http_connector();
        Ok(Parts {
            config,
            store,
            registry,
            file_root: root,
            principals,
            rate_limit,
            approval_ttl,
            approval_hint: approval_hint.unwrap_or_else(default_hint),
            webhook,
            http: Some(Arc::new(http)),
            executor: Some(executor),
            warnings,
            servers,
            stdio: Some(Arc::new(servers::SandboxSpawner::new(runner))),
            upstream_http: Some(upstream_http),
            redis,
        })
    }

    /// Builds the runtime and its pipeline from `parts` — the one place a production
    /// [`Pipeline`] is built: per-principal quotas, the rate limit, the durable approval gate
    /// as the default approval handler, the audit stage and observer, the event hub, the HTTP
    /// client and the executor.
    pub fn assemble(parts: Parts) -> Arc<Self> {
        let Parts {
            config,
            store,
            registry,
            file_root,
            principals,
            rate_limit,
            approval_ttl,
            approval_hint,
            webhook,
            http,
            executor,
            warnings,
            servers,
            stdio,
            upstream_http,
            redis,
        } = parts;
        let hub = EventHub::new();
        // With `[cluster] redis_url`, quotas and rate limits are counted in Redis (whatever the
        // store); else on PostgreSQL in the database, so every instance on it counts the same
        // calls; on SQLite (one instance) in this process.
        let shared = match &redis {
            Some(redis) => Some(Arc::clone(redis) as Arc<dyn toolgate_core::SharedCounter>),
            None => store
                .shared_quotas()
                .map(|q| q as Arc<dyn toolgate_core::SharedCounter>),
        };
        let mut quotas = PrincipalQuotaStage::new(principals.quotas());
        if let Some(counter) = &shared {
            quotas = quotas.shared(Arc::clone(counter));
        }
        // Run budgets first: a call over its run's budget is refused before any other count.
        let mut builder = PipelineBuilder::new(Arc::clone(&registry))
            .stage(Arc::new(toolgate_core::RunBudgetStage::new(Arc::new(
                store.clone(),
            ))))
            .stage(Arc::new(quotas));
        if let Some(limit) = rate_limit {
            let mut stage = RateLimitStage::new(limit);
            if let Some(counter) = &shared {
                stage = stage.shared(Arc::clone(counter));
            }
            builder = builder.stage(Arc::new(stage));
        }
        builder = builder
            .approval(approvals::durable(
                store.clone(),
                approval_ttl,
                approval_hint,
                hub.clone(),
                webhook.clone(),
            ))
            .stage(Arc::new(AuditStage::new(store.clone())))
            .observer(Arc::new(AuditObserver::new(store.clone())))
            .observer(Arc::new(hub.clone()));
        if let Some(http) = http {
            builder = builder.http_client(http);
        }
        if let Some(executor) = &executor {
            builder = builder.executor(executor.clone());
        }
        let stopped = CancellationToken::new();
        let servers = servers::Servers::assemble(
            servers,
            store.clone(),
            Arc::clone(&registry),
            hub.clone(),
            Connector {
                stdio: stdio.unwrap_or_else(|| Arc::new(servers::NoStdio)),
                http: upstream_http,
            },
            stopped.child_token(),
        );
        Arc::new(Self {
            servers,
            config,
            store,
            registry,
            file_root,
            principals,
            executor,
            hub,
            webhook,
            approval_ttl,
            pipeline: builder.build(),
            calls: TaskTracker::new(),
            cancel_calls: CancellationToken::new(),
            running: running::RunningApprovals::default(),
            stopped,
            warnings,
            redis,
        })
    }

    /// The Redis the limits are counted in (`[cluster] redis_url`), if any.
    pub fn redis(&self) -> Option<&Arc<RedisQuotas>> {
        self.redis.as_ref()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The store the runtime reads definitions from and audits into.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The registry every front-end lists and calls.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The upstream MCP servers whose tools this runtime serves, and the use cases on them.
    pub fn servers(&self) -> &servers::Servers {
        &self.servers
    }

    /// The production pipeline. Front-ends call through [`Runtime::call`]; a one-shot command
    /// may call it directly (overriding the approval handler per request).
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The plan for callers without one of their own (and for the local principal).
    pub fn plan(&self) -> &Tier {
        self.principals.default_plan()
    }

    /// The configured principals.
    pub fn principals(&self) -> &Principals {
        &self.principals
    }

    /// The principal named `id` as a command-line caller runs: `local` (every permission) when
    /// `None` or when the config does not define `local`, else the configured one; the
    /// built-ins outside its plan are hidden from it.
    pub fn principal(&self, id: Option<&str>) -> Result<Principal, RuntimeError> {
        self.config.principal(id)
    }

    /// Whether `tool` exists for a caller under the default plan: built-ins outside the plan in
    /// force do not (the same rule `Principal::may_call` applies to calls, see `Tier::restrict`).
    pub fn sees(&self, tool: &str) -> bool {
        !self.plan().hides(tool)
    }

    /// Where the file tools are rooted (or why they serve nothing).
    pub fn file_root(&self) -> &FileRoot {
        &self.file_root
    }

    /// The sandbox executor, when calls run through one.
    pub fn executor(&self) -> Option<&Arc<SandboxExecutor>> {
        self.executor.as_ref()
    }

    /// The event hub: every finished call, definition changes and approval changes.
    pub fn events(&self) -> &EventHub {
        &self.hub
    }

    /// The approval webhook, when one announces new approvals.
    pub fn webhook(&self) -> Option<&Arc<Webhook>> {
        self.webhook.as_ref()
    }

    /// How long a new approval waits for a decision.
    pub fn approval_ttl(&self) -> Duration {
        self.approval_ttl
    }

    /// Problems met while opening that did not stop it (definitions that no longer load,
    /// skipped tools-directory files), one line each, for the front-end to show.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A token that fires once the runtime has stopped ([`Runtime::drain`] is done): long-lived
    /// streams of a front-end end on it.
    pub fn stopped(&self) -> CancellationToken {
        self.stopped.child_token()
    }

    /// Loads stored definitions and starts the store followers: one keeps the registry in
    /// step (changes from the CLI or other instances) and feeds definition events to the event
    /// hub, the other ([`Runtime::follow_approvals`]) publishes approval changes made elsewhere;
    /// both stop when the runtime stops. Returns the last definition event id loaded.
    pub async fn start_sync(&self) -> Result<i64, RuntimeError> {
        let last = self.store.load_into(&self.registry).await?;
        let hub = self.hub.clone();
        let servers = self.servers.clone();
        self.store.keep_in_sync_with(
            Arc::clone(&self.registry),
            last,
            self.stopped.child_token(),
            move |event| {
                servers.on_store_event(event);
                hub.publish_definition(event);
            },
        );
        self.follow_approvals().await?;
        Ok(last)
    }
}

/// The approval webhook of `[approvals]`, if configured. Its client obeys `[network]` but may
/// reach the webhook's own host on a private address (an intranet receiver is common), and no
/// other private host.
fn approval_webhook(config: &Config) -> Result<Option<Arc<Webhook>>, RuntimeError> {
    let Some(webhook) = config.approvals.webhook()? else {
        return Ok(None);
    };
    let host = webhook
        .host()
        .map_err(|e| RuntimeError::Config(format!("[approvals] {e}")))?;
    let policy = NetPolicy {
        private_hosts: vec![host],
        ..config.network.clone()
    };
    let client = PolicyClient::new(policy).map_err(|source| RuntimeError::Network {
        what: "Cannot set up the HTTP client for the approval webhook".into(),
        source,
    })?;
    Ok(Some(Arc::new(Webhook::new(webhook, Arc::new(client))?)))
}

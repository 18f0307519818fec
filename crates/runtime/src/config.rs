//! The configuration file (`toolgate.toml`): principals and their grants, defaults for the file
//! root and the tools directory, rate limits, the network policy, approvals, the audit key and
//! the server's settings. Every front-end reads it through the runtime.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use toolgate_builtins::{SearchConfig, WikipediaConfig};
use toolgate_core::{Budget, Permission, Principal, PrincipalId, Quota, RateLimit};
use toolgate_gateway::{ServerEntry, ServerName};
use toolgate_net::NetPolicy;
use toolgate_redis::{KeyPrefix, RedisUrl};
use toolgate_store::{AuditAnchor, AuditKey, DbUrl, Tier, suffixed};

use crate::error::RuntimeError;
use crate::principals::PrincipalEntry;
use crate::webhook::WebhookConfig;

/// Returns a [`RuntimeError::Config`] with the formatted message.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err(RuntimeError::Config(format!($($arg)*)))
    };
}

/// `toolgate.toml`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Jail for the file tools (relative to the config file).
    pub root: Option<PathBuf>,
    /// Definition files to load (relative to the config file).
    pub tools_dir: Option<PathBuf>,
    /// `[principals.NAME]`: who may call, with which grants, plan, quota and token.
    #[serde(default)]
    pub principals: BTreeMap<String, PrincipalConfig>,
    /// `[rate_limit]`: a per-(principal, tool) rate limit for everyone.
    pub rate_limit: Option<RateLimitConfig>,
    /// The plan in force: core, writer_pro, teams or enterprise (the default).
    #[schemars(extend("enum" = Tier::NAMES, "default" = "enterprise"))]
    pub plan: Option<String>,
    /// `[server]`: who may reach `toolgate serve` besides loopback clients.
    #[serde(default)]
    pub server: ServerConfig,
    /// `[network]`: the policy every outbound request of a tool obeys.
    #[serde(default)]
    pub network: NetPolicy,
    /// `[search]`: web_search's engine, key, Google engine id and base URL (the
    /// `TOOLGATE_SEARCH_*` environment variables override these).
    #[serde(default)]
    pub search: SearchConfig,
    /// `[wikipedia]`: `base_url` standing in for `https://{lang}.wikipedia.org`.
    #[serde(default)]
    pub wikipedia: WikipediaConfig,
    /// `[output_types]`: name = path of an output-type JSON file for validate_output (relative to
    /// the config file), added to the built-in `domain_map`.
    #[serde(default)]
    pub output_types: BTreeMap<String, PathBuf>,
    /// `[approvals]`: how long a call waits for a decision.
    #[serde(default)]
    pub approvals: ApprovalsConfig,
    /// `[audit]`: the key that signs the audit log's checkpoints and where they are kept.
    #[serde(default)]
    pub audit: AuditConfig,
    /// `[servers.NAME]`: upstream MCP servers whose tools become toolgate tools (checked when the
    /// file is loaded; see [`Config::server_entries`]).
    #[serde(default)]
    pub servers: BTreeMap<String, ServerEntry>,
    /// `[cluster]`: what several instances share besides the database (Redis for the limits).
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// `[budget]`: the run budget of every principal, the local one included (see
    /// [`Config::budget_for`]).
    pub budget: Option<Budget>,
    // New sections go above this line with a `JsonSchema` derive on their type; then run
    // `toolgate schema config > docs/schemas/config.schema.json` and describe them in the file
    // `toolgate init` writes (crates/cli/src/init/toolgate.toml).
}

/// `[cluster]` settings: several instances behind a load balancer.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Count per-principal rate limits and concurrency caps (and `[rate_limit]`) in this Redis
    /// (`redis://HOST:PORT` or `rediss://` for TLS) instead of the PostgreSQL database, on
    /// PostgreSQL and SQLite stores alike.
    pub redis_url: Option<String>,
    /// What every Redis key starts with (default `toolgate:`): deployments sharing one Redis
    /// keep apart by it.
    pub key_prefix: Option<String>,
}

impl ClusterConfig {
    /// The Redis counter's URL and key prefix, checked; `None` without `redis_url`.
    pub fn redis(&self) -> Result<Option<(RedisUrl, KeyPrefix)>, RuntimeError> {
        let Some(url) = &self.redis_url else {
            if self.key_prefix.is_some() {
                bail!("[cluster] key_prefix needs redis_url (the Redis the limits are counted in)");
            }
            return Ok(None);
        };
        let url = RedisUrl::parse(url).map_err(|e| RuntimeError::Config(e.to_string()))?;
        let prefix = match &self.key_prefix {
            Some(prefix) => {
                KeyPrefix::parse(prefix).map_err(|e| RuntimeError::Config(e.to_string()))?
            }
            None => KeyPrefix::default(),
        };
        Ok(Some((url, prefix)))
    }
}

/// `[audit]` settings: the checkpoint key, kept out of the database (see the README's "What the
/// audit protects against, and against whom").
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// The NAME of the environment variable holding the key (the key never goes in the file).
    pub key_env: Option<String>,
    /// A file holding the key (relative to the config file), created with a random key (mode
    /// 0600) when missing.
    pub key_file: Option<PathBuf>,
    /// Where the newest checkpoint is kept outside the database (relative to the config file).
    pub checkpoint_file: Option<PathBuf>,
}

/// The environment variable holding the audit checkpoint key when the config names none.
pub const AUDIT_KEY_ENV: &str = "TOOLGATE_AUDIT_KEY";

impl AuditConfig {
    /// The audit anchor for `url`: the key from `key_env`, `key_file` or `TOOLGATE_AUDIT_KEY`
    /// (in that order), else for SQLite a key file next to the database; the checkpoint file from
    /// `checkpoint_file`, else next to the database (SQLite) or next to the key file.
    /// PostgreSQL has no default: without a key (and a place for the checkpoint file) a cut tail
    /// could not be shown, so this is an error naming the settings.
    pub fn anchor(
        &self,
        url: &DbUrl,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<AuditAnchor, RuntimeError> {
        let key = match (&self.key_env, &self.key_file) {
            (Some(_), Some(_)) => {
                bail!("[audit] key_env and key_file both name a checkpoint key; keep one of them")
            }
            (Some(name), None) => {
                let name = name.trim();
                let Some(secret) = var(name).filter(|v| !v.is_empty()) else {
                    bail!(
                        "The audit checkpoint key is missing: the environment variable {name} (named by [audit] key_env) is unset or empty; set it to a random secret (`openssl rand -hex 32`)"
                    );
                };
                Some(AuditKey::Secret(secret.into_bytes()))
            }
            (None, Some(path)) => Some(AuditKey::File(path.clone())),
            (None, None) => var(AUDIT_KEY_ENV)
                .filter(|v| !v.is_empty())
                .map(|v| AuditKey::Secret(v.into_bytes())),
        };
        let defaults = AuditAnchor::for_url(url);
        let key = key.or(defaults.key);
        let checkpoint_file = self
            .checkpoint_file
            .clone()
            .or(defaults.checkpoint_file)
            .or_else(|| self.key_file.as_deref().map(|k| suffixed(k, ".checkpoint")));
        match (&key, &checkpoint_file) {
            (Some(_), Some(_)) => {}
            (None, _) => bail!(
                "The audit log in PostgreSQL needs a checkpoint key kept outside the database, or deleting its newest entries would go unnoticed: set [audit] key_file = \"/etc/toolgate/audit-key\" (created when missing) or key_env in the config file, or the {AUDIT_KEY_ENV} environment variable"
            ),
            (Some(_), None) => bail!(
                "The audit log in PostgreSQL needs a checkpoint file outside the database: set [audit] checkpoint_file = \"/var/lib/toolgate/audit-checkpoint\" in the config file (a key from the environment leaves no place to derive it from)"
            ),
        }
        Ok(AuditAnchor {
            key,
            checkpoint_file,
        })
    }
}

/// `[approvals]` settings.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// Seconds a pending approval waits before it expires (default 86400, one day).
    #[schemars(extend("default" = 86400))]
    pub ttl_seconds: Option<u64>,
    /// `toolgate serve` POSTs every new pending approval here, signed (HMAC-SHA256).
    pub webhook_url: Option<String>,
    /// The NAME of the environment variable holding the webhook's signing secret (the secret
    /// itself never goes in the config file).
    pub webhook_secret_env: Option<String>,
    /// Attempts of one delivery (default 5).
    #[schemars(extend("default" = 5), range(min = 1))]
    pub webhook_max_attempts: Option<u32>,
}

impl ApprovalsConfig {
    /// The time-to-live of a new approval.
    pub fn ttl(&self) -> std::time::Duration {
        self.ttl_seconds.map_or(
            toolgate_store::DEFAULT_APPROVAL_TTL,
            std::time::Duration::from_secs,
        )
    }

    /// The approval webhook, its secret read from the environment; `None` when no
    /// `webhook_url` is configured.
    pub fn webhook(&self) -> Result<Option<WebhookConfig>, RuntimeError> {
        self.webhook_with_vars(|name| std::env::var(name).ok())
    }

    /// Like [`ApprovalsConfig::webhook`], reading variables through `var`.
    pub fn webhook_with_vars(
        &self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<WebhookConfig>, RuntimeError> {
        let Some(url) = &self.webhook_url else {
            if self.webhook_secret_env.is_some() || self.webhook_max_attempts.is_some() {
                bail!(
                    "[approvals] webhook_secret_env and webhook_max_attempts need webhook_url (where to POST new approvals)"
                );
            }
            return Ok(None);
        };
        let Some(name) = self
            .webhook_secret_env
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
        else {
            bail!(
                "[approvals] webhook_url needs webhook_secret_env: the name of an environment variable holding the signing secret (for instance webhook_secret_env = \"TOOLGATE_WEBHOOK_SECRET\"); the secret itself does not go in the config file"
            );
        };
        let Some(secret) = var(name).filter(|v| !v.is_empty()) else {
            bail!(
                "The approval webhook's secret is missing: the environment variable {name} (named by [approvals] webhook_secret_env) is unset or empty; set it to the secret shared with the receiver"
            );
        };
        let mut config = WebhookConfig::new(url.clone(), secret);
        if let Some(n) = self.webhook_max_attempts {
            if n == 0 {
                bail!("[approvals] webhook_max_attempts must be at least 1");
            }
            config.max_attempts = n;
        }
        if let Err(e) = config.host() {
            bail!("[approvals] {e}");
        }
        Ok(Some(config))
    }
}

/// `[server]` settings of `toolgate serve`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Host names (or host:port) accepted in the `Host` header besides loopback names.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call the server (`https://app.example.com`).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Largest request body in bytes (default 4 MiB).
    #[schemars(extend("default" = 4194304))]
    pub max_body_bytes: Option<usize>,
    /// Open MCP sessions on the server (default 1000); a new one past it is refused (503).
    #[schemars(extend("default" = 1000))]
    pub max_sessions: Option<usize>,
    /// Open MCP sessions of one principal (default 100); a new one past it is refused (429).
    #[schemars(extend("default" = 100))]
    pub max_sessions_per_principal: Option<usize>,
    /// Seconds an MCP session without requests lives (default 1800, 30 minutes).
    #[schemars(extend("default" = 1800))]
    pub session_idle_timeout_seconds: Option<u64>,
}

/// The JSON Schema (draft 2020-12) of `toolgate.toml`, generated from [`Config`]: every section
/// and key the loader accepts (unknown ones refused), with the documented defaults
/// (`toolgate schema config`, published as `docs/schemas/config.schema.json`).
pub fn config_schema() -> serde_json::Value {
    toolgate_core::published(
        schemars::schema_for!(Config),
        "toolgate configuration file (toolgate.toml)",
    )
}

impl Config {
    /// The plan in force; `enterprise` (no limits) when the config names none.
    pub fn plan(&self) -> Result<Tier, RuntimeError> {
        let Some(name) = self.plan.as_deref() else {
            return Ok(Tier::enterprise());
        };
        Tier::named(name).ok_or_else(|| {
            RuntimeError::Config(format!(
                "Unknown plan {name:?} in the config file; use one of {}",
                Tier::NAMES.join(", ")
            ))
        })
    }

    /// The `[servers]` entries, each name and entry validated; every problem of every entry at
    /// once, one line each as `servers.NAME.field: message`.
    pub fn server_entries(&self) -> Result<Vec<(ServerName, ServerEntry)>, RuntimeError> {
        let mut problems = Vec::new();
        let mut entries = Vec::with_capacity(self.servers.len());
        for (raw, entry) in &self.servers {
            match ServerName::parse(raw) {
                Ok(name) => match entry.validate(&name) {
                    Ok(()) => entries.push((name, entry.clone())),
                    Err(issues) => problems.extend(
                        issues
                            .into_iter()
                            .map(|i| format!("{}: {}", i.path, i.message)),
                    ),
                },
                Err(e) => problems.push(format!("servers.{raw:?}: {e}")),
            }
        }
        if problems.is_empty() {
            Ok(entries)
        } else {
            Err(RuntimeError::Config(format!(
                "Invalid [servers] entries:\n  {}",
                problems.join("\n  ")
            )))
        }
    }

    /// The configured rate limit (checked when the file was loaded).
    pub fn rate_limit(&self) -> Option<RateLimit> {
        let c = self.rate_limit.as_ref()?;
        RateLimit::new(c.burst, c.per_second).ok()
    }
}

/// `[principals.NAME]`: one principal's grants, token, plan and quota.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrincipalConfig {
    /// Permissions granted, e.g. `tool.filesystem.read` or `tool.filesystem.*`.
    #[serde(default)]
    pub grants: Vec<Permission>,
    /// If set, the only tools this principal may call.
    pub tools: Option<Vec<String>>,
    /// SHA-256 (hex) of the principal's bearer token for `toolgate serve` (`toolgate token`).
    pub token_sha256: Option<String>,
    /// The principal's plan (defaults to the file's `plan`).
    #[schemars(extend("enum" = Tier::NAMES))]
    pub plan: Option<String>,
    /// A rate over all of the principal's calls.
    pub rate_limit: Option<RateLimitConfig>,
    /// At most this many of the principal's calls at once.
    #[schemars(range(min = 1))]
    pub max_concurrent_calls: Option<u32>,
    /// `[principals.NAME.budget]`: this principal's run budget, over `[budget]` key by key.
    pub budget: Option<Budget>,
}

/// A token bucket: `burst` calls at once, refilled at `per_second`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Calls allowed at once.
    pub burst: u32,
    /// Calls regained per second.
    pub per_second: f64,
}

impl Config {
    /// Reads a config file; relative paths in it are taken relative to the file.
    pub fn load(path: &Path) -> Result<Self, RuntimeError> {
        let text = std::fs::read_to_string(path).map_err(|source| RuntimeError::ConfigRead {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config: Config =
            toml::from_str(&text).map_err(|source| RuntimeError::ConfigSyntax {
                path: path.to_path_buf(),
                source: Box::new(source),
            })?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.root = config.root.map(|p| base.join(p));
        config.tools_dir = config.tools_dir.map(|p| base.join(p));
        config.audit.key_file = config.audit.key_file.map(|p| base.join(p));
        config.audit.checkpoint_file = config.audit.checkpoint_file.map(|p| base.join(p));
        for path in config.output_types.values_mut() {
            *path = base.join(&*path);
        }
        if let Some(limit) = &config.rate_limit
            && let Err(e) = RateLimit::new(limit.burst, limit.per_second)
        {
            return Err(RuntimeError::Config(format!("[rate_limit] {e}")).in_file(path));
        }
        config.principal_entries().map_err(|e| e.in_file(path))?;
        config.server_entries().map_err(|e| e.in_file(path))?;
        config.cluster.redis().map_err(|e| e.in_file(path))?;
        config.check_budgets().map_err(|e| e.in_file(path))?;
        Ok(config)
    }

    /// The run budget of `principal`: its own `[principals.NAME.budget]` over `[budget]`, key
    /// by key (no key set: no limit but the default `max_attempts_per_tool`).
    pub fn budget_for(&self, principal: &str) -> Budget {
        let defaults = self.budget.unwrap_or_default();
        match self
            .principals
            .get(principal)
            .and_then(|p| p.budget.as_ref())
        {
            Some(own) => defaults.overlaid(own),
            None => defaults,
        }
    }

    /// Whether a budget is configured for `principal` (`[budget]` or its own): an MCP session of
    /// it then runs as a run of its own.
    pub fn has_budget(&self, principal: &str) -> bool {
        self.budget.is_some()
            || self
                .principals
                .get(principal)
                .is_some_and(|p| p.budget.is_some())
    }

    fn check_budgets(&self) -> Result<(), RuntimeError> {
        if let Some(budget) = &self.budget {
            budget
                .check()
                .map_err(|e| RuntimeError::Config(format!("[budget] {e}")))?;
        }
        for (id, p) in &self.principals {
            if let Some(budget) = &p.budget {
                budget
                    .check()
                    .map_err(|e| RuntimeError::Config(format!("[principals.{id}.budget] {e}")))?;
            }
        }
        Ok(())
    }

    /// Every configured principal with its plan and quota (the token hashes are the server's
    /// business: it reads `token_sha256` itself).
    pub fn principal_entries(&self) -> Result<Vec<PrincipalEntry>, RuntimeError> {
        let default_plan = self.plan()?;
        let mut entries = Vec::with_capacity(self.principals.len());
        for (id, p) in &self.principals {
            let principal = self.principal(Some(id))?;
            let plan = self.plan_of(id, p, &default_plan)?;
            let rate = match p.rate_limit.as_ref() {
                None => None,
                Some(r) => match RateLimit::new(r.burst, r.per_second) {
                    Ok(rate) => Some(rate),
                    Err(e) => bail!("[principals.{id}.rate_limit] {e}"),
                },
            };
            if p.max_concurrent_calls == Some(0) {
                bail!("[principals.{id}] max_concurrent_calls must be at least 1");
            }
            entries.push(PrincipalEntry {
                principal,
                plan,
                quota: Quota {
                    rate,
                    max_concurrent: p.max_concurrent_calls,
                },
            });
        }
        Ok(entries)
    }

    /// A configured principal's plan: its own `plan`, or the file's.
    fn plan_of(
        &self,
        id: &str,
        p: &PrincipalConfig,
        default_plan: &Tier,
    ) -> Result<Tier, RuntimeError> {
        match &p.plan {
            None => Ok(default_plan.clone()),
            Some(name) => Tier::named(name).ok_or_else(|| {
                RuntimeError::Config(format!(
                    "[principals.{id}] unknown plan {name:?}; use one of {}",
                    Tier::NAMES.join(", ")
                ))
            }),
        }
    }

    /// The principal named `id`: `local` (every permission) unless the config defines it; the
    /// built-ins outside its plan are hidden from it.
    pub fn principal(&self, id: Option<&str>) -> Result<Principal, RuntimeError> {
        let default_plan = self.plan()?;
        let Some(id) = id else {
            return Ok(default_plan.restrict(Principal::local()));
        };
        let pid = match PrincipalId::parse(id) {
            Ok(pid) => pid,
            Err(e) => bail!("{e}"),
        };
        match self.principals.get(id) {
            Some(p) => {
                let mut principal = Principal::new(pid);
                principal.grants = p.grants.clone();
                if let Some(tools) = &p.tools {
                    principal = principal.only_tools(tools.iter().cloned());
                }
                Ok(self.plan_of(id, p, &default_plan)?.restrict(principal))
            }
            None if id == "local" => Ok(default_plan.restrict(Principal::local())),
            None => Err(RuntimeError::NotFound(format!(
                "Unknown principal: {id} (define it under [principals.{id}] in the config file, with its grants)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_come_from_budget_and_a_principal_s_own_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolgate.toml");
        std::fs::write(
            &path,
            "[budget]\nmax_tool_calls = 10\ntimeout_ms = 60000\n\n[principals.agent]\ngrants = []\n\n[principals.agent.budget]\nmax_tool_calls = 3\nmax_attempts_per_tool = 2\n",
        )
        .unwrap();
        let config = Config::load(&path).unwrap();
        let agent = config.budget_for("agent");
        assert_eq!(agent.max_tool_calls, Some(3));
        assert_eq!(agent.timeout_ms, Some(60_000));
        assert_eq!(agent.attempts_per_tool(), 2);
        assert_eq!(config.budget_for("local").max_tool_calls, Some(10));
        assert!(config.has_budget("local"));
        // A zero and an unknown key are refused when the file is loaded, naming the table.
        std::fs::write(&path, "[budget]\nmax_tool_calls = 0\n").unwrap();
        let chain = toolgate_core::error_chain(&Config::load(&path).unwrap_err());
        assert!(
            chain.contains("[budget] budget max_tool_calls must be at least 1"),
            "{chain}"
        );
        std::fs::write(&path, "[budget]\nmax_calls = 3\n").unwrap();
        assert!(Config::load(&path).is_err());
        let none = toml::from_str::<Config>("").unwrap();
        assert!(!none.has_budget("local"));
        assert_eq!(none.budget_for("local").attempts_per_tool(), 3);
    }

    fn approvals(text: &str) -> ApprovalsConfig {
        toml::from_str::<Config>(text).unwrap().approvals
    }

    fn audit(text: &str) -> AuditConfig {
        toml::from_str::<Config>(text).unwrap().audit
    }

    #[test]
    fn the_audit_key_comes_from_the_config_the_environment_or_a_file_next_to_the_database() {
        let sqlite = DbUrl::Sqlite(PathBuf::from("/data/toolgate.db"));
        let pg = DbUrl::parse("postgres://u@h/db").unwrap();
        let none = |_: &str| None;
        // SQLite: files next to the database by default.
        let a = audit("").anchor(&sqlite, none).unwrap();
        assert!(
            matches!(&a.key, Some(AuditKey::File(p)) if p == Path::new("/data/toolgate.db.audit-key"))
        );
        assert_eq!(
            a.checkpoint_file.as_deref(),
            Some(Path::new("/data/toolgate.db.audit-checkpoint"))
        );
        // TOOLGATE_AUDIT_KEY, when the config names no key.
        let env = |name: &str| (name == AUDIT_KEY_ENV).then(|| "from-env-0123456789".to_owned());
        let a = audit("").anchor(&sqlite, env).unwrap();
        assert!(matches!(&a.key, Some(AuditKey::Secret(s)) if s == b"from-env-0123456789"));
        // key_env names the variable; unset is an error naming it.
        let c = audit("[audit]\nkey_env = \"TG_AUDIT\"\n");
        let err = c.anchor(&sqlite, none).unwrap_err().to_string();
        assert!(
            err.contains("TG_AUDIT") && err.contains("unset or empty"),
            "{err}"
        );
        let a = c
            .anchor(&sqlite, |n: &str| (n == "TG_AUDIT").then(|| "k".repeat(20)))
            .unwrap();
        assert!(matches!(a.key, Some(AuditKey::Secret(_))));
        // PostgreSQL: no default; a key file gives the checkpoint file beside it.
        let err = audit("").anchor(&pg, none).unwrap_err().to_string();
        assert!(
            err.contains("key_file") && err.contains(AUDIT_KEY_ENV),
            "{err}"
        );
        let err = audit("").anchor(&pg, env).unwrap_err().to_string();
        assert!(err.contains("checkpoint_file"), "{err}");
        let a = audit("[audit]\nkey_file = \"/etc/tg/key\"\n")
            .anchor(&pg, none)
            .unwrap();
        assert_eq!(
            a.checkpoint_file.as_deref(),
            Some(Path::new("/etc/tg/key.checkpoint"))
        );
        let both = audit("[audit]\nkey_file = \"k\"\nkey_env = \"K\"\n");
        assert!(both.anchor(&sqlite, none).is_err());
        assert!(toml::from_str::<Config>("[audit]\nkey = \"inline\"\n").is_err());
    }

    #[test]
    fn the_webhook_secret_comes_from_the_named_variable() {
        let c = approvals(
            "[approvals]\nwebhook_url = \"https://hooks.example.com/tg\"\nwebhook_secret_env = \"TG_HOOK_SECRET\"\nwebhook_max_attempts = 3\n",
        );
        let vars = |v: Option<&'static str>| {
            move |name: &str| v.filter(|_| name == "TG_HOOK_SECRET").map(str::to_owned)
        };
        let w = c.webhook_with_vars(vars(Some("s3cret"))).unwrap().unwrap();
        assert_eq!((w.secret.as_str(), w.max_attempts), ("s3cret", 3));
        for unset in [None, Some("")] {
            let err = c.webhook_with_vars(vars(unset)).unwrap_err().to_string();
            assert!(
                err.contains("TG_HOOK_SECRET") && err.contains("unset or empty"),
                "{err}"
            );
        }
        assert!(approvals("").webhook_with_vars(|_| None).unwrap().is_none());
        let no_env = approvals("[approvals]\nwebhook_url = \"https://h.example/x\"\n");
        let err = no_env.webhook_with_vars(|_| None).unwrap_err().to_string();
        assert!(err.contains("webhook_secret_env"), "{err}");
        let bad =
            approvals("[approvals]\nwebhook_url = \"h.example/x\"\nwebhook_secret_env = \"S\"\n");
        assert!(bad.webhook_with_vars(|_| Some("x".into())).is_err());
        assert!(toml::from_str::<Config>("[approvals]\nwebhook_secret = \"inline\"\n").is_err());
    }

    #[test]
    fn servers_are_read_and_every_problem_is_named_by_its_key() {
        let c: Config = toml::from_str(
            r#"
[servers.files]
command = "/usr/bin/npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
isolation = "strict"
[servers.files.sandbox]
read_paths = ["/srv/data"]

[servers.tickets]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${env:TICKETS_TOKEN}" }
"#,
        )
        .unwrap();
        let entries = c.server_entries().unwrap();
        let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["files", "tickets"]);
        assert!(entries[0].1.is_stdio());
        assert!(Config::default().server_entries().unwrap().is_empty());

        let bad: Config = toml::from_str(
            "[servers.My-Files]\ncommand = \"/usr/bin/npx\"\n[servers.remote]\ncommand = \"npx\"\nurl = \"https://x.example/mcp\"\n",
        )
        .unwrap();
        let err = bad.server_entries().unwrap_err().to_string();
        assert!(err.contains("servers.\"My-Files\": Server name"), "{err}");
        assert!(
            err.contains("servers.remote: Server remote sets both"),
            "{err}"
        );
        assert!(
            err.contains("servers.remote.command: Command \"npx\""),
            "{err}"
        );
        let misspelt = toml::from_str::<Config>("[servers.x]\ncomand = \"/usr/bin/npx\"\n")
            .unwrap_err()
            .to_string();
        assert!(misspelt.contains("comand"), "{misspelt}");
    }

    #[test]
    fn the_cluster_redis_url_is_checked_and_its_password_never_shown() {
        let cluster = |text: &str| toml::from_str::<Config>(text).unwrap().cluster;
        assert!(cluster("").redis().unwrap().is_none());
        let (url, prefix) = cluster("[cluster]\nredis_url = \"redis://:pw-123@10.0.0.5:6379/1\"\n")
            .redis()
            .unwrap()
            .unwrap();
        assert_eq!(url.to_string(), "redis://:***@10.0.0.5:6379/1");
        assert_eq!(prefix.as_str(), "toolgate:");
        let (_, prefix) = cluster("[cluster]\nredis_url = \"rediss://h\"\nkey_prefix = \"tg1:\"\n")
            .redis()
            .unwrap()
            .unwrap();
        assert_eq!(prefix.as_str(), "tg1:");
        let err = cluster("[cluster]\nredis_url = \"http://:pw-123@10.0.0.5:6379\"\n")
            .redis()
            .unwrap_err()
            .to_string();
        assert!(!err.contains("pw-123"), "{err}");
        assert!(
            err.contains("only redis:// and rediss://") && err.contains("write redis://HOST:PORT"),
            "{err}"
        );
        let err = cluster("[cluster]\nkey_prefix = \"x:\"\n")
            .redis()
            .unwrap_err();
        assert!(err.to_string().contains("needs redis_url"), "{err}");
        assert!(toml::from_str::<Config>("[cluster]\nredis = \"redis://h\"\n").is_err());
        // Loading a file checks it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolgate.toml");
        std::fs::write(&path, "[cluster]\nredis_url = \"valkey://h:6379\"\n").unwrap();
        let chain = toolgate_core::error_chain(&Config::load(&path).unwrap_err());
        assert!(
            chain.contains("redis_url") && chain.contains("valkey://"),
            "{chain}"
        );
    }

    #[test]
    fn loading_a_file_checks_its_servers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolgate.toml");
        std::fs::write(&path, "[servers.files]\ncommand = \"/bin/sh\"\n").unwrap();
        let err = Config::load(&path).unwrap_err();
        let chain = toolgate_core::error_chain(&err);
        assert!(
            chain.contains("servers.files.command") && chain.contains("shell"),
            "{chain}"
        );
    }
}

//! The server harness (feature `server`): a gateway over the production runtime
//! (`toolgate_runtime::Runtime`, assembled as `toolgate serve` assembles it: the `http` and
//! `command` run kinds, the built-ins rooted in a temporary directory, the policy client under a
//! network policy, the sandbox executor, the one production pipeline) on a fresh SQLite store —
//! or a fresh PostgreSQL schema on the tests' server ([`crate::pg`]): skipped with a note when
//! unreachable, a failure with `CI=true`. Requests go through the real router, and every
//! response is checked against the OpenAPI document.
//!
//! The sandbox executor re-executes a launcher binary whose `main` calls
//! `toolgate_sandbox::hidden_main` first; a test binary cannot be one (libtest would read the
//! hidden argument as a test filter), so the caller passes one: toolgate-server's tests pass its
//! fixture binary, `env!("CARGO_BIN_EXE_toolgate-server-fixture")`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use toolgate_core::{
    ParamType, Parameter, Permission, Principal, PrincipalId, Quota, Tool, ToolBuilder, ToolError,
};
use toolgate_net::NetPolicy;
use toolgate_runtime::{Config, ConfigSource, Principals, Runtime, RuntimeOptions};
use toolgate_server::{Gateway, GatewayOptions, PrincipalEntry, ServerOptions, token_hash};
use toolgate_store::{DbUrl, Store, StoreOptions, Tier};
use tower::ServiceExt;

/// A gateway over the production runtime, its router, its temporary file root and database.
pub struct Harness {
    /// The gateway under test, over the production runtime.
    pub gw: Arc<Gateway>,
    /// Its router (REST, MCP, the UI).
    pub router: axum::Router,
    /// The file tools' root (and the SQLite database's folder), removed on drop.
    pub dir: tempfile::TempDir,
    /// `/openapi.json`, for [`Harness::conforms`].
    pub doc: Value,
    /// Where the gateway's store is, to open a second handle (another process) on it.
    pub db: (DbUrl, StoreOptions),
    /// The sandbox launcher the runtime was opened with.
    pub launcher: PathBuf,
}

/// A buffered response.
pub struct Reply {
    /// The HTTP status code.
    pub status: StatusCode,
    /// The response headers.
    pub headers: axum::http::HeaderMap,
    /// Its body as text.
    pub text: String,
    /// Its body as JSON (`null` when it is not JSON).
    pub json: Value,
}

/// `result`'s value, or a panic naming `what` failed and why (the harness runs inside tests,
/// where a panic is the failure report).
fn must<T, E: std::fmt::Debug>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("The server harness could not set up {what}: {e:?}"))
}

/// A tool that waits `seconds` (cancellable) and returns them.
pub fn slow_tool() -> Arc<dyn Tool> {
    Arc::new(
        ToolBuilder::new(
            "slow_wait",
            "Waits the given seconds, then answers; for tests.",
        )
        .param(Parameter::new("seconds", ParamType::Number).required())
        .handler(|args, ctx| async move {
            let s = args["seconds"].as_f64().unwrap_or(0.0);
            tokio::select! {
                () = ctx.cancellation().cancelled() => Err(ToolError::cancelled()),
                () = tokio::time::sleep(Duration::from_secs_f64(s)) => Ok(json!({ "waited": s })),
            }
        }),
    )
}

/// A tool returning `bytes` bytes of text (for stored outputs).
pub fn big_tool() -> Arc<dyn Tool> {
    Arc::new(
        ToolBuilder::new(
            "big_text",
            "Returns a long text; for tests of stored outputs.",
        )
        .param(Parameter::new("bytes", ParamType::Integer).required())
        .handler(|args, _| async move {
            let n = args["bytes"].as_u64().unwrap_or(0) as usize;
            Ok(json!({ "text": "x".repeat(n) }))
        }),
    )
}

/// A principal `id` with `grants`, only `tools` if given, bearer `token`, the enterprise plan
/// and `quota`.
pub fn principal(
    id: &str,
    grants: &[&str],
    tools: Option<&[&str]>,
    token: &str,
    quota: Quota,
) -> PrincipalEntry {
    let mut p = Principal::new(must(PrincipalId::parse(id), "a principal id"));
    for g in grants {
        p = p.grant(must(Permission::parse(g), "a permission"));
    }
    if let Some(tools) = tools {
        p = p.only_tools(tools.iter().map(|t| (*t).to_owned()));
    }
    PrincipalEntry {
        principal: p,
        token_sha256: Some(token_hash(token)),
        plan: Tier::enterprise(),
        quota,
    }
}

/// Opens the production runtime on `db` (its file tools rooted in `root`, its sandbox launched
/// through `launcher`), with the principals, rate limit, approval time-to-live and webhook of
/// `options` where a config file would give them, and the test tools registered beside the
/// built-ins; then a gateway serving it.
async fn gateway(
    launcher: &Path,
    options: GatewayOptions,
    base: Config,
    root: &Path,
    db: &(DbUrl, StoreOptions),
) -> Arc<Gateway> {
    let GatewayOptions {
        plan,
        principals,
        rate_limit,
        allowed_hosts,
        allowed_origins,
        max_body_bytes,
        grace,
        approval_ttl,
        webhook,
        sessions,
    } = options;
    let mut config = Config {
        plan: Some(plan.name.clone()),
        ..base
    };
    if matches!(db.0, DbUrl::Postgres(_)) {
        // An audit log in PostgreSQL needs its checkpoint key outside the database.
        config.audit.key_file = Some(root.join("audit-key"));
    }
    let parts = Runtime::prepare(RuntimeOptions {
        config: ConfigSource::Value(Box::new(config)),
        db: Some(db.0.clone()),
        store: db.1.clone(),
        root: Some(root.to_path_buf()),
        launcher: Some(launcher.to_path_buf()),
        approval_hint: Some(toolgate_server::approval_hint()),
        ..RuntimeOptions::default()
    })
    .await;
    let mut parts = must(parts, "the production runtime");
    let mut tokens = Vec::new();
    let mut entries = Vec::new();
    for entry in principals {
        if let Some(hash) = entry.token_sha256 {
            tokens.push((entry.principal.id.as_str().to_owned(), hash));
        }
        entries.push(toolgate_runtime::PrincipalEntry {
            principal: entry.principal,
            plan: entry.plan,
            quota: entry.quota,
        });
    }
    parts.principals = must(Principals::new(entries, plan), "the principals");
    parts.rate_limit = rate_limit;
    parts.approval_ttl = approval_ttl;
    parts.webhook = webhook;
    let registered = parts
        .registry
        .register_all(vec![slow_tool(), big_tool()], false);
    must(registered, "the test tools");
    let runtime = Runtime::assemble(parts);
    let gateway = Gateway::new(
        runtime,
        ServerOptions {
            tokens,
            allowed_hosts,
            allowed_origins,
            max_body_bytes,
            grace,
            sessions,
        },
    );
    must(gateway, "the gateway")
}

impl Harness {
    /// A gateway with `principals` (none: the local principal) and every other default.
    pub async fn new(launcher: &Path, principals: Vec<PrincipalEntry>) -> Self {
        Self::with_options(
            launcher,
            GatewayOptions {
                principals,
                ..GatewayOptions::default()
            },
        )
        .await
    }

    /// A gateway set up by `options`, under the default network policy.
    pub async fn with_options(launcher: &Path, options: GatewayOptions) -> Self {
        Self::with_network(launcher, options, NetPolicy::default()).await
    }

    /// Like [`Harness::with_options`], under the network policy `network` (`[network]` of the
    /// config file).
    pub async fn with_network(
        launcher: &Path,
        options: GatewayOptions,
        network: NetPolicy,
    ) -> Self {
        let config = Config {
            network,
            ..Config::default()
        };
        Self::with_config(launcher, options, config).await
    }

    /// Like [`Harness::with_options`], with the parts of a config file that `options` does not
    /// carry taken from `config` (`[network]`, `[servers]`, …; its plan is `options`' plan).
    pub async fn with_config(launcher: &Path, options: GatewayOptions, config: Config) -> Self {
        let dir = must(tempfile::tempdir(), "a temporary directory");
        let db = (
            DbUrl::Sqlite(dir.path().join("t.db")),
            StoreOptions::default(),
        );
        Self::on(launcher, options, config, dir, db).await
    }

    /// A gateway on a fresh PostgreSQL schema, or `None` (with a note) when PostgreSQL is
    /// unreachable — which fails the test instead with `CI=true`. Drop the schema afterwards
    /// with [`Harness::cleanup`].
    pub async fn on_postgres(launcher: &Path, options: GatewayOptions) -> Option<Self> {
        let url = crate::pg::available("the PostgreSQL variant of this test").await?;
        let db = (
            must(DbUrl::parse(&url), "the PostgreSQL URL"),
            StoreOptions {
                pg_schema: Some(crate::pg::unique_schema("tgs")),
                ..StoreOptions::default()
            },
        );
        Some(
            Self::on(
                launcher,
                options,
                Config::default(),
                must(tempfile::tempdir(), "a temporary directory"),
                db,
            )
            .await,
        )
    }

    async fn on(
        launcher: &Path,
        options: GatewayOptions,
        config: Config,
        dir: tempfile::TempDir,
        db: (DbUrl, StoreOptions),
    ) -> Self {
        toolgate_server::install_prometheus();
        let gw = gateway(launcher, options, config, dir.path(), &db).await;
        let router = gw.router();
        Self {
            gw,
            router,
            dir,
            doc: toolgate_server::openapi_document(),
            db,
            launcher: launcher.to_path_buf(),
        }
    }

    /// Another gateway on this one's database and file root, over a production runtime of its
    /// own (another instance, or this one restarted).
    pub async fn another_gateway(&self, options: GatewayOptions) -> Arc<Gateway> {
        gateway(
            &self.launcher,
            options,
            Config::default(),
            self.dir.path(),
            &self.db,
        )
        .await
    }

    /// A second, independent store on the gateway's database (the CLI, another instance).
    pub async fn second_store(&self) -> Store {
        must(Store::open(&self.db.0, &self.db.1).await, "a second store")
    }

    /// Closes the store and drops a PostgreSQL schema (best effort).
    pub async fn cleanup(self) {
        self.gw.store().close().await;
        if let (DbUrl::Postgres(url), Some(schema)) = (&self.db.0, &self.db.1.pg_schema) {
            crate::pg::drop_schema(url, schema).await;
        }
    }

    /// Sends a request through the router (Host: localhost) and returns the buffered reply.
    pub async fn send(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        self.send_with(method, uri, token, body, &[]).await
    }

    /// Like [`Harness::send`], with extra request headers.
    pub async fn send_with(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "localhost:7878");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(b.to_string())),
            None => req.body(Body::empty()),
        };
        let req = must(req, "the request");
        let response = must(self.router.clone().oneshot(req).await, "the router");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = must(response.into_body().collect().await, "the response body").to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            text,
            json,
        }
    }

    /// Like [`Harness::send`], then checks the reply against the OpenAPI document: the status
    /// must be documented for the route and a JSON body must match its schema.
    pub async fn api(
        &self,
        method: Method,
        route: &str,
        uri: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let reply = self.send(method.clone(), uri, token, body).await;
        self.conforms(&method, route, &reply);
        reply
    }

    /// Checks `reply` against the OpenAPI document: its status must be documented for
    /// `method` `route` and a JSON body must match its schema.
    pub fn conforms(&self, method: &Method, route: &str, reply: &Reply) {
        let m = method.as_str().to_lowercase();
        let op = &self.doc["paths"][route][&m];
        assert!(op.is_object(), "{m} {route} is not in /openapi.json");
        let status = reply.status.as_u16().to_string();
        let response = &op["responses"][&status];
        assert!(
            response.is_object(),
            "{m} {route} answered {status}, which /openapi.json does not list: {}",
            reply.text
        );
        if let Some(schema) = response["content"]["application/json"]["schema"].as_object() {
            let mut schema = Value::Object(schema.clone());
            schema["components"] = self.doc["components"].clone();
            let validator = must(jsonschema::validator_for(&schema), "the response schema");
            let errors: Vec<String> = validator
                .iter_errors(&reply.json)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(
                errors.is_empty(),
                "{m} {route} {status}: the body does not match /openapi.json: {errors:?}\n{}",
                reply.text
            );
        }
    }
}

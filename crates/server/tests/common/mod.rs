//! Test harness: a gateway on a fresh SQLite store (or, for the tests that need one, a fresh
//! PostgreSQL schema at `postgres://postgres@127.0.0.1:5432/test`: skipped with a note when
//! unreachable, a failure with `CI=true`), requests through the real router, and checks of
//! every response against the OpenAPI document.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use toolgate_core::{
    ParamType, Parameter, Permission, Principal, PrincipalId, Quota, Registry, Tool, ToolBuilder,
    ToolError,
};
use toolgate_server::{Gateway, GatewayOptions, PrincipalEntry, token_hash};
use toolgate_store::{DbUrl, Plan, Store, StoreOptions};
use tower::ServiceExt;

pub struct Harness {
    pub gw: Arc<Gateway>,
    pub router: axum::Router,
    pub _dir: tempfile::TempDir,
    pub doc: Value,
    /// Where the gateway's store is, to open a second handle (another process) on it.
    pub db: (DbUrl, StoreOptions),
}

/// The PostgreSQL server the PostgreSQL variants use.
pub const PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

pub struct Reply {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub text: String,
    pub json: Value,
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

pub fn principal(
    id: &str,
    grants: &[&str],
    tools: Option<&[&str]>,
    token: &str,
    quota: Quota,
) -> PrincipalEntry {
    let mut p = Principal::new(PrincipalId::parse(id).unwrap());
    for g in grants {
        p = p.grant(Permission::parse(g).unwrap());
    }
    if let Some(tools) = tools {
        p = p.only_tools(tools.iter().map(|t| (*t).to_owned()));
    }
    PrincipalEntry {
        principal: p,
        token_sha256: Some(token_hash(token)),
        plan: Plan::named("enterprise").unwrap(),
        quota,
    }
}

impl Harness {
    pub async fn new(principals: Vec<PrincipalEntry>) -> Self {
        Self::with_options(GatewayOptions {
            principals,
            ..GatewayOptions::default()
        })
        .await
    }

    pub async fn with_options(options: GatewayOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = (
            DbUrl::Sqlite(dir.path().join("t.db")),
            StoreOptions::default(),
        );
        Self::on(options, dir, db).await
    }

    /// A gateway on a fresh PostgreSQL schema, or `None` (with a note) when PostgreSQL is
    /// unreachable — which fails the test instead with `CI=true`. Drop the schema afterwards
    /// with [`Harness::cleanup`].
    pub async fn on_postgres(options: GatewayOptions) -> Option<Self> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let schema = format!(
            "tgs_{}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        let db = (
            DbUrl::parse(PG_URL).unwrap(),
            StoreOptions {
                pg_schema: Some(schema),
            },
        );
        match Store::open(&db.0, &db.1).await {
            Ok(probe) => probe.close().await,
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "PostgreSQL at {PG_URL} is required in CI (CI=true) but unreachable: {e}"
                );
                eprintln!("note: skipping the PostgreSQL variant of this test: {e}");
                return None;
            }
        }
        Some(Self::on(options, tempfile::tempdir().unwrap(), db).await)
    }

    async fn on(
        options: GatewayOptions,
        dir: tempfile::TempDir,
        db: (DbUrl, StoreOptions),
    ) -> Self {
        toolgate_server::install_prometheus();
        let store = Store::open(&db.0, &db.1).await.unwrap();
        let registry = Arc::new(Registry::new());
        registry
            .register_all(toolgate_builtins::builtin_tools(dir.path()).unwrap(), true)
            .unwrap();
        registry
            .register_all(vec![slow_tool(), big_tool()], false)
            .unwrap();
        let gw = Gateway::from_parts(registry, store, options).unwrap();
        let router = gw.router();
        Self {
            gw,
            router,
            _dir: dir,
            doc: toolgate_server::openapi_document(),
            db,
        }
    }

    /// A second, independent store on the gateway's database (the CLI, another instance).
    pub async fn second_store(&self) -> Store {
        Store::open(&self.db.0, &self.db.1).await.unwrap()
    }

    /// Closes the store and drops a PostgreSQL schema (best effort).
    pub async fn cleanup(self) {
        self.gw.store().close().await;
        if let (DbUrl::Postgres(url), Some(schema)) = (&self.db.0, &self.db.1.pg_schema) {
            use sqlx::Connection;
            if let Ok(mut conn) = sqlx::PgConnection::connect(url).await {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                )))
                .execute(&mut conn)
                .await;
                let _ = conn.close().await;
            }
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
                .body(Body::from(b.to_string()))
                .unwrap(),
            None => req.body(Body::empty()).unwrap(),
        };
        let response = self.router.clone().oneshot(req).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
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
            let validator = jsonschema::validator_for(&schema).unwrap();
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

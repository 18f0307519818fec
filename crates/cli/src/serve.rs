//! `toolgate serve` (MCP over Streamable HTTP or stdio, the REST API and the web UI) and
//! `toolgate token`.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use toolgate_runtime::Runtime;
use toolgate_server::{Gateway, ServerOptions, check_binding};

use crate::app::App;
use crate::cli::{GlobalArgs, ServeArgs};

/// `toolgate serve`: opens the runtime (announcing new approvals to the configured webhook and
/// telling callers how to decide them over REST) and hands it to the gateway.
pub async fn run(global: &GlobalArgs, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    // Installed before the registry is built, so its gauges are recorded from the start.
    toolgate_server::install_prometheus();
    let mut options = crate::app::runtime_options(global, &[])?;
    options.approval_hint = Some(toolgate_server::approval_hint());
    options.announce_approvals = true;
    let app = App::open(options).await?;
    let runtime = Arc::clone(&app.runtime);
    let mut server =
        ServerOptions::from_config(runtime.config()).with_context(|| match &global.config {
            Some(path) => format!("Invalid config file {}", path.display()),
            None => "Invalid server settings".to_owned(),
        })?;
    server.grace = Duration::from_secs(args.grace);
    let gateway = Gateway::new(Arc::clone(&runtime), server)?;
    // Approved calls that never started run now (once); calls cut off mid-run by a crash are
    // marked indeterminate and never re-run.
    let recovered = runtime.recover_approvals().await?;
    if !recovered.indeterminate.is_empty() {
        eprintln!(
            "warning: {} approved call(s) were interrupted before their result was recorded and are marked indeterminate; see `toolgate approvals list --status indeterminate`",
            recovered.indeterminate.len()
        );
    }
    let shutdown = CancellationToken::new();
    watch_signals(shutdown.clone(), Arc::clone(&gateway), args.grace);
    let tools = runtime.registry().snapshot().len();
    let data = data_line(&runtime);
    let files = toolgate_runtime::describe_root(runtime.file_root());
    if args.stdio {
        eprintln!(
            "toolgate {} serving {tools} tools over MCP on stdio · {files} · data {data}",
            env!("CARGO_PKG_VERSION")
        );
        warn_disabled_root(&runtime);
        warn_unreachable_redis(&runtime).await;
        release_startup_code();
        gateway.serve_stdio(shutdown).await?;
        crate::app::close_opened().await;
        return Ok(ExitCode::SUCCESS);
    }
    let addr: SocketAddr = args.http.parse().with_context(|| {
        format!(
            "Invalid --http address {:?}; use IP:PORT such as 127.0.0.1:7878",
            args.http
        )
    })?;
    check_binding(addr, gateway.auth())?;
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("Cannot listen on {addr}; is another server using it? Pick another with --http 127.0.0.1:PORT")
    })?;
    let local = listener
        .local_addr()
        .context("Cannot read the listening address")?;
    let auth = if gateway.auth().requires_token() {
        "bearer tokens required"
    } else {
        "local access, no token"
    };
    eprintln!(
        "toolgate {} serving {tools} tools · MCP http://{local}/mcp · REST http://{local}/v1 · web UI http://{local}/ · {files} · data {data} · {auth} (Ctrl-C to stop)",
        env!("CARGO_PKG_VERSION")
    );
    warn_disabled_root(&runtime);
    warn_unreachable_redis(&runtime).await;
    release_startup_code();
    gateway.serve_http(listener, shutdown).await?;
    crate::app::close_opened().await;
    eprintln!("toolgate stopped");
    Ok(ExitCode::SUCCESS)
}

/// Gives back the resident code pages that only startup touched (issue 24: an idle server
/// otherwise keeps about half of its binary resident); calls fault in only what they run.
/// Failing to is harmless: the pages stay, and the reason is logged at debug level.
fn release_startup_code() {
    match toolgate_sandbox::release_startup_code() {
        Ok(released) => tracing::debug!(
            mappings = released.mappings,
            kib = released.bytes / 1024,
            "released the startup code's resident pages"
        ),
        Err(e) => tracing::debug!(error = %e, "kept the startup code's resident pages"),
    }
}

/// Where the data is, and where the limits are counted when that is Redis (`[cluster]
/// redis_url`, its password hidden).
fn data_line(runtime: &Runtime) -> String {
    let data = runtime.store().url().to_string();
    match runtime.redis() {
        Some(redis) => format!(
            "{data} · limits in Redis {} (keys {}…)",
            redis.url(),
            redis.prefix().as_str()
        ),
        None => data,
    }
}

/// Says on stderr that Redis does not answer, when limits are counted there and it does not:
/// calls of limited principals are refused until it does.
async fn warn_unreachable_redis(runtime: &Runtime) {
    if let Some(redis) = runtime.redis()
        && let Err(e) = redis.ping().await
    {
        eprintln!(
            "warning: {}; calls that are rate limited or capped are refused until Redis answers",
            toolgate_core::ErrorChain(&e)
        );
    }
}

/// Says on stderr why the file tools serve nothing, when they do not.
fn warn_disabled_root(runtime: &Runtime) {
    if let toolgate_builtins::FileRoot::Disabled { reason } = runtime.file_root() {
        eprintln!("warning: {reason}");
    }
}

/// First SIGINT/SIGTERM: graceful shutdown. Second: quit at once.
///
/// The handlers are installed before this returns (and so before the banner is printed): a
/// signal sent as soon as the banner appears is a graceful shutdown, never the default action
/// that would kill the process without draining.
fn watch_signals(shutdown: CancellationToken, gateway: Arc<Gateway>, grace: u64) {
    let Some(mut signals) = Signals::install() else {
        eprintln!("warning: cannot watch SIGINT/SIGTERM; stop toolgate with SIGKILL");
        return;
    };
    tokio::spawn(async move {
        let mut count = 0;
        loop {
            signals.next().await;
            count += 1;
            if count == 1 {
                eprintln!(
                    "toolgate: shutting down; {} call(s) in flight get up to {grace} s to finish (press Ctrl-C again to quit now)",
                    gateway.calls_in_flight()
                );
                shutdown.cancel();
            } else {
                eprintln!("toolgate: quitting now");
                crate::exit::now(crate::exit::INTERRUPTED);
            }
        }
    });
}

/// SIGINT and SIGTERM, watched from the moment [`Signals::install`] returns.
#[cfg(unix)]
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    /// Installs both handlers; `None` if either cannot be installed.
    fn install() -> Option<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Some(Self {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
        })
    }

    /// Waits for the next SIGINT or SIGTERM.
    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Ctrl-C, where there are no Unix signals.
#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    /// Nothing to install ahead of time.
    fn install() -> Option<Self> {
        Some(Self)
    }

    /// Waits for the next Ctrl-C (forever if it cannot be watched).
    async fn next(&mut self) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// `toolgate token`: a new random token and the line to put in the config file.
pub fn token() -> anyhow::Result<ExitCode> {
    let token = format!(
        "tg_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let hash: String = toolgate_server::token_hash(&token)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "token:        {token}")?;
    writeln!(out, "token_sha256: {hash}")?;
    eprintln!(
        "\nGive the token to the client (Authorization: Bearer TOKEN) and put only its hash in the config file:\n\n  [principals.NAME]\n  token_sha256 = \"{hash}\"\n  grants = [\"tool.*\"]\n\nThe token is not stored anywhere; keep it secret."
    );
    Ok(ExitCode::SUCCESS)
}

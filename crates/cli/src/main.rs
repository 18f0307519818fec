//! The `toolgate` binary: parses the command line, runs the command, maps outcomes to exit codes
//! (every one is in [`exit`]: 0 success, 1 error result or invalid definition, 2 usage or
//! configuration error, 3 a call waits for approval, 4 an agent run spent its budget, 130 a second Ctrl-C). An error prints with
//! its whole chain of causes; a closed standard output (`toolgate audit | head -1`) ends the run
//! quietly with 0.

mod agent;
mod app;
mod approvals;
mod audit;
mod call;
mod cli;
mod definitions;
mod exit;
mod init;
mod install;
mod output_types;
mod prompt;
mod runs;
mod serve;
mod servers;
mod servers_render;
mod tools;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use toolgate_core::ErrorChain;
use tracing_subscriber::EnvFilter;

use crate::app::App;
use crate::cli::{Cli, Command, ToolsCommand};

// mimalloc rather than glibc's malloc: serving MCP allocates and frees many small buffers per
// call (JSON, headers, envelopes), and glibc's malloc was ~17% of the server's CPU under load.
// The `system-alloc` feature keeps the system's malloc, so heap profilers that intercept it
// (heaptrack, valgrind's massif and DHAT) see every allocation.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Hidden modes first, before any thread starts: the sandbox launcher, the first process of a
    // sandbox's PID namespace, its network bridge, its user-id mapper, or a worker running one
    // in-process tool inside the sandbox (see toolgate-sandbox).
    if let Some(code) = toolgate_sandbox::hidden_main(toolgate_runtime::worker_tools) {
        // The sandboxed program's own status, passed through.
        return ExitCode::from(u8::try_from(code).unwrap_or(exit::FAILURE));
    }
    // `--help` shows where the default database lives on this machine.
    let default_db = toolgate_runtime::default_db_path();
    let command = Cli::command().mut_arg("db", |arg| {
        arg.help(format!(
            "Database: sqlite:PATH (embedded) or postgres://USER@HOST/DB [default: sqlite:{}]",
            default_db.display()
        ))
    });
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    init_logging();
    // One worker per CPU this process may run on (tokio's default: it respects taskset and
    // cgroup limits, and TOKIO_WORKER_THREADS). Not more: on one CPU a second worker made every
    // figure worse (measured 2026-11-27, 16 MCP sessions, `toolgate serve` pinned to one CPU:
    // 20.1–21.1k req/s, p99 3.7 ms and peak RSS 44–45 MiB with one worker against 18.8–20.7k,
    // 4.2–4.5 ms and 51–52 MiB with two), where it once measured +15% req/s.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit::code(exit::USAGE);
        }
    };
    let outcome = runtime.block_on(async {
        let outcome = run(cli).await;
        app::close_opened().await;
        outcome
    });
    // A confirmation prompt cancelled by Ctrl-C leaves a thread blocked reading the terminal;
    // do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(code) => code,
        // `head` and the like close the pipe once they have read enough: not an error.
        Err(e) if exit::is_broken_pipe(&e) => exit::code(exit::SUCCESS),
        Err(e) => {
            // `{:#}`'s chain of causes, without a cause its error already repeats.
            eprintln!("error: {}", ErrorChain(e.as_ref()));
            exit::code(exit::USAGE)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let g = &cli.global;
    match &cli.command {
        Command::Tools(ToolsCommand::Validate(args)) => tools::validate(g, args).await,
        Command::Tools(ToolsCommand::List(args)) => tools::list(&App::new(g).await?, args),
        Command::Tools(ToolsCommand::Show(args)) => tools::show(&App::new(g).await?, args),
        Command::Tools(ToolsCommand::Export(args)) => tools::export(&App::new(g).await?, args),
        Command::Tools(ToolsCommand::Add(args)) => {
            definitions::add(&App::new(g).await?, args).await
        }
        Command::Tools(ToolsCommand::Update(args)) => {
            definitions::update(&App::new(g).await?, args).await
        }
        Command::Tools(ToolsCommand::Rm(args)) => {
            definitions::remove(&App::new(g).await?, args).await
        }
        Command::Tools(ToolsCommand::History(args)) => {
            definitions::history(&App::new(g).await?, args).await
        }
        Command::Serve(args) => serve::run(g, args).await,
        Command::Token => serve::token(),
        Command::Call(args) => call::run(&App::new(g).await?, args).await,
        Command::Audit(args) => audit::run(&App::new(g).await?, args).await,
        Command::Agent(cli::AgentCommand::Run(args)) => agent::run(&App::new(g).await?, args).await,
        Command::Approvals(cmd) => approvals::run(&App::new(g).await?, cmd).await,
        Command::Runs(cmd) => runs::run(&App::new(g).await?, cmd).await,
        Command::OutputTypes(cmd) => output_types::run(&App::new(g).await?, cmd).await,
        Command::Servers(cmd) => servers::run(&App::new(g).await?, cmd).await,
        Command::Install(args) => install::run(g, args),
        Command::Init(args) => init::run(args),
        Command::Schema(args) => {
            let schema = match args.of {
                cli::SchemaOf::Definition => toolgate_core::definition_schema(),
                cli::SchemaOf::Config => toolgate_runtime::config_schema(),
            };
            let mut text = serde_json::to_string_pretty(&schema)?;
            text.push('\n');
            std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())?;
            Ok(exit::code(exit::SUCCESS))
        }
        Command::Completions(args) => {
            // Generated in memory: clap_complete panics on a failed write, `head` closing the
            // pipe must stay a quiet success like everywhere else.
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut Cli::command(), "toolgate", &mut script);
            std::io::Write::write_all(&mut std::io::stdout().lock(), &script)?;
            Ok(exit::code(exit::SUCCESS))
        }
    }
}

/// Logs go to standard error, never standard output. `TOOLGATE_LOG` (or `RUST_LOG`) sets the filter.
/// Colours only on a terminal (and not under `NO_COLOR`): a log file gets plain text.
fn init_logging() {
    use std::io::IsTerminal;
    let filter = std::env::var("TOOLGATE_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "warn".to_owned());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_target(false)
        .try_init();
}

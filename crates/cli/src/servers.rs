//! `toolgate servers list|show|tools|approve|restart|rm|add|import`: the upstream MCP servers.
//! The use cases are the runtime's (`Runtime::servers()`, shared with the REST API and the web
//! UI); this module prints their views: `--json` as they serialize, the human text from that
//! same JSON (`servers_render`). A refused or unknown server or tool exits 1 with the runtime's
//! message (it names the fix); a usage error exits 2.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;
use serde_json::{Value, json};
use toolgate_runtime::OpError;
use toolgate_runtime::servers::Manager;

use crate::app::App;
use crate::cli::{AddServerArgs, ApproveServerArgs, ImportServersArgs, ServerArgs, ServersCommand};
use crate::exit;
use crate::servers_render as render;

/// Prints a view: its JSON with `--json`, else the text `human` draws from that JSON.
fn print<T: Serialize>(view: &T, json: bool, human: fn(&Value) -> String) -> anyhow::Result<()> {
    // Through a `Value`: a flattened view whose field repeats a summary's (the detail's `tools`
    // list after the summary's `tools` count) keeps one key, the list.
    let value = serde_json::to_value(view)?;
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        write!(out, "{}", human(&value))?;
    }
    Ok(())
}

/// A refused operation: the runtime's message on stderr, exit 1.
fn refused(e: &OpError) -> ExitCode {
    eprintln!("error: {}", toolgate_core::ErrorChain(e));
    exit::code(exit::FAILURE)
}

/// Prints `result`'s view, or reports its error.
fn answer<T: Serialize>(
    result: Result<T, OpError>,
    json: bool,
    human: fn(&Value) -> String,
) -> anyhow::Result<ExitCode> {
    match result {
        Ok(view) => {
            print(&view, json, human)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(refused(&e)),
    }
}

/// Who changes servers from this command line (`cli:$USER`), as pins and the audit record it.
fn actor() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "operator".to_owned());
    format!("cli:{user}")
}

/// `toolgate servers …`.
pub async fn run(app: &App, cmd: &ServersCommand) -> anyhow::Result<ExitCode> {
    let me = crate::definitions::local_principal(app);
    let actor = actor();
    let manager = Manager {
        principal: &me,
        actor: &actor,
    };
    let servers = app.runtime.servers();
    match cmd {
        ServersCommand::List(args) => {
            print(&servers.list(&me), args.json, render::list)?;
            Ok(ExitCode::SUCCESS)
        }
        ServersCommand::Show(ServerArgs { name, json }) => {
            answer(servers.show(&me, name), *json, render::show)
        }
        // Started (if it can be) and listed now: a one-shot command has started nothing yet.
        ServersCommand::Tools(ServerArgs { name, json }) => {
            let tools = servers.tools_now(&me, name).await;
            // A server that could not start lists what is stored; say why on stderr.
            if let Ok(summary) = servers.summary(&me, name)
                && let Some(error) = &summary.state.error
            {
                eprintln!("warning: server {name} is {}: {error}", summary.state.state);
            }
            answer(tools, *json, tools_text)
        }
        ServersCommand::Approve(ApproveServerArgs {
            name,
            tool,
            all: _,
            json,
        }) => answer(
            servers.approve(manager, name, tool.as_deref()).await,
            *json,
            render::approved,
        ),
        ServersCommand::Restart(ServerArgs { name, json }) => answer(
            servers.restart(manager, name).await,
            *json,
            render::restarted,
        ),
        ServersCommand::Rm(ServerArgs { name, json }) => {
            answer(servers.remove(manager, name).await, *json, render::removed)
        }
        ServersCommand::Add(args) => answer(
            servers
                .add(manager, &args.name, add_entry(args), args.approve)
                .await,
            args.json,
            render::added,
        ),
        ServersCommand::Import(args) => {
            let text = std::fs::read_to_string(&args.file)
                .with_context(|| format!("reading {}", args.file.display()))?;
            if args.store {
                answer(
                    servers.import(manager, &text, false).await,
                    args.json,
                    render::imported,
                )
            } else {
                import_as_toml(args, &text)
            }
        }
    }
}

/// The entry `servers add` gives: the command and its arguments (and isolation), or the url.
fn add_entry(args: &AddServerArgs) -> Value {
    let mut entry = serde_json::Map::new();
    if let Some(command) = &args.command {
        entry.insert("command".into(), json!(command));
        if !args.args.is_empty() {
            entry.insert("args".into(), json!(args.args));
        }
    }
    if let Some(url) = &args.url {
        entry.insert("url".into(), json!(url));
    }
    if let Some(isolation) = args.isolation {
        entry.insert(
            "isolation".into(),
            json!(toolgate_core::Isolation::from(isolation)),
        );
    }
    Value::Object(entry)
}

/// `servers tools NAME`'s text from its view (`{server, tools}`).
fn tools_text(view: &Value) -> String {
    let server = view.get("server").and_then(Value::as_str).unwrap_or("");
    let tools = view
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    render::tools(server, tools)
}

/// Whether `path` is a file someone may execute.
fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The `[servers.NAME]` names a config file declares already.
fn declared_servers(config: &str) -> Vec<String> {
    toml::from_str::<toml::Table>(config)
        .ok()
        .and_then(|t| {
            t.get("servers")
                .and_then(|s| s.as_table())
                .map(|s| s.keys().cloned().collect())
        })
        .unwrap_or_default()
}

/// `servers import FILE` (printing TOML) and `--write CONFIG` (appending it).
fn import_as_toml(args: &ImportServersArgs, json: &str) -> anyhow::Result<ExitCode> {
    let path = std::env::var("PATH").unwrap_or_default();
    let resolve = toolgate_gateway::import::path_resolver(path, is_executable);
    let import = match toolgate_gateway::import::from_mcp_servers(json, &resolve) {
        Ok(import) => import,
        Err(e) => {
            eprintln!("error: {}: {e}", args.file.display());
            return Ok(exit::code(exit::FAILURE));
        }
    };
    let mut servers = import.servers;
    for skipped in &import.skipped {
        eprintln!("skipped {}: {}", skipped.name, skipped.reason);
    }
    for note in &import.notes {
        eprintln!("note: {note}");
    }
    let Some(config) = &args.write else {
        write!(
            std::io::stdout().lock(),
            "{}",
            toolgate_gateway::import::to_toml(&servers)?
        )?;
        return Ok(ExitCode::SUCCESS);
    };
    let existing = match std::fs::read_to_string(config) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("reading {}", config.display())));
        }
    };
    let taken = declared_servers(&existing);
    servers.retain(|(name, _)| {
        let clash = taken.iter().any(|t| t == name.as_str());
        if clash {
            eprintln!(
                "skipped {name}: {} declares [servers.{name}] already",
                config.display()
            );
        }
        !clash
    });
    if servers.is_empty() {
        eprintln!("Nothing to write to {}.", config.display());
        return Ok(exit::code(exit::FAILURE));
    }
    let mut text = existing;
    if !text.is_empty() && !text.ends_with("\n\n") {
        text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
    }
    text.push_str(&toolgate_gateway::import::to_toml(&servers)?);
    std::fs::write(config, text).with_context(|| format!("writing {}", config.display()))?;
    let names: Vec<&str> = servers.iter().map(|(n, _)| n.as_str()).collect();
    writeln!(
        std::io::stdout().lock(),
        "Wrote {} to {}: {}. Their tools wait for approval once toolgate starts them (`toolgate --config {} servers list`).",
        if names.len() == 1 {
            "1 server".to_owned()
        } else {
            format!("{} servers", names.len())
        },
        config.display(),
        names.join(", "),
        config.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

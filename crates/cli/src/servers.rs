//! `toolgate servers list|show|tools|approve|restart|rm|add|import`: the upstream MCP servers.
//! The use cases are the runtime's (`Runtime::servers()`, shared with the REST API and the web
//! UI); this module prints their views: `--json` as they serialize, the human text from that
//! same JSON (`servers_render`). A refused or unknown server or tool exits 1 with the runtime's
//! message (it names the fix); a usage error exits 2.

use std::io::Write;
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;
use toolgate_runtime::OpError;
use toolgate_runtime::servers::Manager;

use crate::app::App;
use crate::cli::{ApproveServerArgs, ServerArgs, ServersCommand};
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
        ServersCommand::Tools(ServerArgs { name, json }) => {
            answer(servers.tools(&me, name), *json, tools_text)
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
        ServersCommand::Add(_) | ServersCommand::Import(_) => {
            let _ = (render::added, render::imported);
            eprintln!(
                "error: `toolgate servers add` and `servers import` are not in this build yet; declare the server under [servers.NAME] in the config file meanwhile"
            );
            Ok(exit::code(exit::USAGE))
        }
    }
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

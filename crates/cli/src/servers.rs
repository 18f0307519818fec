//! `toolgate servers list|show|tools|approve|restart|rm|add|import`: the upstream MCP servers.
//! The use cases are the runtime's (`Runtime::servers()`, shared with the REST API and the web
//! UI); this module prints their views: `--json` as they serialize, the human text from that
//! same JSON (`servers_render`).

use std::io::Write;
use std::process::ExitCode;

use serde_json::Value;

use crate::app::App;
use crate::cli::ServersCommand;
use crate::exit;
use crate::servers_render as render;

/// Prints a view: its JSON with `--json`, else the text `human` draws from that JSON.
fn print(view: &Value, json: bool, human: fn(&Value) -> String) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(view)?)?;
    } else {
        write!(out, "{}", human(view))?;
    }
    Ok(())
}

/// `toolgate servers …`.
pub async fn run(app: &App, cmd: &ServersCommand) -> anyhow::Result<ExitCode> {
    let _ = (
        app,
        cmd,
        print as fn(&Value, bool, fn(&Value) -> String) -> anyhow::Result<()>,
    );
    let _ = (
        render::list,
        render::show,
        render::approved,
        render::restarted,
    );
    let _ = (render::removed, render::added, render::imported);
    eprintln!(
        "error: `toolgate servers` needs the gateway runtime, which this build does not have yet"
    );
    Ok(exit::code(exit::USAGE))
}

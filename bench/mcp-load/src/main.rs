//! `toolgate-mcp-load`: a load benchmark for MCP `tools/call` over Streamable HTTP.
//!
//! Two subcommands:
//! - `bare-server` runs a minimal rmcp Streamable HTTP server with one trivial
//!   `echo` tool, the baseline toolgate is compared against;
//! - `load` is the load generator that is pointed at every server in turn
//!   (toolgate, the bare rmcp server, the Python SDK's FastMCP server).
//!
//! `scripts/mcp-load.sh` drives the whole comparison.

mod bare;
mod load;
mod stats;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "toolgate-mcp-load", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a bare rmcp Streamable HTTP server (MCP at /mcp) with one `echo` tool.
    BareServer(bare::Args),
    /// Run the load generator against a Streamable HTTP MCP endpoint.
    Load(load::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::BareServer(args) => bare::run(args),
        Command::Load(args) => load::run(args),
    }
}

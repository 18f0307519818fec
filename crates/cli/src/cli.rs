//! Command-line grammar of the `toolgate` binary (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The text after `--help`'s options: the exit codes (from [`crate::exit::CODES`]) and examples.
fn after_help() -> String {
    format!("{}\n{EXAMPLES}", crate::exit::help_section())
}

const EXAMPLES: &str = "\
Examples:
  toolgate init my-tools                           # a starter config, example tools, schemas
  toolgate serve                                   # http://127.0.0.1:7878/mcp and /v1
  toolgate serve --stdio                           # MCP over stdio, for desktop clients
  toolgate call calculator --args '{\"expression\": \"2 * (3 + 4)\"}'
  toolgate --root ./workspace call read_file --args '{\"path\": \"notes.txt\"}'
  toolgate --tools-dir ./tools tools list --category external_api
  toolgate tools validate tools/*.toml
  toolgate tools export --format openai --strict
  toolgate tools add tools/get_weather.toml && toolgate tools history get_weather
  toolgate audit --limit 5 && toolgate audit verify
  toolgate servers list && toolgate servers approve files --all   # upstream MCP servers
  toolgate completions bash > ~/.local/share/bash-completion/completions/toolgate
  toolgate schema definition > definition.schema.json   # for editors (docs/schemas/)

Logs go to standard error; set TOOLGATE_LOG=debug (or RUST_LOG) for more.";

/// toolgate — the governed tool layer for LLM agents.
///
/// Defines tools once, validates them, keeps them in a registry and runs every call through one
/// pipeline: schemas, permissions, human approval, timeouts, cancellation, retries, output limits.
#[derive(Debug, Parser)]
#[command(name = "toolgate", version, after_help = after_help())]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Database: sqlite:PATH (embedded, the default) or postgres://USER@HOST/DB.
    #[arg(
        long,
        global = true,
        env = "TOOLGATE_DB",
        value_name = "URL",
        hide_env_values = true
    )]
    pub db: Option<String>,

    /// Configuration file (TOML): principals and their grants, root, tools dir, rate limits.
    #[arg(long, global = true, env = "TOOLGATE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Directory the file tools are jailed to [default: the current directory, except `/` or
    /// the home folder: then the file tools are off].
    #[arg(long, global = true, env = "TOOLGATE_ROOT", value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Load every *.toml, *.json, *.yaml definition in DIR (bad files are reported and skipped).
    #[arg(long, global = true, env = "TOOLGATE_TOOLS_DIR", value_name = "DIR")]
    pub tools_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the tools over MCP (Streamable HTTP at /mcp, or --stdio) and the REST API (/v1).
    ///
    /// With no options: the default SQLite store, the built-in tools, file tools jailed to the
    /// current directory, on http://127.0.0.1:7878. Without principals in the config file the
    /// server only listens on loopback and every request is the local principal; with
    /// principals, every request needs `Authorization: Bearer TOKEN` (see `toolgate token`).
    /// SIGINT/SIGTERM stop it gracefully: running calls get --grace seconds to finish, then are
    /// cancelled; every call's audit record is written. A second Ctrl-C quits at once.
    Serve(ServeArgs),

    /// Make a new random bearer token and print it with the SHA-256 the config file stores.
    Token,

    /// List, show, validate and export tool definitions.
    #[command(subcommand)]
    Tools(ToolsCommand),

    /// Call a tool through the full pipeline and print its result (the envelope with --json).
    ///
    /// Tools that require confirmation ask on the terminal. With no terminal (or arguments on
    /// standard input) the call becomes a durable approval: its id is printed and toolgate exits
    /// 3; approve it with `toolgate approvals approve ID` (or REST, or the web UI), or pass
    /// --wait to block until it is decided and print the final result. --yes pre-approves.
    /// Ctrl-C cancels a running call; a second Ctrl-C quits.
    Call(CallArgs),

    /// Durable approvals: calls waiting for a person's yes (list, show, approve, deny).
    #[command(subcommand)]
    Approvals(ApprovalsCommand),

    /// Run an agent: a model (OpenAI-compatible or Anthropic) calling your tools through the
    /// pipeline, inside a run with the principal's budget.
    #[command(subcommand)]
    Agent(AgentCommand),

    /// Runs (agent tasks with a budget): list them with their consumption, show one with its
    /// calls. Start them with `POST /v1/runs`; calls name them with `Toolgate-Run`.
    #[command(subcommand)]
    Runs(RunsCommand),

    /// validate_output's output types kept in the store (add, list, show, rm).
    ///
    /// Output types are named JSON Schemas `validate_output` checks against; besides the store
    /// they come from the config file's `[output_types]` (which wins on a name clash) and the
    /// built-in `domain_map`. A running `toolgate serve` picks up changes when restarted.
    #[command(subcommand, name = "output-types")]
    OutputTypes(OutputTypesCommand),

    /// The audit log: every call, newest first (`audit show`, `audit output`, `audit verify`).
    Audit(AuditArgs),

    /// Upstream MCP servers whose tools toolgate serves (list, show, tools, approve, restart,
    /// rm, add, import).
    ///
    /// Each upstream tool is served as SERVER__TOOL through the whole pipeline. The first time a
    /// server's tools are seen, and whenever a tool's definition changes later, the tool is
    /// withheld until a person approves it (`servers approve`): a changed description or schema
    /// never reaches a model unreviewed. Servers come from [servers.NAME] in the config file or
    /// from the store (`servers add`, `servers import --store`).
    #[command(subcommand, after_help = SERVERS_EXAMPLES)]
    Servers(ServersCommand),

    /// Add toolgate to an MCP client's config file (Claude Desktop, Claude Code, Cursor, VS Code,
    /// Windsurf).
    ///
    /// Writes the entry in that client's own format and file (on Linux and macOS): by default a
    /// stdio entry that starts this binary as `toolgate serve --stdio` with absolute --root,
    /// --db, --config and --tools-dir taken from this command's global options (the root
    /// defaults to the current directory); with --http, the URL of a running `toolgate serve`
    /// and, with --token, its bearer token. The file's other entries are kept, the old file is
    /// copied aside first, and a second run with the same options changes nothing. --print
    /// shows the entry and the file instead of writing.
    #[command(after_help = INSTALL_EXAMPLES)]
    Install(InstallArgs),

    /// Start a project in DIR (default: here): a commented toolgate.toml, example tools, editor
    /// schemas and a .gitignore for the database.
    ///
    /// toolgate.toml lists every section with its defaults; tools/ holds one example of each
    /// kind that needs no internet (a command tool, an http tool asking the local toolgate
    /// server, a declared-only tool); schemas/ the JSON Schemas the files point editors to.
    /// Nothing is overwritten: if any of these files exists, nothing is written. The next
    /// commands to run are printed.
    Init(InitArgs),

    /// Print the JSON Schema of a definition file or of toolgate.toml, for editors and checkers.
    ///
    /// The schemas are generated from the types the parser reads (docs/schemas/ in the
    /// repository holds the same files). Hook them up with `#:schema PATH` on a TOML file's
    /// first line (taplo), `# yaml-language-server: $schema=PATH` in YAML, `"$schema": "PATH"`
    /// in a JSON definition, or VS Code's `json.schemas` setting.
    Schema(SchemaArgs),

    /// Print a shell completion script on stdout.
    ///
    /// bash: `toolgate completions bash > ~/.local/share/bash-completion/completions/toolgate`
    /// zsh: `toolgate completions zsh > "${fpath[1]}/_toolgate"` (a directory on $fpath)
    /// fish: `toolgate completions fish > ~/.config/fish/completions/toolgate.fish`
    /// PowerShell: `toolgate completions powershell >> $PROFILE`
    Completions(CompletionsArgs),
}

const INSTALL_EXAMPLES: &str = "\
Examples:
  toolgate --root ~/notes install claude-desktop --print   # show the entry and the file
  toolgate --root ~/notes install cursor                   # stdio: Cursor starts toolgate
  toolgate install vscode --http http://127.0.0.1:7878/mcp --token \"$TOKEN\"";

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The MCP client whose config file gets the entry.
    #[arg(value_enum)]
    pub client: McpClient,

    /// Show the entry and the file it belongs in; write nothing.
    #[arg(long)]
    pub print: bool,

    /// The entry's name in the client's server list.
    #[arg(long, default_value = "toolgate", value_name = "NAME")]
    pub name: String,

    /// Connect to a running `toolgate serve` at this MCP URL instead of starting toolgate over
    /// stdio (for example http://127.0.0.1:7878/mcp).
    #[arg(long, value_name = "URL")]
    pub http: Option<String>,

    /// Bearer token sent with --http (see `toolgate token`); written into the client's file.
    #[arg(long, value_name = "TOKEN", requires = "http")]
    pub token: Option<String>,

    /// Write this file instead of the client's usual one (a project-level file, say).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

/// The MCP clients `toolgate install` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum McpClient {
    /// Claude Desktop: claude_desktop_config.json (stdio only).
    ClaudeDesktop,
    /// Claude Code: ~/.claude.json (user scope).
    ClaudeCode,
    /// Cursor: ~/.cursor/mcp.json.
    Cursor,
    /// VS Code: the user profile's mcp.json.
    Vscode,
    /// Windsurf: ~/.codeium/windsurf/mcp_config.json.
    Windsurf,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The project folder (created if missing) [default: the current directory].
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which file's schema.
    #[arg(value_enum)]
    pub of: SchemaOf,
}

/// The documents `toolgate schema` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaOf {
    /// A tool definition file (TOML, JSON or YAML).
    Definition,
    /// The configuration file, toolgate.toml.
    Config,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

const SERVERS_EXAMPLES: &str = "\
Examples:
  toolgate servers list                                  # state, tools served, tools waiting
  toolgate servers add files --command /usr/bin/node -- /opt/mcp/filesystem/dist/index.js /srv/data
  toolgate servers add tickets --url https://mcp.example.com/mcp --approve
  toolgate servers tools files                           # status of each; diffs of changed ones
  toolgate servers approve files read_text_file          # serve one reviewed tool
  toolgate servers approve files --all                   # serve every waiting tool
  toolgate servers import ~/.config/Claude/claude_desktop_config.json          # print as TOML
  toolgate servers import claude_desktop_config.json --write toolgate.toml    # append to a config
  toolgate servers restart files && toolgate servers rm tickets";

#[derive(Debug, Subcommand)]
pub enum ServersCommand {
    /// Every server: transport, where it is declared, state, tools served and waiting.
    List(JsonArgs),
    /// One server: its state (with the last error and stderr), its entry (secrets redacted)
    /// and its tools.
    Show(ServerArgs),
    /// A server's tools: upstream name, toolgate name, status (approved, pending,
    /// quarantined, refused) and, for a changed tool, the old and new definition.
    Tools(ServerArgs),
    /// Approve a server's tool (by upstream or toolgate name), or every waiting one with --all:
    /// its current definition is pinned and it is served from now on.
    Approve(ApproveServerArgs),
    /// Stop a server and start it again (its tools are listed anew and checked against their
    /// pins).
    Restart(ServerArgs),
    /// Remove a server added with `servers add` or `servers import --store`: its tools stop
    /// being served, its process stops, its pins are forgotten. Servers of the config file are
    /// removed there.
    Rm(ServerArgs),
    /// Add a server to the store: a program started in the sandbox (--command PROG -- ARGS…)
    /// or a Streamable HTTP endpoint (--url). Its tools wait for approval unless --approve.
    Add(AddServerArgs),
    /// Read the mcpServers JSON of Claude Desktop, Cursor or VS Code and print the equivalent
    /// [servers.NAME] entries as TOML, append them to a config file (--write) or add them to
    /// the store (--store).
    Import(ImportServersArgs),
}

#[derive(Debug, Args)]
pub struct JsonArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The server's name (the SERVER of SERVER__TOOL).
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveServerArgs {
    /// The server's name.
    pub name: String,
    /// The tool to approve: its upstream name or its toolgate name.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub tool: Option<String>,
    /// Approve every tool of the server that waits for approval (after reviewing them with
    /// `servers tools NAME`).
    #[arg(long)]
    pub all: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The sandbox level a stdio server runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IsolationArg {
    /// No sandbox (trusted programs only).
    None,
    /// The default: private filesystem view, no network unless allowed.
    Standard,
    /// Standard plus only the declared read/write paths and hosts.
    Strict,
    /// No filesystem beyond the program, no network, low memory.
    Restricted,
}

impl From<IsolationArg> for toolgate_core::Isolation {
    fn from(arg: IsolationArg) -> Self {
        match arg {
            IsolationArg::None => Self::None,
            IsolationArg::Standard => Self::Standard,
            IsolationArg::Strict => Self::Strict,
            IsolationArg::Restricted => Self::Restricted,
        }
    }
}

#[derive(Debug, Args)]
pub struct AddServerArgs {
    /// The server's name: lowercase letters, digits and _ (the SERVER of SERVER__TOOL).
    pub name: String,
    /// The program to start (an absolute path; no shell). Its arguments follow `--`.
    #[arg(
        long,
        value_name = "PROG",
        required_unless_present = "url",
        conflicts_with = "url"
    )]
    pub command: Option<PathBuf>,
    /// The arguments of --command, after `--`.
    #[arg(
        last = true,
        value_name = "ARGS",
        requires = "command",
        conflicts_with = "url"
    )]
    pub args: Vec<String>,
    /// A Streamable HTTP endpoint (reached through the network policy).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Approve the server's tools as first seen (only for a server you trust as it is now).
    #[arg(long)]
    pub approve: bool,
    /// The sandbox level of a --command server [default: standard].
    #[arg(long, value_enum, requires = "command", conflicts_with = "url")]
    pub isolation: Option<IsolationArg>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ImportServersArgs {
    /// The JSON file with an `mcpServers` object (Claude Desktop, Cursor, VS Code).
    pub file: PathBuf,
    /// Append the entries to this config file (TOML) instead of printing them.
    #[arg(long, value_name = "CONFIG", conflicts_with = "store")]
    pub write: Option<PathBuf>,
    /// Add the servers to the store (their tools then wait for approval).
    #[arg(long)]
    pub store: bool,
    /// Print JSON (with --store: what was added and skipped).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address for HTTP (MCP at /mcp, REST at /v1). Non-loopback addresses need principals.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub http: String,

    /// Serve MCP over standard input/output instead of HTTP (only MCP messages on stdout).
    #[arg(long, conflicts_with = "http")]
    pub stdio: bool,

    /// Seconds running calls may take to finish after a shutdown signal before being cancelled.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub grace: u64,
}

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List registered tools (built-ins and --tools-dir definitions).
    List(ListArgs),
    /// Show one tool's definition, governance fields, limits and input schema.
    Show(ShowArgs),
    /// Validate definition files; every problem is listed with its path. Exit 1 if any is invalid.
    Validate(ValidateArgs),
    /// Print the tools as an LLM provider's tool schema (JSON on stdout, notes on stderr).
    Export(ExportArgs),
    /// Validate a definition file and store it as a new custom tool (version 1).
    Add(FileArgs),
    /// Validate a definition file and store it as the next version of an existing custom tool.
    Update(FileArgs),
    /// Remove a custom tool (its history is kept). Built-in tools cannot be removed.
    Rm(NameArgs),
    /// List every stored version of a custom tool, or print one with --version.
    History(HistoryArgs),
}

#[derive(Debug, Args)]
pub struct FileArgs {
    /// Definition file (.toml, .json, .yaml, .yml).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct NameArgs {
    /// Tool name.
    pub name: String,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Tool name.
    pub name: String,
    /// Print this version's definition (JSON, a valid definition file).
    #[arg(long, value_name = "N")]
    pub version: Option<i64>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: Option<AuditCommand>,
    /// Only calls of this tool.
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// How many calls to show, newest first.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: u32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Show everything recorded about one call.
    Show(CallIdArgs),
    /// Print a call's stored output byte for byte (outputs over 10 KB are kept apart).
    Output(CallIdArgs),
    /// Check the audit log's hash chain; exit 1 and name the first broken link if it was altered.
    Verify,
}

#[derive(Debug, Args)]
pub struct CallIdArgs {
    /// The call id (from `toolgate call --json` or `toolgate audit`).
    pub call_id: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Only tools of this functional category.
    #[arg(long, value_name = "C", value_parser = parse_category)]
    pub category: Option<toolgate_core::Category>,
    /// Only tools with this effect.
    #[arg(long, value_name = "E", value_parser = parse_effect)]
    pub effect: Option<toolgate_core::Effect>,
    /// Only tools with this consequence level.
    #[arg(long, value_name = "L", value_parser = parse_consequence)]
    pub consequence: Option<toolgate_core::Consequence>,
    /// Only tools carrying this tag.
    #[arg(long, value_name = "T")]
    pub tag: Option<String>,
    /// Case-insensitive text to find in the name or description.
    #[arg(long, value_name = "TEXT")]
    pub search: Option<String>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Tool name.
    pub name: String,
    /// Print the definition as JSON (a valid definition file).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Definition files (.toml, .json, .yaml, .yml).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print a JSON report.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormatArg {
    /// OpenAI Chat Completions `tools`.
    Openai,
    /// OpenAI Responses API `tools`.
    OpenaiResponses,
    /// Anthropic Messages `tools`.
    Anthropic,
    /// Gemini `functionDeclarations` (OpenAPI schema subset, `parameters`).
    Gemini,
    /// Gemini `functionDeclarations` with JSON Schema (`parametersJsonSchema`, and
    /// `responseJsonSchema` for tools with an output schema).
    GeminiJsonSchema,
    /// MCP `tools/list` result.
    Mcp,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Target format.
    #[arg(long, value_enum)]
    pub format: ExportFormatArg,
    /// Strict schemas (openai, openai-responses, anthropic): OpenAI's make every property
    /// required and optional ones nullable; Anthropic's close every object. A tool that cannot be
    /// strict is exported without it, with a note.
    #[arg(long)]
    pub strict: bool,
    /// Like --strict, but a tool that cannot be strict fails the export (exit 1), listing every
    /// such tool and why.
    #[arg(long)]
    pub require_strict: bool,
    /// Export only this tool (repeat for several); an unknown name is an error. Default: every
    /// tool you can see.
    #[arg(long, value_name = "NAME")]
    pub tool: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// Tool name.
    pub name: String,
    /// Arguments: a JSON object, @FILE to read it from a file, or - for standard input.
    #[arg(long, short, value_name = "JSON|@FILE|-", default_value = "{}")]
    pub args: String,
    /// Pre-approve the call if the tool requires confirmation.
    #[arg(long, short)]
    pub yes: bool,
    /// Call as this principal (defined under [principals.ID] in the config file).
    #[arg(long, value_name = "ID")]
    pub principal: Option<String>,
    /// Print the full result envelope as JSON.
    #[arg(long)]
    pub json: bool,
    /// If the call needs an approval, wait for the decision and print the final result.
    #[arg(long)]
    pub wait: bool,
    /// Why you want to run it (shown to the approver).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Repeating a call with the same key returns the same approval or result.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Give a model a task and the tools the principal may call; run its tool calls through the
    /// pipeline until it answers, a budget is spent, or a call waits for approval.
    ///
    /// The model is openai:NAME (Chat Completions: OpenAI, or vLLM, llama.cpp's server, Ollama,
    /// LiteLLM with --base-url) or anthropic:NAME (Messages). The key comes from OPENAI_API_KEY
    /// or ANTHROPIC_API_KEY and is never printed or logged. The run's budget is the principal's
    /// (`[budget]` and `[principals.NAME.budget]` in the config); --max-turns, --max-tool-calls and
    /// --timeout-ms tighten it, never loosen it. A tool that fails is reported back to the model
    /// so it can correct its arguments; after max_attempts_per_tool failures of one tool (3 by
    /// default) the loop stops. A tool that needs confirmation asks on the terminal (only `y` or
    /// `yes` approves); without a terminal the call becomes a durable approval and the loop stops
    /// with exit code 3. Ctrl-C cancels the run (a second one quits at once). Exit codes: 0
    /// answered, 1 the model's API failed or the run was cancelled, 2 usage (no key, bad flags, a
    /// budget looser than the ceiling), 3 approval pending, 4 budget exhausted.
    #[command(after_help = AGENT_EXAMPLES)]
    Run(AgentRunArgs),
}

const AGENT_EXAMPLES: &str = "\
Examples:
  OPENAI_API_KEY=sk-... toolgate agent run --model openai:gpt-4.1 --prompt 'What is 17 * 23?'
  toolgate agent run --model anthropic:claude-sonnet-4-5 --tool calculator --max-turns 4 \\
      --prompt 'Add up 2^10 and 3^5'
  OPENAI_API_KEY=none toolgate agent run --model openai:llama3.2 \\
      --base-url http://127.0.0.1:11434/v1 --prompt 'List the files here' --json
  toolgate runs show RUN_ID                        # the run's calls and consumption";

#[derive(Debug, Args)]
pub struct AgentRunArgs {
    /// The model: openai:NAME (Chat Completions) or anthropic:NAME (Messages).
    #[arg(long, value_name = "PROVIDER:NAME")]
    pub model: String,
    /// The API's base URL (default `https://api.openai.com/v1` or `https://api.anthropic.com/v1`);
    /// for example `http://127.0.0.1:11434/v1` (Ollama) or `http://127.0.0.1:8000/v1` (vLLM).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The task for the model.
    #[arg(long, value_name = "TEXT")]
    pub prompt: String,
    /// A system prompt.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Offer only this tool (repeatable) [default: every tool the principal may call].
    #[arg(long = "tool", value_name = "NAME")]
    pub tools: Vec<String>,
    /// Run as this principal (defined under [principals.ID] in the config file): its tools,
    /// grants and budget.
    #[arg(long, value_name = "ID")]
    pub principal: Option<String>,
    /// At most N model round trips (tightens the principal's max_turns; 10 when neither sets
    /// it).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// At most N tool calls (tightens the principal's max_tool_calls).
    #[arg(long, value_name = "N")]
    pub max_tool_calls: Option<u32>,
    /// At most N milliseconds for the whole run (tightens the principal's timeout_ms).
    #[arg(long, value_name = "N")]
    pub timeout_ms: Option<u64>,
    /// Anthropic's max_tokens per turn.
    #[arg(long, value_name = "N", default_value_t = toolgate_agent::DEFAULT_MAX_TOKENS)]
    pub max_tokens: u32,
    /// Print the whole exchange as JSON at the end (messages, tool calls, results, end state,
    /// run id, consumption) instead of the transcript.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List approvals, newest first.
    List(ApprovalsListArgs),
    /// Show one approval: the call, its arguments (sensitive values redacted), status, result.
    Show(ApprovalIdArgs),
    /// Approve a pending call and run it now, once (permissions are checked again).
    Approve(DecideArgs),
    /// Deny a pending call; it will never run.
    Deny(DecideArgs),
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first, with their budget and what they used.
    List(RunsListArgs),
    /// Show one run: its budget, consumption, failures per tool and the calls counted.
    Show(RunIdArgs),
}

#[derive(Debug, Args)]
pub struct RunsListArgs {
    /// Only this principal's runs.
    #[arg(long, value_name = "ID")]
    pub principal: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    /// JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunIdArgs {
    /// The run id (a UUID).
    pub id: String,
    /// JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApprovalsListArgs {
    /// Only approvals with this status: pending, approved, denied, expired, running, executed,
    /// indeterminate.
    #[arg(long, value_name = "STATUS")]
    pub status: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    /// JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApprovalIdArgs {
    /// The approval id (apr_…).
    pub id: String,
    /// JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The approval id (apr_…).
    pub id: String,
    /// Why (kept with the decision).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Print the result envelope as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_category(s: &str) -> Result<toolgate_core::Category, String> {
    s.parse()
}

fn parse_effect(s: &str) -> Result<toolgate_core::Effect, String> {
    s.parse()
}

fn parse_consequence(s: &str) -> Result<toolgate_core::Consequence, String> {
    s.parse()
}

#[derive(Debug, Subcommand)]
pub enum OutputTypesCommand {
    /// Add or replace an output type from a JSON file: a JSON Schema, or
    /// {"description", "schema", "warnings"}. Checked before it is stored.
    Add(OutputTypeAddArgs),
    /// List the stored output types.
    List,
    /// Print one stored output type.
    Show(OutputTypeNameArgs),
    /// Remove a stored output type.
    Rm(OutputTypeNameArgs),
}

#[derive(Debug, Args)]
pub struct OutputTypeAddArgs {
    /// The name callers pass as outputType (snake_case).
    pub name: String,
    /// The JSON file with the definition.
    pub file: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct OutputTypeNameArgs {
    /// The output type's name.
    pub name: String,
}

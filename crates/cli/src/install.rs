//! `toolgate install CLIENT`: toolgate's entry in an MCP client's own config file, in that
//! client's format and place, keeping the file's other entries, with a backup and idempotently.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use toolgate_builtins::FileRoot;

use crate::cli::{GlobalArgs, InstallArgs, McpClient};
use crate::exit;

/// Where a client keeps its servers and how it spells an entry.
struct Format {
    /// The client's name as people know it.
    title: &'static str,
    /// The key of the object that holds the servers.
    servers_key: &'static str,
    /// Stdio entries carry `"type": "stdio"`.
    typed_stdio: bool,
    /// How an HTTP entry names its transport and URL, or `None` if the config file cannot hold
    /// one (with what to do instead).
    http: Result<HttpShape, &'static str>,
}

enum HttpShape {
    /// `{"type": "http", "url": …}`.
    Typed,
    /// `{"url": …}`.
    Url,
    /// `{"serverUrl": …}` (Windsurf).
    ServerUrl,
}

impl McpClient {
    fn format(self) -> Format {
        match self {
            Self::ClaudeDesktop => Format {
                title: "Claude Desktop",
                servers_key: "mcpServers",
                typed_stdio: false,
                http: Err(
                    "Claude Desktop's config file only starts local servers. Leave out --http to install the stdio entry, or add the URL in Claude Desktop under Settings → Connectors",
                ),
            },
            Self::ClaudeCode => Format {
                title: "Claude Code",
                servers_key: "mcpServers",
                typed_stdio: true,
                http: Ok(HttpShape::Typed),
            },
            Self::Cursor => Format {
                title: "Cursor",
                servers_key: "mcpServers",
                typed_stdio: false,
                http: Ok(HttpShape::Url),
            },
            Self::Vscode => Format {
                title: "VS Code",
                servers_key: "servers",
                typed_stdio: true,
                http: Ok(HttpShape::Typed),
            },
            Self::Windsurf => Format {
                title: "Windsurf",
                servers_key: "mcpServers",
                typed_stdio: false,
                http: Ok(HttpShape::ServerUrl),
            },
        }
    }

    /// The client's user-level config file on this machine (Linux and macOS).
    fn config_file(self) -> anyhow::Result<PathBuf> {
        let home = || dirs::home_dir().context("Cannot find your home folder; pass --file PATH");
        // `config_dir` is ~/.config (or $XDG_CONFIG_HOME) on Linux and
        // ~/Library/Application Support on macOS: where both of these clients keep theirs.
        let config =
            || dirs::config_dir().context("Cannot find your config folder; pass --file PATH");
        Ok(match self {
            Self::ClaudeDesktop => config()?.join("Claude").join("claude_desktop_config.json"),
            Self::ClaudeCode => home()?.join(".claude.json"),
            Self::Cursor => home()?.join(".cursor").join("mcp.json"),
            Self::Vscode => config()?.join("Code").join("User").join("mcp.json"),
            Self::Windsurf => home()?
                .join(".codeium")
                .join("windsurf")
                .join("mcp_config.json"),
        })
    }
}

/// Runs `toolgate install`.
pub fn run(global: &GlobalArgs, args: &InstallArgs) -> anyhow::Result<ExitCode> {
    let format = args.client.format();
    if args.name.trim().is_empty() || args.name.chars().any(char::is_control) {
        bail!(
            "Invalid --name {:?}: give the entry a name such as toolgate",
            args.name
        );
    }
    let entry = entry(global, args, &format)?;
    let file = match &args.file {
        Some(file) => absolute(file)?,
        None => args.client.config_file()?,
    };
    if args.print {
        let mut servers = Map::new();
        servers.insert(args.name.clone(), entry);
        let shown = json!({ format.servers_key: servers });
        // The entry alone on stdout (JSON a script can use); where it goes on stderr.
        eprintln!("{} reads {}; the entry:", format.title, file.display());
        println!("{}", serde_json::to_string_pretty(&shown)?);
        return Ok(exit::code(exit::SUCCESS));
    }
    let outcome = write_entry(&file, format.servers_key, &args.name, entry)?;
    let name = &args.name;
    match outcome {
        Outcome::Unchanged => println!(
            "{}: server \"{name}\" is already up to date; nothing written",
            file.display()
        ),
        Outcome::Created => println!(
            "Created {} with server \"{name}\"; restart {} to load it",
            file.display(),
            format.title
        ),
        Outcome::Updated { backup, replaced } => println!(
            "{} server \"{name}\" in {} (backup: {}); restart {} to load it",
            if replaced { "Replaced" } else { "Added" },
            file.display(),
            backup.display(),
            format.title
        ),
    }
    Ok(exit::code(exit::SUCCESS))
}

/// The server entry, in the client's spelling.
fn entry(global: &GlobalArgs, args: &InstallArgs, format: &Format) -> anyhow::Result<Value> {
    if let Some(url) = &args.http {
        let shape = match &format.http {
            Ok(shape) => shape,
            Err(why) => bail!("{why}"),
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!(
                "Invalid --http URL {url:?}: give toolgate's MCP endpoint, such as http://127.0.0.1:7878/mcp"
            );
        }
        let mut entry = Map::new();
        match shape {
            HttpShape::Typed => {
                entry.insert("type".into(), json!("http"));
                entry.insert("url".into(), json!(url));
            }
            HttpShape::Url => {
                entry.insert("url".into(), json!(url));
            }
            HttpShape::ServerUrl => {
                entry.insert("serverUrl".into(), json!(url));
            }
        }
        if let Some(token) = &args.token {
            entry.insert(
                "headers".into(),
                json!({ "Authorization": format!("Bearer {token}") }),
            );
        }
        return Ok(Value::Object(entry));
    }
    if args.token.is_some() {
        bail!("--token goes with --http: a stdio entry runs toolgate as the local principal");
    }
    let program = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("Cannot find toolgate's own executable to write its absolute path")?;
    let mut command_args = vec!["serve".to_owned(), "--stdio".to_owned()];
    let config = global.config.as_deref().map(absolute).transpose()?;
    // The client starts toolgate in a directory of its own choosing, so every path is written
    // out absolute: the file root, the database, the config file and the tools directory.
    match root(global, config.as_deref())? {
        Some(root) => push(&mut command_args, "--root", &root),
        None => eprintln!(
            "warning: no --root given and the current directory is {}; the file tools will be off until you add --root DIR to the entry",
            std::env::current_dir()?.display()
        ),
    }
    let db = match global.db.as_deref() {
        // A relative SQLite path would be opened in the client's working directory.
        Some(db) => match db.strip_prefix("sqlite:") {
            Some(path) if !Path::new(path).is_absolute() => {
                format!("sqlite:{}", absolute(Path::new(path))?.display())
            }
            _ => db.to_owned(),
        },
        None => format!("sqlite:{}", toolgate_runtime::default_db_path().display()),
    };
    command_args.push("--db".to_owned());
    command_args.push(db);
    if let Some(config) = &config {
        push(&mut command_args, "--config", config);
    }
    if let Some(dir) = &global.tools_dir {
        push(&mut command_args, "--tools-dir", &absolute(dir)?);
    }
    let mut entry = Map::new();
    if format.typed_stdio {
        entry.insert("type".into(), json!("stdio"));
    }
    entry.insert("command".into(), json!(program.to_string_lossy()));
    entry.insert("args".into(), json!(command_args));
    entry.insert("env".into(), json!({}));
    Ok(Value::Object(entry))
}

fn push(args: &mut Vec<String>, flag: &str, path: &Path) {
    args.push(flag.to_owned());
    args.push(path.to_string_lossy().into_owned());
}

/// The root to write: `--root` made absolute; none when the config file sets one; else the
/// current directory unless it is `/` or the home folder (the file tools then stay off).
fn root(global: &GlobalArgs, config: Option<&Path>) -> anyhow::Result<Option<PathBuf>> {
    if let Some(root) = &global.root {
        return Ok(Some(absolute(root)?));
    }
    if let Some(config) = config {
        let loaded = toolgate_runtime::Config::load(config)
            .with_context(|| format!("Invalid config file {}", config.display()))?;
        if loaded.root.is_some() {
            return Ok(None);
        }
    }
    let cwd = std::env::current_dir().context("Cannot read the current directory")?;
    Ok(
        match toolgate_runtime::implicit_root(cwd, &toolgate_runtime::home_folders()) {
            FileRoot::Dir(dir) => Some(absolute(&dir)?),
            FileRoot::Disabled { .. } => None,
        },
    )
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("Cannot make {} absolute", path.display()))
}

enum Outcome {
    Unchanged,
    Created,
    Updated { backup: PathBuf, replaced: bool },
}

/// Puts `entry` under `servers_key.name` in the JSON file, keeping everything else. Nothing is
/// written when the entry is already there; an existing file is copied aside first.
fn write_entry(
    file: &Path,
    servers_key: &str,
    name: &str,
    entry: Value,
) -> anyhow::Result<Outcome> {
    let existing = match std::fs::read_to_string(file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("Cannot read {}", file.display())),
    };
    let mut root = match existing.as_deref() {
        None => Value::Object(Map::new()),
        Some(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not plain JSON ({e}); nothing was changed. Fix it, or add the entry by hand: `toolgate install … --print` shows it",
                file.display()
            )
        })?,
    };
    let Some(object) = root.as_object_mut() else {
        bail!(
            "{} does not hold a JSON object; nothing was changed. Add the entry by hand (`--print` shows it)",
            file.display()
        );
    };
    let servers = object
        .entry(servers_key)
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(servers) = servers.as_object_mut() else {
        bail!(
            "\"{servers_key}\" in {} is not an object; nothing was changed. Fix it or add the entry by hand (`--print` shows it)",
            file.display()
        );
    };
    if servers.get(name) == Some(&entry) {
        return Ok(Outcome::Unchanged);
    }
    let replaced = servers.insert(name.to_owned(), entry).is_some();
    let mut text = serde_json::to_string_pretty(&root)?;
    text.push('\n');
    let Some(existing) = existing else {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("Cannot create {}", dir.display()))?;
        }
        replace(file, &text)?;
        return Ok(Outcome::Created);
    };
    let backup = backup_path(file);
    std::fs::write(&backup, existing)
        .with_context(|| format!("Cannot write the backup {}", backup.display()))?;
    replace(file, &text)?;
    Ok(Outcome::Updated { backup, replaced })
}

/// `FILE.toolgate-backup-YYYYMMDDTHHMMSS`, never an existing file.
fn backup_path(file: &Path) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    let base = format!("{}.toolgate-backup-{stamp}", file.display());
    let mut path = PathBuf::from(&base);
    let mut n = 1;
    while path.exists() {
        path = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    path
}

/// Writes `text` to a temporary file beside `file` and renames it over: a crash leaves the old
/// file or the new one, never half of either. The old file's permissions are kept.
fn replace(file: &Path, text: &str) -> anyhow::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("Cannot write in {}", dir.display()))?;
    std::io::Write::write_all(&mut temp, text.as_bytes())
        .with_context(|| format!("Cannot write {}", temp.path().display()))?;
    if let Ok(meta) = std::fs::metadata(file) {
        std::fs::set_permissions(temp.path(), meta.permissions())
            .with_context(|| format!("Cannot set the permissions of {}", file.display()))?;
    }
    temp.as_file()
        .sync_all()
        .with_context(|| format!("Cannot write {}", temp.path().display()))?;
    temp.persist(file)
        .with_context(|| format!("Cannot replace {}", file.display()))?;
    Ok(())
}

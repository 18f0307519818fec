//! `toolgate init [DIR]`: a starter project — a commented `toolgate.toml` with every section and
//! its defaults, one example tool of each kind that needs no internet, the JSON Schemas editors
//! read, the file tools' own folder (`workspace/`, away from the database and its audit key) and
//! a `.gitignore` for the database. Nothing is ever overwritten: if any of the files
//! exists, nothing is written.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::InitArgs;
use crate::exit;

/// The files `toolgate init` writes, relative to DIR, and their text.
pub fn files() -> Vec<(&'static str, String)> {
    let schema = |value: serde_json::Value| {
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        text
    };
    vec![
        (
            "toolgate.toml",
            include_str!("init/toolgate.toml").to_owned(),
        ),
        (
            "tools/utc_time.toml",
            include_str!("init/tools/utc_time.toml").to_owned(),
        ),
        (
            "tools/toolgate_health.yaml",
            include_str!("init/tools/toolgate_health.yaml").to_owned(),
        ),
        (
            "tools/deploy_service.json",
            include_str!("init/tools/deploy_service.json").to_owned(),
        ),
        (
            "schemas/config.schema.json",
            schema(toolgate_runtime::config_schema()),
        ),
        (
            "schemas/definition.schema.json",
            schema(toolgate_core::definition_schema()),
        ),
        (
            "workspace/README.md",
            include_str!("init/workspace/README.md").to_owned(),
        ),
        (".gitignore", include_str!("init/gitignore").to_owned()),
    ]
}

pub fn run(args: &InitArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let files = files();
    let existing: Vec<PathBuf> = files
        .iter()
        .map(|(rel, _)| dir.join(rel))
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    if !existing.is_empty() {
        let list: Vec<String> = existing.iter().map(|p| p.display().to_string()).collect();
        eprintln!(
            "error: {} already exist{}; nothing was written. toolgate init never overwrites: move {} away, or run `toolgate init NEW_DIR` to start in another folder.",
            list.join(", "),
            if existing.len() == 1 { "s" } else { "" },
            if existing.len() == 1 { "it" } else { "them" },
        );
        return Ok(exit::code(exit::USAGE));
    }
    for (rel, text) in &files {
        write_new(&dir.join(rel), text)?;
    }
    let mut out = std::io::stdout().lock();
    write!(out, "{}", summary(&dir, &files))?;
    Ok(exit::code(exit::SUCCESS))
}

/// Creates `path` (and its folder) with `text`; an existing file is an error, never replaced.
fn write_new(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("Cannot create the folder {}", parent.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| {
            format!(
                "Cannot create {} (toolgate init never overwrites a file)",
                path.display()
            )
        })?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("Cannot write {}", path.display()))
}

/// What was written and the next three commands.
fn summary(dir: &Path, files: &[(&str, String)]) -> String {
    let mut text = format!("Wrote a toolgate project in {}:\n", dir.display());
    for (rel, _) in files {
        text.push_str(&format!("  {rel}\n"));
    }
    text.push_str("\nNext:\n");
    if dir != Path::new(".") {
        text.push_str(&format!("  cd {}\n", dir.display()));
    }
    text.push_str(
        "  toolgate --config toolgate.toml --db sqlite:toolgate.db tools validate tools/*   # check the example tools\n\
         \x20 toolgate --config toolgate.toml --db sqlite:toolgate.db call utc_time           # call one through the pipeline\n\
         \x20 toolgate --config toolgate.toml --db sqlite:toolgate.db serve                   # MCP at http://127.0.0.1:7878/mcp, the web UI at /\n",
    );
    text
}

//! The pieces of assembly every front-end shares: where the file tools are rooted, where the
//! default database lives, reading a tools directory, registering definitions in dependency
//! order and saying why one did not load, and the tools the hidden sandbox worker runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate_builtins::{BuiltinOptions, FileRoot};
use toolgate_core::{
    CoreError, CoreErrorKind, Issue, Registry, ToolDefinition, ToolSpec, ValidationReport,
};

use crate::Runtime;
use crate::error::RuntimeError;

/// The in-process tools the hidden worker mode can run: the built-ins with default options.
/// (Built-ins need no isolation; an embedder's own binary passes its isolated tools here.)
pub fn worker_tools() -> Vec<Arc<dyn toolgate_core::Tool>> {
    let root = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    toolgate_builtins::builtin_tools_with(BuiltinOptions::new(root)).unwrap_or_default()
}

/// One definition file and what became of it.
#[derive(Debug)]
pub struct Loaded {
    /// The file (or `(stored) NAME` for a stored definition).
    pub path: PathBuf,
    /// The registered definition, or why it was not registered.
    pub outcome: Result<ToolSpec, Failure>,
}

/// The database used when `--db` is not given: `toolgate.db` in the user's data directory.
pub fn default_db_path() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("toolgate")
        .join("toolgate.db")
}

/// The file tools' root when none is given (`--root`, `TOOLGATE_ROOT`, `root` in the config):
/// the working directory, unless it is `/` or one of the user's home folders. A desktop client
/// starts `toolgate serve --stdio` in a directory of its own choosing (often `/`), and serving
/// that whole tree is never what was meant, so the file tools are then disabled with a message
/// naming the setting to add.
pub fn implicit_root(cwd: PathBuf, homes: &[PathBuf]) -> FileRoot {
    let canonical = std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone());
    let what = if canonical.parent().is_none() {
        "the file system's root"
    } else if homes
        .iter()
        .any(|h| *h == cwd || std::fs::canonicalize(h).is_ok_and(|h| h == canonical))
    {
        "your home folder"
    } else {
        return FileRoot::Dir(cwd);
    };
    FileRoot::Disabled {
        reason: format!(
            "The file tools are off: toolgate was started in {} ({what}) with no root set, and they never serve that whole tree. Give them a folder with --root DIR, the TOOLGATE_ROOT environment variable or root = \"DIR\" in toolgate.toml (for a desktop client: in the server entry's args or env)",
            cwd.display()
        ),
    }
}

/// The user's home folders: `$HOME` and the home the user database (passwd) gives.
pub fn home_folders() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    #[cfg(unix)]
    if let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::getuid()) {
        homes.push(user.dir);
    }
    homes
}

/// How a startup line names the file tools' root.
pub fn describe_root(root: &FileRoot) -> String {
    match root {
        FileRoot::Dir(dir) => format!("file root {}", dir.display()),
        FileRoot::Disabled { .. } => "file tools off (no root set: add --root DIR)".to_owned(),
    }
}

/// Warnings validation adds for a command tool: `read_paths` and `write_paths` the user its
/// sandboxed program runs as cannot reach (a folder under a `0700` directory when toolgate runs
/// as root and programs as `nobody`), naming the directory and its mode.
pub fn access_warnings(runtime: &Runtime, spec: &ToolSpec) -> Vec<Issue> {
    let Some(executor) = runtime.executor() else {
        return Vec::new();
    };
    toolgate_sandbox::access_warnings(
        spec.definition(),
        spec.limits().isolation,
        &executor.runner().program_user(),
    )
}

/// Every `*.toml`, `*.json`, `*.yaml`, `*.yml` directly in `dir`, sorted.
pub fn definition_files(dir: &Path) -> Result<Vec<PathBuf>, RuntimeError> {
    let entries = std::fs::read_dir(dir).map_err(|source| RuntimeError::Io {
        what: format!("Cannot read tools directory {}", dir.display()),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && toolgate_core::Format::from_path(p).is_some())
        .collect();
    files.sort();
    Ok(files)
}

/// Registers the parsed definitions ([`Registry::register_each`]: dependencies may come later,
/// cycles are named) and pairs every file with its outcome.
pub fn register_in_order(
    registry: &Registry,
    parsed: Vec<(PathBuf, Result<ToolDefinition, CoreError>)>,
) -> Vec<Loaded> {
    let mut done = Vec::new();
    let mut paths = Vec::new();
    let mut defs = Vec::new();
    for (path, def) in parsed {
        match def {
            Ok(def) => {
                paths.push(path);
                defs.push(def);
            }
            Err(e) => done.push(Loaded {
                path,
                outcome: Err(Failure::from_error(&e, None)),
            }),
        }
    }
    let outcomes = registry.register_each(defs.clone());
    for ((path, def), outcome) in paths.into_iter().zip(defs).zip(outcomes) {
        done.push(Loaded {
            path,
            outcome: outcome.map_err(|e| Failure::from_error(&e, Some(&def))),
        });
    }
    done
}

/// Why a definition file did not load: every problem found, or one message when the file could
/// not even be read or parsed.
#[derive(Debug)]
pub struct Failure {
    /// Every problem with its path, when the definition was read.
    pub report: Option<ValidationReport>,
    /// The error as one message.
    pub message: String,
}

impl Failure {
    /// From a registry or parse error. A name clash (built-in or duplicate) is reported at
    /// `name` together with whatever else is wrong with the definition.
    pub fn from_error(e: &CoreError, def: Option<&ToolDefinition>) -> Self {
        let message = match e {
            CoreError::InFile { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        if let Some(r) = e.report() {
            return Self {
                report: Some(r.clone()),
                message,
            };
        }
        let clash = match e.kind() {
            CoreErrorKind::Forbidden => Some("name.builtin"),
            CoreErrorKind::Conflict => Some("name.duplicate"),
            _ => None,
        };
        match (clash, def) {
            (Some(code), Some(def)) => {
                let mut report = match toolgate_core::validate(def) {
                    Ok(spec) => ValidationReport {
                        errors: Vec::new(),
                        warnings: spec.warnings().to_vec(),
                    },
                    Err(report) => report,
                };
                report.errors.insert(
                    0,
                    Issue {
                        path: "name".into(),
                        code: code.into(),
                        message: message.clone(),
                    },
                );
                Self {
                    report: Some(report),
                    message,
                }
            }
            _ => Self {
                report: None,
                message,
            },
        }
    }

    /// One line: every error, or the message.
    pub fn one_line(&self) -> String {
        match &self.report {
            Some(r) => r
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            None => self.message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    /// The store's plan table names exactly the built-ins toolgate ships, in the same order: a
    /// new built-in cannot slip into (or out of) the plans unnoticed.
    #[test]
    fn the_plans_know_every_built_in() {
        assert_eq!(
            toolgate_store::ALL_BUILTINS.as_slice(),
            toolgate_builtins::BUILTIN_NAMES
        );
    }
}

//! The real MCP servers the gateway's tests run as upstreams, and the rule for when they are
//! missing (the same as PostgreSQL's: skipped with a note, or a failure when `CI=true`).
//!
//! - The official `@modelcontextprotocol/server-everything` and `server-filesystem` (npm),
//!   installed by `scripts/test.sh` (`scripts/mcp-test-deps.sh`) into `.test-deps/npm`, pinned by
//!   `tests/mcp-servers/package-lock.json`; [`NPM_DIR_VAR`] names the folder.
//! - A Python server on the official `mcp` SDK, `crates/gateway/tests/fixtures/py_server.py`,
//!   run by the python in [`PYTHON_VAR`] (`.test-deps/mcp-venv`, made from a system python the
//!   sandbox's user can read, so the server runs at `standard` and `strict` too).
//!
//! When a variable is unset the default place in the repository is tried; set to the empty
//! string it means "not here" (`scripts/test.sh --quick` does that, so the quick tier never
//! needs Node or Python). Every [`Launch`] has an absolute program and no shell, as the
//! gateway's own rule for stdio servers requires: `node` is found on `PATH` once, here.
//!
//! ```no_run
//! # fn demo() {
//! use toolgate_test_support::mcp_fixtures;
//! let Some(everything) = mcp_fixtures::everything("the everything-server test") else {
//!     return; // skipped, with a note on stderr (or a panic with CI=true)
//! };
//! let toml = everything.toml_entry("everything");
//! # let _ = toml;
//! # }
//! ```

use std::path::{Path, PathBuf};

/// The folder holding `node_modules/` with the npm MCP servers (`.test-deps/npm` by default).
pub const NPM_DIR_VAR: &str = "TOOLGATE_TEST_NPM_DIR";

/// The python that has the official `mcp` package (`.test-deps/mcp-venv/bin/python` by default).
pub const PYTHON_VAR: &str = "TOOLGATE_TEST_PYTHON";

/// How to install what is missing, for the messages.
const INSTALL_HINT: &str =
    "run `source scripts/mcp-test-deps.sh && mcp_test_deps` (scripts/test.sh does it)";

/// One stdio MCP server to start: an absolute program and its arguments, no shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The absolute path of the program (`node`, or the venv's python).
    pub program: PathBuf,
    /// Its arguments, the server's script first.
    pub args: Vec<String>,
}

impl Launch {
    /// The program as a string (paths here are UTF-8: they come from `PATH` and the repository).
    pub fn program_str(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }

    /// A `[servers.NAME]` config entry that starts this server (`command` and `args`), as TOML.
    pub fn toml_entry(&self, name: &str) -> String {
        let args: Vec<String> = self.args.iter().map(|a| toml_string(a)).collect();
        format!(
            "[servers.{name}]\ncommand = {}\nargs = [{}]\n",
            toml_string(&self.program_str()),
            args.join(", ")
        )
    }

    /// The same with arguments appended (for example the filesystem server's roots).
    pub fn with_args<I, S>(mut self, extra: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(extra.into_iter().map(Into::into));
        self
    }
}

/// A TOML basic string (quotes and backslashes escaped).
fn toml_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The repository's root (this crate is `crates/test-support`).
pub fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| here.to_path_buf())
}

/// Whether a missing fixture fails the tests instead of skipping them: `CI=true`.
pub fn required() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// The configured value of `var`: `Some(None)` when set empty (not here), `Some(Some(path))` when
/// set, `None` when unset (use the default).
fn configured(var: &str) -> Option<Option<PathBuf>> {
    match std::env::var_os(var) {
        Some(v) if v.is_empty() => Some(None),
        Some(v) => Some(Some(PathBuf::from(v))),
        None => None,
    }
}

/// Skips (`None` after a note) or, with `CI=true`, panics: `what` needs `missing`.
fn missing<T>(what: &str, problem: &str) -> Option<T> {
    if required() {
        panic!("{what} needs {problem}; {INSTALL_HINT}");
    }
    eprintln!("skipping {what}: {problem} ({INSTALL_HINT})");
    None
}

/// Makes `path` absolute against the current directory without resolving symlinks (a venv's
/// python is a symlink whose target is not the venv).
fn absolute(path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        return path;
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(path),
        Err(_) => path,
    }
}

/// The npm folder (holding `node_modules/`), if installed; `None` with a note (or a panic in CI)
/// otherwise.
pub fn npm_dir(what: &str) -> Option<PathBuf> {
    let dir = match configured(NPM_DIR_VAR) {
        Some(None) => {
            return missing(
                what,
                &format!("the npm MCP servers ({NPM_DIR_VAR} is empty)"),
            );
        }
        Some(Some(dir)) => absolute(dir),
        None => repo_root().join(".test-deps/npm"),
    };
    if !dir.join("node_modules/@modelcontextprotocol").is_dir() {
        return missing(
            what,
            &format!(
                "the npm MCP servers in {} (not installed there)",
                dir.display()
            ),
        );
    }
    Some(dir)
}

/// The absolute path of `node` on `PATH`, if any.
pub fn node(what: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join("node");
        if candidate.is_file() {
            return Some(std::fs::canonicalize(&candidate).unwrap_or(candidate));
        }
    }
    missing(what, "Node.js (`node` on PATH)")
}

/// An npm server's entry script, `node_modules/@modelcontextprotocol/<package>/dist/index.js`.
fn npm_server(what: &str, package: &str) -> Option<Launch> {
    let dir = npm_dir(what)?;
    let script = dir
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    if !script.is_file() {
        return missing(what, &format!("{} (not installed)", script.display()));
    }
    let program = node(what)?;
    Some(Launch {
        program,
        args: vec![script.to_string_lossy().into_owned()],
    })
}

/// The official everything server over stdio (`node …/server-everything/dist/index.js stdio`).
pub fn everything(what: &str) -> Option<Launch> {
    Some(npm_server(what, "server-everything")?.with_args(["stdio"]))
}

/// The official filesystem server over stdio with `roots` as its allowed directories.
pub fn filesystem(what: &str, roots: &[&Path]) -> Option<Launch> {
    let launch = npm_server(what, "server-filesystem")?;
    Some(launch.with_args(roots.iter().map(|r| r.to_string_lossy().into_owned())))
}

/// The python with the official `mcp` package, if installed.
pub fn python(what: &str) -> Option<PathBuf> {
    let python = match configured(PYTHON_VAR) {
        Some(None) => return missing(what, &format!("the Python MCP SDK ({PYTHON_VAR} is empty)")),
        Some(Some(p)) => absolute(p),
        None => repo_root().join(".test-deps/mcp-venv/bin/python"),
    };
    if !python.is_file() {
        return missing(
            what,
            &format!("a python with the `mcp` package at {}", python.display()),
        );
    }
    Some(python)
}

/// Why a process running as another, unprivileged user (the sandbox's program user, `nobody`)
/// cannot read `path`, if it cannot by the permission bits for "others": the first folder on the
/// way it cannot enter (a 0700 home, say), or the file itself. `None` when it can. For the
/// messages of tests that run fixtures inside the sandbox.
pub fn blocked_for_others(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    for dir in path.ancestors().skip(1) {
        let mode = std::fs::metadata(dir).ok()?.permissions().mode();
        if mode & 0o001 == 0 {
            return Some(format!(
                "{} lives under {} (mode {:o}), which the sandbox's user cannot enter; check the repository out (or point the fixture variables) somewhere others can read",
                path.display(),
                dir.display(),
                mode & 0o777
            ));
        }
    }
    let mode = std::fs::metadata(&path).ok()?.permissions().mode();
    (mode & 0o004 == 0).then(|| {
        format!(
            "{} (mode {:o}) is not readable by others, so not by the sandbox's user",
            path.display(),
            mode & 0o777
        )
    })
}

/// The path of the Python fixture server (`crates/gateway/tests/fixtures/py_server.py`).
pub fn py_server_script() -> PathBuf {
    repo_root().join("crates/gateway/tests/fixtures/py_server.py")
}

/// The Python fixture server over stdio (see its docstring for its tools). Its behaviour is
/// steered by its environment: `PY_SERVER_DRIFT_FILE` (while that file exists the `drifting`
/// tool's description differs) and `PY_SERVER_CANCEL_MARKER` (written when `slow` is cancelled).
pub fn py_server(what: &str) -> Option<Launch> {
    let program = python(what)?;
    Some(Launch {
        program,
        args: vec![py_server_script().to_string_lossy().into_owned()],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_entry_quotes_program_and_args() {
        let launch = Launch {
            program: PathBuf::from("/usr/bin/node"),
            args: vec!["/x/a \"b\".js".into(), "stdio".into()],
        };
        assert_eq!(
            launch.toml_entry("files"),
            "[servers.files]\ncommand = \"/usr/bin/node\"\nargs = [\"/x/a \\\"b\\\".js\", \"stdio\"]\n"
        );
    }

    #[test]
    fn a_folder_others_cannot_enter_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = open.join("f.py");
        std::fs::write(&file, "").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let why = blocked_for_others(&file).unwrap();
        assert!(why.contains("mode 700"), "{why}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        if blocked_for_others(dir.path().parent().unwrap()).is_none() {
            assert_eq!(blocked_for_others(&file), None);
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert!(blocked_for_others(&file).unwrap().contains("mode 600"));
        }
    }

    #[test]
    fn the_python_fixture_is_in_the_repository() {
        assert!(
            py_server_script().is_file(),
            "{}",
            py_server_script().display()
        );
    }
}

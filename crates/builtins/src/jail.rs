//! The file jail: maps a path a caller gave to a real path inside one root directory, refusing
//! every path that would leave it through `..`, an absolute path or a symbolic link.
//!
//! The rules are documented on [`Jail`].

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use toolgate_core::ToolError;

use crate::error::BuiltinError;

/// Longest path a caller may give, in bytes (checked before anything touches the disk).
pub const MAX_PATH_BYTES: usize = 4096;
/// Most components a caller's path may have (so a failing deep write cannot litter the root
/// with directories).
pub const MAX_PATH_DEPTH: usize = 64;

/// A root directory that file tools cannot leave. Cheap to share behind an `Arc`.
///
/// Rules, in order:
///
/// 1. The path must be non-empty, at most [`MAX_PATH_BYTES`] long with at most
///    [`MAX_PATH_DEPTH`] components, and free of NUL bytes (`validation` otherwise).
/// 2. It is normalized *lexically*: `.` is dropped and `..` removes the previous component. A
///    relative path whose `..` would climb above the root is refused. An absolute path must lie
///    inside the root (its canonical form, or the form it was given in) after normalization.
///    `..` never reaches the operating system, so `link/..` means the root, not the link target's
///    parent.
/// 3. The remaining components are walked from the canonical root one at a time. A component
///    that is a symbolic link is resolved with `canonicalize`; it must resolve, and to a place
///    inside the root. This holds for intermediate directories and for the final component.
///
/// A refusal is always `authorization` with the message `Permission denied: <path>` (the path as
/// the caller gave it), so it reveals nothing about what lies outside. A missing file is
/// `execution` with `File not found: <path>` (seed 001).
///
/// What the jail does not do: it checks, then the caller acts on the checked path, so a process
/// that concurrently replaces a directory *inside* the root with a symbolic link can race it.
/// The file tools narrow that window (reads open with `O_NOFOLLOW`, writes create their temporary
/// file with `O_EXCL` and `rename` over the final entry, deletes `unlink` without following), but
/// the OS-level guarantee against a hostile local process is the `strict` isolation level.
///
/// All methods do blocking file-system I/O; call them from `spawn_blocking` in async code.
#[derive(Clone, Debug)]
pub struct Jail {
    /// The canonical root: absolute, no symbolic links, no `..` (empty when disabled).
    root: PathBuf,
    /// The root as given (made absolute, normalized), when that differs from `root`; absolute
    /// paths under it are accepted too.
    alias: Option<PathBuf>,
    /// Why the file tools have no root at all ([`FileRoot::Disabled`]): every path is refused
    /// with `unavailable` and this message.
    disabled: Option<String>,
}

/// Where the file tools are rooted: a directory, or nowhere. The command line decides (see
/// `toolgate serve`): a root given explicitly is used as is; the working directory is used only
/// when it is neither `/` nor the user's home folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileRoot {
    /// The file tools are jailed to this directory (must exist; canonicalized once).
    Dir(PathBuf),
    /// The file tools serve nothing: every call answers `unavailable` with `reason`, which
    /// names the setting to add.
    Disabled { reason: String },
}

impl FileRoot {
    /// The directory, if the file tools have one.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Self::Dir(path) => Some(path),
            Self::Disabled { .. } => None,
        }
    }
}

impl From<PathBuf> for FileRoot {
    fn from(path: PathBuf) -> Self {
        Self::Dir(path)
    }
}

impl From<&Path> for FileRoot {
    fn from(path: &Path) -> Self {
        Self::Dir(path.to_path_buf())
    }
}

impl From<&PathBuf> for FileRoot {
    fn from(path: &PathBuf) -> Self {
        Self::Dir(path.clone())
    }
}

impl From<&str> for FileRoot {
    fn from(path: &str) -> Self {
        Self::Dir(PathBuf::from(path))
    }
}

impl From<String> for FileRoot {
    fn from(path: String) -> Self {
        Self::Dir(PathBuf::from(path))
    }
}

/// How the final component of a path is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Must exist; a symbolic link is followed (and must stay inside).
    Follow,
    /// Must exist; a symbolic link is returned itself (but must still point inside).
    NoFollow,
    /// May be missing; missing parent directories are created; a symbolic link is followed.
    Write,
}

impl Jail {
    /// Opens a jail at `root`, which must be an existing directory. The root is canonicalized
    /// once, here.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, BuiltinError> {
        let given = root.as_ref();
        let canonical = fs::canonicalize(given).map_err(|e| BuiltinError::root_io(given, &e))?;
        let meta = fs::metadata(&canonical).map_err(|e| BuiltinError::root_io(given, &e))?;
        if !meta.is_dir() {
            return Err(BuiltinError::RootNotDirectory {
                path: given.display().to_string(),
            });
        }
        let alias = std::path::absolute(given)
            .ok()
            .map(|p| normalize_absolute(&p))
            // Only an alias that names the same directory (lexical `..` after a link may not).
            .filter(|p| *p != canonical && fs::canonicalize(p).is_ok_and(|c| c == canonical));
        Ok(Self {
            root: canonical,
            alias,
            disabled: None,
        })
    }

    /// A jail with no root: every path is refused with `unavailable` and `reason` (which should
    /// name the setting that gives the file tools a root).
    pub fn disabled(reason: impl Into<String>) -> Self {
        Self {
            root: PathBuf::new(),
            alias: None,
            disabled: Some(reason.into()),
        }
    }

    /// The jail for a [`FileRoot`]: [`Jail::new`] or [`Jail::disabled`].
    pub fn for_root(root: &FileRoot) -> Result<Self, BuiltinError> {
        match root {
            FileRoot::Dir(path) => Self::new(path),
            FileRoot::Disabled { reason } => Ok(Self::disabled(reason.clone())),
        }
    }

    /// Why the jail serves nothing, if it is disabled.
    pub fn disabled_reason(&self) -> Option<&str> {
        self.disabled.as_deref()
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether a canonical absolute path lies inside the root (or is the root).
    pub fn contains(&self, canonical: &Path) -> bool {
        self.disabled.is_none() && canonical.starts_with(&self.root)
    }

    /// Resolves an existing file or directory, following symbolic links that stay inside.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        self.locate(path, Mode::Follow)
    }

    /// Resolves an existing entry without following a final symbolic link: the link itself is
    /// returned, provided it points inside the root. For operations on the entry (delete).
    pub fn resolve_entry(&self, path: &str) -> Result<PathBuf, ToolError> {
        self.locate(path, Mode::NoFollow)
    }

    /// Resolves the target of a write. The file may be missing; missing parent directories are
    /// created (inside the root only). A final symbolic link that points inside the root is
    /// resolved to its target, so the write replaces the target's content.
    pub fn resolve_for_write(&self, path: &str) -> Result<PathBuf, ToolError> {
        self.locate(path, Mode::Write)
    }

    /// Splits a caller's path into normal components relative to the root (rules 1 and 2).
    fn components(&self, given: &str) -> Result<Vec<OsString>, ToolError> {
        // No root at all (a desktop client started toolgate in `/` or the home folder): nothing
        // is served, whatever the path.
        if let Some(reason) = &self.disabled {
            return Err(ToolError::unavailable(reason.clone()).permanent());
        }
        if given.is_empty() {
            return Err(ToolError::validation(
                "Path is empty: give a path relative to the root, like notes.txt (use . for the root itself)",
            ));
        }
        if given.len() > MAX_PATH_BYTES {
            return Err(ToolError::validation(format!(
                "Path is too long: {} bytes (at most {MAX_PATH_BYTES})",
                given.len()
            )));
        }
        if Path::new(given).components().count() > MAX_PATH_DEPTH {
            return Err(ToolError::validation(format!(
                "Path is too deep: more than {MAX_PATH_DEPTH} components"
            )));
        }
        if given.contains('\0') {
            return Err(ToolError::validation(format!(
                "Invalid path {given:?}: paths cannot contain NUL bytes"
            )));
        }
        let path = Path::new(given);
        if path.has_root() {
            let normalized = normalize_absolute(path);
            let relative = normalized
                .strip_prefix(&self.root)
                .ok()
                .or_else(|| {
                    self.alias
                        .as_ref()
                        .and_then(|alias| normalized.strip_prefix(alias).ok())
                })
                .ok_or_else(|| denied(given))?;
            return Ok(relative
                .components()
                .filter_map(|c| match c {
                    Component::Normal(n) => Some(n.to_owned()),
                    _ => None,
                })
                .collect());
        }
        let mut out = Vec::new();
        for c in path.components() {
            match c {
                Component::Normal(n) => out.push(n.to_owned()),
                Component::CurDir => {}
                Component::ParentDir => {
                    if out.pop().is_none() {
                        return Err(denied(given));
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Err(denied(given)),
            }
        }
        Ok(out)
    }

    /// Walks the components from the root (rule 3).
    fn locate(&self, given: &str, mode: Mode) -> Result<PathBuf, ToolError> {
        let parts = self.components(given)?;
        let Some((last, parents)) = parts.split_last() else {
            return Ok(self.root.clone());
        };
        let mut dir = self.root.clone();
        for part in parents {
            let next = dir.join(part);
            dir = match fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => self.follow(&next, given)?,
                Ok(meta) if meta.is_dir() => next,
                Ok(_) => return Err(not_a_parent(given, mode)),
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                    return Err(not_a_parent(given, mode));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && mode == Mode::Write => {
                    make_dir(&next, given)?;
                    next
                }
                Err(e) => return Err(io_error(given, &e)),
            };
        }
        let target = dir.join(last);
        match fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let resolved = self.follow(&target, given)?;
                Ok(if mode == Mode::NoFollow {
                    target
                } else {
                    resolved
                })
            }
            Ok(_) => Ok(target),
            Err(e) if e.kind() == io::ErrorKind::NotFound && mode == Mode::Write => Ok(target),
            Err(e) => Err(io_error(given, &e)),
        }
    }

    /// Resolves a symbolic link; refuses links that dangle, loop or lead outside the root.
    fn follow(&self, link: &Path, given: &str) -> Result<PathBuf, ToolError> {
        match fs::canonicalize(link) {
            Ok(target) if self.contains(&target) => Ok(target),
            _ => Err(denied(given)),
        }
    }
}

/// Creates one missing directory of a write path; tolerates a concurrent creator.
fn make_dir(dir: &Path, given: &str) -> Result<(), ToolError> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match fs::symlink_metadata(dir) {
            Ok(meta) if meta.is_dir() => Ok(()),
            _ => Err(denied(given)),
        },
        Err(e) => Err(io_error(given, &e)),
    }
}

fn not_a_parent(given: &str, mode: Mode) -> ToolError {
    if mode == Mode::Write {
        ToolError::execution(format!(
            "Cannot write {given}: one of its parent paths is a file, not a directory"
        ))
    } else {
        not_found(given)
    }
}

/// Lexically normalizes an absolute path: drops `.`, applies `..` (never above the root `/`).
fn normalize_absolute(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => out.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// `Permission denied: <path>` (`authorization`).
pub(crate) fn denied(given: &str) -> ToolError {
    ToolError::authorization(format!("Permission denied: {given}"))
}

/// `File not found: <path>` (`execution`).
pub(crate) fn not_found(given: &str) -> ToolError {
    ToolError::execution(format!("File not found: {given}"))
}

/// Maps an I/O error on the caller's path to a tool error whose message names that path (and
/// never the real, absolute one).
pub(crate) fn io_error(given: &str, err: &io::Error) -> ToolError {
    use io::ErrorKind as K;
    match err.kind() {
        K::NotFound | K::NotADirectory => not_found(given),
        K::PermissionDenied => denied(given),
        K::IsADirectory => ToolError::execution(format!("Is a directory: {given}")),
        K::StorageFull => {
            ToolError::execution(format!("No space left on the device while writing {given}"))
        }
        K::ReadOnlyFilesystem => ToolError::execution(format!(
            "Cannot write {given}: the file system is read-only"
        )),
        _ if is_symlink_loop(err) => denied(given),
        _ => ToolError::execution(format!("Cannot access {given}: {err}")),
    }
}

#[cfg(unix)]
fn is_symlink_loop(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::ELOOP)
}

#[cfg(not(unix))]
fn is_symlink_loop(_err: &io::Error) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_absolute_never_climbs_above_the_root() {
        let cases = [
            ("/a/b/../c", "/a/c"),
            ("/a/./b/", "/a/b"),
            ("/../../etc", "/etc"),
            ("/a/b/../../..", "/"),
        ];
        for (input, want) in cases {
            assert_eq!(
                normalize_absolute(Path::new(input)),
                PathBuf::from(want),
                "{input}"
            );
        }
    }

    #[test]
    fn a_disabled_jail_refuses_every_path_as_unavailable() {
        let jail = Jail::disabled("no root: add --root DIR");
        for path in [".", "etc/hostname", "/etc/hostname", "a/../b"] {
            let err = jail.resolve(path).unwrap_err();
            assert_eq!(err.kind(), toolgate_core::ErrorKind::Unavailable, "{path}");
            assert_eq!(err.message(), "no root: add --root DIR");
            assert!(!err.is_retryable());
            assert!(jail.resolve_for_write(path).is_err());
            assert!(jail.resolve_entry(path).is_err());
        }
        assert!(!jail.contains(Path::new("/")));
    }

    #[test]
    fn relative_components_are_lexically_normalized() {
        let dir = tempfile::tempdir().unwrap();
        let jail = Jail::new(dir.path()).unwrap();
        let cases: [(&str, Option<&[&str]>); 7] = [
            (".", Some(&[])),
            ("a/./b", Some(&["a", "b"])),
            ("a/../b", Some(&["b"])),
            ("a/b/../../c", Some(&["c"])),
            ("..", None),
            ("a/../../b", None),
            ("./../x", None),
        ];
        for (input, want) in cases {
            let got = jail.components(input);
            match want {
                Some(parts) => {
                    let want: Vec<OsString> = parts.iter().map(OsString::from).collect();
                    assert_eq!(got.unwrap(), want, "{input}");
                }
                None => assert_eq!(
                    got.unwrap_err().message(),
                    format!("Permission denied: {input}")
                ),
            }
        }
    }
}

//! Whether the user a sandboxed program runs as can reach a command tool's `read_paths` and
//! `write_paths`: toolgate running as root runs `standard` and `strict` programs as an
//! unprivileged user (`nobody` by default), and a path under a directory that user cannot
//! search (a `0700` home, say) fails at call time with a bare `Permission denied`. Validation
//! reports it beforehand, as a warning naming the directory and its mode.
//!
//! Only the classic mode bits are read (owner, group, other); ACLs and capabilities are not.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use toolgate_core::{Isolation, Issue, ToolDefinition};

use crate::command::{COMMAND_KIND, CommandPlan};

/// The host user a sandboxed program runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramUser {
    /// The user id.
    pub uid: u32,
    /// The primary group id.
    pub gid: u32,
    /// Supplementary groups (none when toolgate runs as root: they are dropped).
    pub groups: Vec<u32>,
}

impl ProgramUser {
    /// `uid 65534, nobody`: the id and, when the user database knows it, the name.
    pub fn describe(&self) -> String {
        let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(self.uid))
            .ok()
            .flatten()
            .map(|u| u.name);
        match name {
            Some(name) => format!("uid {}, {name}", self.uid),
            None => format!("uid {}", self.uid),
        }
    }

    fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// What the program must be able to do with a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    Read,
    Write,
}

const R: u32 = 4;
const W: u32 = 2;
const X: u32 = 1;

/// Whether `user` has every permission in `bits` (a mix of R, W, X) on a file with this mode
/// and owner: the owner's bits for the owner, the group's for a member, the others' otherwise.
fn allows(mode: u32, owner: u32, group: u32, user: &ProgramUser, bits: u32) -> bool {
    if user.uid == 0 {
        return true;
    }
    let class = if owner == user.uid {
        mode >> 6
    } else if user.in_group(group) {
        mode >> 3
    } else {
        mode
    };
    class & bits == bits
}

/// Warnings for the `read_paths` and `write_paths` of a `command` definition that `user` cannot
/// reach at isolation `level` (only `standard` and `strict` run the program as `user` with
/// these paths; other definitions get none). A path that does not exist yet is not checked.
pub fn access_warnings(def: &ToolDefinition, level: Isolation, user: &ProgramUser) -> Vec<Issue> {
    let is_command = def.run.as_ref().is_some_and(|r| r.kind == COMMAND_KIND);
    if !is_command || !matches!(level, Isolation::Standard | Isolation::Strict) {
        return Vec::new();
    }
    let Ok(plan) = CommandPlan::parse(def) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let lists = [
        ("read_paths", &plan.read_paths, Need::Read),
        ("write_paths", &plan.write_paths, Need::Write),
    ];
    for (key, paths, need) in lists {
        for (i, path) in paths.iter().enumerate() {
            if let Some(message) = blocked(path, need, user) {
                out.push(Issue {
                    path: format!("run.sandbox.{key}[{i}]"),
                    code: "run.sandbox_path_access".into(),
                    message,
                });
            }
        }
    }
    out
}

/// Why `user` cannot reach `path` for `need`, or `None` when it can (or the path is missing).
pub(crate) fn blocked(path: &Path, need: Need, user: &ProgramUser) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let real = std::fs::canonicalize(path).ok()?;
    let who = user.describe();
    let mut dirs: Vec<PathBuf> = real.ancestors().skip(1).map(Path::to_path_buf).collect();
    dirs.reverse();
    for dir in dirs {
        let meta = std::fs::metadata(&dir).ok()?;
        if !allows(meta.mode(), meta.uid(), meta.gid(), user, X) {
            let mut m = format!(
                "{} cannot be reached by the user sandboxed programs run as ({who}): the directory {} has mode {:04o} (owner uid {}, group gid {}) and does not let that user enter it, so the call would fail with Permission denied",
                path.display(),
                dir.display(),
                meta.mode() & 0o7777,
                meta.uid(),
                meta.gid()
            );
            let _ = write!(
                m,
                ". Let others enter it (chmod o+x {}) or move the data outside it",
                dir.display()
            );
            return Some(m);
        }
    }
    let meta = std::fs::metadata(&real).ok()?;
    let (bits, what) = match (need, meta.is_dir()) {
        (Need::Read, true) => (R | X, "list and enter it (r-x)"),
        (Need::Read, false) => (R, "read it (r)"),
        (Need::Write, true) => (W | X, "write in it (-wx)"),
        (Need::Write, false) => (W, "write it (w)"),
    };
    if allows(meta.mode(), meta.uid(), meta.gid(), user, bits) {
        return None;
    }
    Some(format!(
        "{} has mode {:04o} (owner uid {}, group gid {}), which does not let the user sandboxed programs run as ({who}) {what}, so the call would fail with Permission denied",
        path.display(),
        meta.mode() & 0o7777,
        meta.uid(),
        meta.gid()
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const NOBODY: u32 = 65534;

    fn nobody() -> ProgramUser {
        ProgramUser {
            uid: NOBODY,
            gid: NOBODY,
            groups: Vec::new(),
        }
    }

    fn definition(read: &Path, write: &Path, isolation: &str) -> ToolDefinition {
        let text = format!(
            r#"
name = "word_count"
description = "Count the words of a text file inside the data folder."
effect = "read"
[constraints]
isolation = "{isolation}"
[run]
kind = "command"
program = "/usr/bin/wc"
args = ["-w"]
[run.sandbox]
read_paths = [{read:?}]
write_paths = [{write:?}]
"#
        );
        ToolDefinition::parse(&text, toolgate_core::Format::Toml).unwrap()
    }

    #[test]
    fn mode_bits_pick_the_owner_group_or_other_class() {
        let user = nobody();
        assert!(!allows(0o700, 0, 0, &user, X));
        assert!(allows(0o701, 0, 0, &user, X));
        assert!(allows(0o710, 0, NOBODY, &user, X));
        // The owner's class alone counts for the owner, even when others may.
        assert!(!allows(0o077, NOBODY, 0, &user, R));
        let root = ProgramUser {
            uid: 0,
            gid: 0,
            groups: Vec::new(),
        };
        assert!(allows(0o000, 5, 5, &root, R | W | X));
    }

    #[test]
    fn a_path_under_a_private_directory_is_named_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("private");
        let data = private.join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
        let def = definition(&data, &data, "strict");
        let mut user = nobody();
        if user.uid
            == std::fs::metadata(&private)
                .map(|m| {
                    use std::os::unix::fs::MetadataExt;
                    m.uid()
                })
                .unwrap()
        {
            user.uid = NOBODY - 1;
        }
        let warnings = access_warnings(&def, Isolation::Strict, &user);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert_eq!(warnings[0].path, "run.sandbox.read_paths[0]");
        assert_eq!(warnings[1].path, "run.sandbox.write_paths[0]");
        let message = &warnings[0].message;
        assert!(
            message.contains(&format!(
                "the directory {} has mode 0700",
                private.display()
            )),
            "{message}"
        );
        assert!(
            message.contains(&format!("chmod o+x {}", private.display())),
            "{message}"
        );

        // Searchable: no warning. Isolation none or restricted: not checked.
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o711)).unwrap();
        assert_eq!(access_warnings(&def, Isolation::Strict, &user), Vec::new());
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(access_warnings(&def, Isolation::None, &user), Vec::new());
        assert_eq!(
            access_warnings(&def, Isolation::Restricted, &user),
            Vec::new()
        );
    }

    #[test]
    fn the_path_itself_needs_read_or_write_permission() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
        let def = definition(&file, &out, "standard");
        let user = ProgramUser {
            uid: NOBODY - 2,
            gid: NOBODY - 2,
            groups: Vec::new(),
        };
        let warnings = access_warnings(&def, Isolation::Standard, &user);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].message.contains("mode 0600"), "{warnings:?}");
        assert!(warnings[0].message.contains("read it (r)"), "{warnings:?}");
        assert!(
            warnings[1].message.contains("write in it (-wx)"),
            "{warnings:?}"
        );
        // A path that does not exist yet is not checked.
        let def = definition(&dir.path().join("missing"), &out.join("new"), "standard");
        assert_eq!(
            access_warnings(&def, Isolation::Standard, &user),
            Vec::new()
        );
    }
}

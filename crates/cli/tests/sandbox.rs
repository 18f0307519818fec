//! Command tools through the `toolgate` binary: the issue's `word_count` example from a tools
//! directory, run in a strict sandbox by the binary re-executing itself as the launcher, and the
//! plan capping the isolation a definition may ask for.
#![cfg(test)]

use std::path::Path;

use serde_json::Value;
use toolgate_test_support::cli::Toolgate;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

fn toolgate(dir: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = Toolgate::new(BIN, dir).output(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const WORD_COUNT: &str = r#"
name = "word_count"
description = "Count the words of a text file inside the data folder."
effect = "read"
[[parameters]]
name = "path"
type = "string"
description = "File to count"
required = true
[constraints]
isolation = "strict"
timeout_ms = 2000
[run]
kind = "command"
program = "/usr/bin/wc"
args = ["-w", "{path}"]
output = "text"
[run.sandbox]
read_paths = ["DATA"]
"#;

#[test]
fn word_count_reads_inside_its_read_paths_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(data.join("a.txt"), "three little words\n").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "not for tools\n").unwrap();
    std::fs::write(
        tools.join("word_count.toml"),
        WORD_COUNT.replace("DATA", data.to_str().unwrap()),
    )
    .unwrap();
    let count = |path: &Path| {
        let args = format!("{{\"path\": {:?}}}", path.to_str().unwrap());
        let call = [
            "--tools-dir",
            "tools",
            "call",
            "word_count",
            "--args",
            &args,
            "--json",
        ];
        toolgate(dir.path(), &call)
    };
    let inside = data.join("a.txt");
    let (code, json, err) = count(&inside);
    assert_eq!(code, 0, "{json} {err}");
    assert_eq!(
        json["data"],
        Value::String(format!("3 {}", inside.display())),
        "{json}"
    );

    let (code, json, err) = count(&dir.path().join("secret.txt"));
    assert_eq!(code, 1, "{json} {err}");
    assert_eq!(json["errorKind"], "execution", "{json}");
    let message = json["error"].as_str().unwrap();
    assert!(
        message.contains("exited with code 1") && message.contains("Permission denied"),
        "{message}"
    );
}

#[test]
fn the_plan_caps_the_isolation_a_definition_may_ask_for() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("toolgate.toml"), "plan = \"core\"\n").unwrap();
    let file = dir.path().join("word_count.toml");
    std::fs::write(&file, WORD_COUNT.replace("DATA", "/srv/data")).unwrap();
    let out = Toolgate::new(BIN, dir.path()).with_sqlite("t.db").output([
        "--config",
        "toolgate.toml",
        "tools",
        "validate",
        "word_count.toml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("not allowed by the plan in force"), "{text}");
}

#[test]
fn read_paths_the_sandbox_user_cannot_reach_are_a_validation_warning() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // Only toolgate running as root runs programs as another user (`nobody`); as anyone else
    // the program is toolgate's own user, who owns the temporary directory.
    let as_root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = dir.path().join("private");
    let data = private.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let file = dir.path().join("word_count.toml");
    std::fs::write(&file, WORD_COUNT.replace("DATA", data.to_str().unwrap())).unwrap();
    let validate = |dir: &Path| {
        let out = Toolgate::new(BIN, dir).with_sqlite("t.db").output([
            "tools",
            "validate",
            "word_count.toml",
        ]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = validate(dir.path());
    assert_eq!(code, Some(0), "a warning, not an error: {text}");
    if as_root {
        assert!(text.contains("run.sandbox.read_paths[0]"), "{text}");
        assert!(
            text.contains(&format!(
                "the directory {} has mode 0700",
                private.display()
            )),
            "{text}"
        );
        assert!(text.contains("uid 65534"), "{text}");
    } else {
        eprintln!("not root: programs run as this user, who owns the directory; no warning");
        assert!(!text.contains("run.sandbox.read_paths[0]"), "{text}");
    }
    // Once the directory can be entered, no warning.
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o711)).unwrap();
    let (code, text) = validate(dir.path());
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("run.sandbox.read_paths[0]"), "{text}");
}

//! `toolgate audit verify` shows a cut tail: calls recorded and checkpointed by the CLI, then the
//! newest entry, all entries, and a forged checkpoint row — each reported, exit code 1.
#![cfg(test)]

use std::path::{Path, PathBuf};
use std::process::Output;

use sqlx::Connection;
use toolgate_test_support::cli::Toolgate;
use toolgate_test_support::pg;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn db_path(&self) -> PathBuf {
        self.dir.path().join("state/toolgate.db")
    }

    fn toolgate(&self) -> Toolgate {
        Toolgate::new(BIN, self.dir.path()).with_sqlite("state/toolgate.db")
    }

    fn run(&self, args: &[&str]) -> Output {
        self.toolgate()
            .command()
            .args(args)
            .env("XDG_DATA_HOME", "/home/user/.local/share")
            .output()
            .unwrap()
    }

    /// `audit verify`: its exit code and standard output, the sandbox path replaced.
    fn verify(&self) -> (i32, String) {
        let out = self.run(&["audit", "verify"]);
        let text = String::from_utf8(out.stdout)
            .unwrap()
            .replace(&self.dir.path().display().to_string(), "[SANDBOX]");
        (out.status.code().unwrap(), text)
    }

    fn sql(&self, sql: &'static str) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(self.db_path());
            let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
            sqlx::query(sql).execute(&mut conn).await.unwrap();
            conn.close().await.unwrap();
        });
    }
}

fn call(sb: &Sandbox, expression: &str) {
    let args = format!(r#"{{"expression": "{expression}"}}"#);
    let out = sb.run(&["call", "calculator", "--args", &args]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn audit_verify_reports_a_cut_tail_with_the_missing_range() {
    let sb = Sandbox::new();
    for e in ["1 + 1", "2 * 3", "10 / 4", "7 - 9"] {
        call(&sb, e);
    }
    let key = sb.dir.path().join("state/toolgate.db.audit-key");
    assert!(key.exists(), "the key is generated next to the database");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "only the owner may read the key");
    }
    assert!(Path::new(&format!("{}.audit-checkpoint", sb.db_path().display())).exists());

    let mut transcript = String::new();
    let mut step = |title: &str, sb: &Sandbox, expected: i32| {
        let (code, text) = sb.verify();
        assert_eq!(code, expected, "{title}: {text}");
        transcript.push_str(&format!(
            "$ toolgate audit verify   # {title} (exit {code})\n{text}\n"
        ));
    };
    step("intact", &sb, 0);
    sb.sql("DELETE FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log)");
    step("the newest entry deleted", &sb, 1);
    sb.sql("DELETE FROM audit_log WHERE seq > 1");
    step("all but the first deleted", &sb, 1);
    sb.sql("DELETE FROM audit_log");
    sb.sql("DELETE FROM audit_checkpoints");
    step("every entry and every checkpoint row deleted", &sb, 1);
    sb.sql(
        "INSERT INTO audit_checkpoints (seq, hash, at, mac) VALUES (9, \
         '0000000000000000000000000000000000000000000000000000000000000000', \
         '2026-11-26T00:00:00.000000Z', 'ffff')",
    );
    step("a forged checkpoint row added", &sb, 1);
    insta::assert_snapshot!(transcript);
}

#[test]
fn postgres_without_a_checkpoint_key_is_refused_naming_the_settings() {
    // PostgreSQL without a key is refused before connecting, naming the settings.
    let sb = Sandbox::new();
    let out = sb
        .toolgate()
        .with_db("postgres://nobody@127.0.0.1:1/none")
        .output(["audit", "verify"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[audit] key_file") && err.contains("TOOLGATE_AUDIT_KEY"),
        "{err}"
    );
}

#[test]
fn on_postgres_a_key_file_anchors_the_log_and_a_cut_is_found() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let Some(pg) = rt.block_on(pg::available("this test")) else {
        return;
    };
    let schema = pg::unique_schema("tg_cli_audit");
    rt.block_on(pg::create_schema(&pg, &schema)).unwrap();
    let sql = |sql: String| {
        rt.block_on(async {
            let mut conn = sqlx::PgConnection::connect(&pg).await?;
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await?;
            conn.close().await
        })
    };
    let sb = Sandbox::new();
    std::fs::write(
        sb.dir.path().join("toolgate.toml"),
        "[audit]\nkey_file = \"secrets/audit-key\"\n",
    )
    .unwrap();
    let toolgate = sb.toolgate().with_db(pg::with_search_path(&pg, &schema));
    let run = |args: &[&str]| {
        let out = toolgate.output(["--config", "toolgate.toml"].iter().chain(args));
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for e in ["1 + 1", "2 + 2", "3 + 3"] {
        let (code, _, err) = run(&[
            "call",
            "calculator",
            "--args",
            &format!(r#"{{"expression": "{e}"}}"#),
        ]);
        assert_eq!(code, 0, "{err}");
    }
    assert!(sb.dir.path().join("secrets/audit-key").exists());
    assert!(sb.dir.path().join("secrets/audit-key.checkpoint").exists());
    let (code, out, err) = run(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("ok: 3 audit entries") && out.contains("checkpoint at entry 3"),
        "{out}"
    );
    sql(format!("DELETE FROM \"{schema}\".audit_log")).unwrap();
    sql(format!("DELETE FROM \"{schema}\".audit_checkpoints")).unwrap();
    let (code, out, _) = run(&["audit", "verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("audit log cut: entries 1–3 are missing") && out.contains("head now 0"),
        "{out}"
    );
    rt.block_on(pg::drop_schema(&pg, &schema));
}

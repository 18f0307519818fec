//! The kill test: a child process runs side-effecting calls through the audited pipeline in an
//! endless loop and is killed with SIGKILL at random moments, many times; afterwards every side
//! effect that happened must have its `started` audit entry, and the chain must verify.
//!
//! The kill delays come from a xorshift generator seeded from the clock; the seed is printed, and
//! `TOOLGATE_KILL_SEED=<seed>` replays the same delays.
#![cfg(test)]

mod common;

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::TestDb;
use serde_json::json;
use toolgate_core::{
    CallId, CallRequest, Effect, PipelineBuilder, Registry, ToolBuilder, ToolError,
};
use toolgate_store::{AuditObserver, AuditQuery, AuditStage, DbUrl, Store, StoreOptions};

/// Set in the child to `url|schema|side-effect file`.
const CHILD_ENV: &str = "TOOLGATE_STORE_TEST_KILL";
/// Replays a run's kill delays.
const SEED_ENV: &str = "TOOLGATE_KILL_SEED";
/// The child prints this once its store is open and its first call has completed.
const READY: &str = "TOOLGATE_KILL_CHILD_READY";
const CHILD_TEST: &str = "child_runs_side_effects_until_killed";
/// Kills per backend.
const ROUNDS: u32 = 30;
/// Random delay between the child being ready and its kill.
const MIN_DELAY_MS: u64 = 20;
const MAX_DELAY_MS: u64 = 300;
const TOOL: &str = "append_line";

/// xorshift64* — enough randomness for kill delays, reproducible from its seed.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn seed() -> u64 {
    if let Ok(raw) = std::env::var(SEED_ENV) {
        return raw
            .parse()
            .expect("TOOLGATE_KILL_SEED must be an unsigned integer");
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    // fold in the pid so two backends started in the same nanosecond differ
    (nanos as u64) ^ (u64::from(std::process::id()) << 32)
}

/// The side-effecting tool: appends its call id and a newline to `file` (opened with
/// `O_APPEND`) and fsyncs before returning.
fn append_tool(file: Arc<File>) -> toolgate_core::FnTool {
    ToolBuilder::new(
        TOOL,
        "Appends a line to the journal file. Use when the user asks to record something.",
    )
    .effect(Effect::SideEffect)
    .requires_confirmation(false)
    .handler(move |_args, ctx| {
        let file = Arc::clone(&file);
        async move {
            let line = format!("{}\n", ctx.call_id());
            let io = |e: std::io::Error| ToolError::execution(format!("journal: {e}"));
            (&*file).write_all(line.as_bytes()).map_err(io)?;
            file.sync_all().map_err(io)?;
            Ok(json!({"appended": true}))
        }
    })
}

/// Not a test on its own: when re-run as a child process with `TOOLGATE_STORE_TEST_KILL` set, it
/// opens the store, then calls the side-effecting tool through the audited pipeline until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_runs_side_effects_until_killed() {
    let Ok(target) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = target.splitn(3, '|');
    let (url, schema, journal) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let options = StoreOptions {
        pg_schema: (!schema.is_empty()).then(|| schema.to_owned()),
        ..StoreOptions::default()
    };
    let store = Store::open(&DbUrl::parse(url).unwrap(), &options)
        .await
        .unwrap();
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(journal)
        .unwrap();
    let registry = Arc::new(Registry::new());
    registry
        .register(Arc::new(append_tool(Arc::new(file))))
        .unwrap();
    let pipeline = PipelineBuilder::new(registry)
        .stage(Arc::new(AuditStage::new(store.clone())))
        .observer(Arc::new(AuditObserver::new(store.clone())))
        .build();
    let mut ready = false;
    loop {
        let result = pipeline.call(CallRequest::new(TOOL, json!({}))).await;
        assert!(result.is_ok(), "every call must succeed: {result:?}");
        if !ready {
            ready = true;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{READY}").unwrap();
            out.flush().unwrap();
        }
    }
}

/// Starts the child and waits until it has completed its first call.
fn start_child(exe: &Path, target: &str, stderr_file: &Path) -> Child {
    let mut child = Command::new(exe)
        .args(["--exact", CHILD_TEST, "--test-threads=1", "--nocapture"])
        .env(CHILD_ENV, target)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(File::create(stderr_file).unwrap()))
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest prints "test NAME ... " without a newline before the test's own output
            if line.contains(READY) {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        let status = child.wait().unwrap();
        panic!(
            "the child never became ready ({status}); its stderr:\n{}",
            std::fs::read_to_string(stderr_file).unwrap_or_default()
        );
    }
    child
}

/// Call ids in the side-effect file, in order; a torn last line (no newline) is ignored.
fn side_effects(journal: &Path) -> Vec<CallId> {
    let text = std::fs::read_to_string(journal).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    complete
        .lines()
        .map(|l| CallId::parse(l).unwrap_or_else(|e| panic!("bad journal line {l:?}: {e}")))
        .collect()
}

async fn kill_loop(url: DbUrl, options: StoreOptions, dir: &Path) {
    let seed = seed();
    eprintln!(
        "-- kill test on {}: seed {seed} (replay with {SEED_ENV}={seed})",
        url.backend()
    );
    let mut rng = XorShift::new(seed);
    let journal: PathBuf = dir.join("side_effects.log");
    let stderr_file = dir.join("child.stderr");
    let raw = match &url {
        DbUrl::Sqlite(p) => format!("sqlite:{}", p.display()),
        DbUrl::Postgres(u) => u.clone(),
    };
    let target = format!(
        "{raw}|{}|{}",
        options.pg_schema.clone().unwrap_or_default(),
        journal.display()
    );
    let exe = std::env::current_exe().unwrap();
    let began = Instant::now();
    for round in 0..ROUNDS {
        let mut child = start_child(&exe, &target, &stderr_file);
        let delay = rng.between(MIN_DELAY_MS, MAX_DELAY_MS);
        std::thread::sleep(Duration::from_millis(delay));
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "round {round} (seed {seed}): the child stopped by itself ({status}); its stderr:\n{}",
                std::fs::read_to_string(&stderr_file).unwrap_or_default()
            );
        }
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "round {round} (seed {seed}): the child was not killed but ended with {status}; its stderr:\n{}",
            std::fs::read_to_string(&stderr_file).unwrap_or_default()
        );
    }
    let killing = began.elapsed();

    let store = Store::open(&url, &options).await.unwrap();
    let effects = side_effects(&journal);
    let unique: HashSet<CallId> = effects.iter().copied().collect();
    assert_eq!(unique.len(), effects.len(), "a call ran its effect twice");
    assert!(!effects.is_empty(), "no side effect happened at all");

    // every side effect has its durable `started` entry
    let mut effect_finished = 0u64;
    for id in &effects {
        let call = store.audit_call(*id).await.unwrap().unwrap_or_else(|| {
            panic!("seed {seed}: side effect of call {id} has no audit entry at all")
        });
        let started = call.started.as_ref().unwrap_or_else(|| {
            panic!("seed {seed}: side effect of call {id} has no `started` audit entry")
        });
        assert_eq!(started.tool, TOOL);
        if call.finished.is_some() {
            effect_finished += 1;
        }
    }
    // conversely, every call recorded as finished (successfully) had its effect
    let mut finished = 0u64;
    let mut before = None;
    loop {
        let page = store
            .audit(&AuditQuery {
                tool: None,
                limit: 1000,
                before,
            })
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        before = last.seq;
        for record in &page {
            assert!(record.error_kind().is_none(), "{record:?}");
            assert!(
                unique.contains(&record.call_id),
                "seed {seed}: call {} is recorded as finished but its effect is not in the file",
                record.call_id
            );
            finished += 1;
        }
    }
    assert_eq!(finished, effect_finished);

    let report = store.verify().await.unwrap();
    assert!(
        report.ok,
        "seed {seed}: the chain is broken after kills: {report:?}"
    );
    store.close().await;

    let db = TestDb {
        store,
        url: url.clone(),
        options: options.clone(),
        dir: None,
    };
    let started = db
        .count("SELECT COUNT(*) FROM audit_log WHERE kind = 'started'")
        .await;
    let interrupted = db
        .count(
            "SELECT COUNT(*) FROM audit_log s WHERE s.kind = 'started' AND NOT EXISTS \
             (SELECT 1 FROM audit_log f WHERE f.kind = 'finished' AND f.call_id = s.call_id)",
        )
        .await;
    let started = u64::try_from(started).unwrap();
    let interrupted = u64::try_from(interrupted).unwrap();
    let effects_n = effects.len() as u64;
    // calls run one after another, so each kill interrupts at most one call
    assert!(
        interrupted <= u64::from(ROUNDS),
        "{interrupted} interrupted calls"
    );
    assert_eq!(started, finished + interrupted);
    assert_eq!(report.entries, started + finished);
    eprintln!(
        "-- kill test on {} (seed {seed}): {ROUNDS} kills in {:.1} s; {effects_n} side effects, \
         {started} started entries, {finished} calls finished, {interrupted} interrupted \
         (started without finished: {} of them with their effect done, {} killed before it); \
         chain of {} entries verified",
        url.backend(),
        killing.as_secs_f64(),
        effects_n - effect_finished,
        started - effects_n,
        report.entries,
    );
    if let (DbUrl::Postgres(raw), Some(schema)) = (&url, &options.pg_schema) {
        common::drop_schema(raw, schema).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_never_hides_a_side_effect_sqlite() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let (url, options, dir) = common::sqlite_target();
    kill_loop(url, options, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_never_hides_a_side_effect_postgres() {
    if std::env::var(CHILD_ENV).is_ok() || !common::postgres_available().await {
        return;
    }
    let (url, options) = common::postgres_target();
    let dir = tempfile::tempdir().unwrap();
    kill_loop(url, options, dir.path()).await;
}

//! The Redis that tests and benchmarks use: where it is, a key prefix of their own per run, and
//! what happens when it is not there — the rule of [`crate::pg`]: a missing server skips the
//! Redis part of a test with a note on stderr, and fails the test with `CI=true`.
//!
//! The server is [`DEFAULT_URL`] (no persistence needed: every test uses keys under its own
//! [`unique_prefix`], which expire by themselves) unless [`URL_VAR`] names another one.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The tests' Redis when [`URL_VAR`] is not set.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The environment variable that points the tests at another Redis (a plain `redis://HOST:PORT`
/// without password: [`available`] checks it with an inline PING).
pub const URL_VAR: &str = "TOOLGATE_TEST_REDIS_URL";

/// The URL of the tests' Redis: [`URL_VAR`] when set and not empty, else [`DEFAULT_URL`].
pub fn url() -> String {
    match std::env::var(URL_VAR) {
        Ok(value) if !value.trim().is_empty() => value,
        _ => DEFAULT_URL.to_owned(),
    }
}

/// Sends PING to the `redis://HOST:PORT` at `url` and reads the answer: whether Redis answers
/// there (no client library: this crate stays small).
///
/// # Errors
///
/// What went wrong, as a sentence.
pub fn reachable(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("redis://")
        .ok_or_else(|| format!("{url} is not a redis:// URL"))?;
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let addr = authority
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority} resolves to no address"))?;
    let timeout = Duration::from_secs(2);
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("cannot connect: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"PING\r\n")
        .map_err(|e| format!("cannot send PING: {e}"))?;
    let mut answer = [0u8; 64];
    let n = stream
        .read(&mut answer)
        .map_err(|e| format!("no answer to PING: {e}"))?;
    if answer[..n].starts_with(b"+PONG") {
        Ok(())
    } else {
        Err(format!(
            "PING answered {:?}",
            String::from_utf8_lossy(&answer[..n]).trim_end()
        ))
    }
}

/// The tests' Redis URL ([`url`]) when the server answers there. When it does not, `None` after
/// a note on stderr that `what` is skipped — or, with `CI=true` ([`crate::pg::required`]), a
/// panic that fails the test.
///
/// # Panics
///
/// With `CI=true`, when Redis is unreachable.
pub fn available(what: &str) -> Option<String> {
    let url = url();
    match reachable(&url) {
        Ok(()) => Some(url),
        Err(e) => {
            assert!(
                !crate::pg::required(),
                "Redis at {url} is required in CI (CI=true) but unreachable: {e}; start it \
                 (scripts/test.sh does) or point {URL_VAR} at one"
            );
            eprintln!(
                "note: skipping {what}: Redis at {url} is unreachable: {e} (start it, or point \
                 {URL_VAR} at one)"
            );
            None
        }
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A key prefix no other test, process or run uses: `tg-test:NAME:PID:N:NANOS:`.
pub fn unique_prefix(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "tg-test:{name}:{}:{}:{nanos}:",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

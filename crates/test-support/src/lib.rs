//! Helpers shared by toolgate's tests and benchmarks, in one crate so that every test suite
//! follows the same rules (as codex-rs keeps `core_test_support`).
//!
//! - [`pg`]: the PostgreSQL the tests use — its URL ([`pg::url`], overridable with
//!   `TOOLGATE_TEST_PG_URL`), a schema of their own per run, and the rule for a missing server:
//!   skipped with a note, or a failure when `CI=true`.
//! - [`redis`]: the Redis the tests use — its URL ([`redis::url`], overridable with
//!   `TOOLGATE_TEST_REDIS_URL`), a key prefix of their own per run, and the same rule for a
//!   missing server.
//! - `quota` (feature `quota`): the scenarios every shared quota counter (PostgreSQL, Redis)
//!   must pass, written once.
//! - `server` (feature `server`, for toolgate-server's tests): a gateway over the production
//!   runtime (sandbox executor, policy client and all) on a temporary SQLite or PostgreSQL
//!   store, requests through the real router, replies checked against the OpenAPI document.
//! - [`mcp_fixtures`]: the real MCP servers the gateway's tests run as upstreams (the official
//!   everything and filesystem servers from npm, a Python server on the official `mcp` SDK),
//!   with the same skip-or-fail rule as PostgreSQL's.
//! - `fake_llm` (feature `fake-llm`): fake OpenAI Chat Completions and Anthropic Messages APIs
//!   on 127.0.0.1 that check requests as the real APIs do and play a scripted model, for the
//!   agent loop's tests.
//! - [`cli`]: one way to run the `toolgate` binary, isolated from the environment of whoever
//!   runs the tests (every `TOOLGATE_*` variable and `RUST_LOG` removed).
//!
//! It is a dev-dependency only (`publish = false`). A harness that needs more of the workspace
//! (a runtime or server harness) goes in a module of its own here, with the crates it needs
//! added as dependencies of this crate. Cargo allows the resulting dev-dependency cycle (the
//! server's tests use this crate, this crate uses the server); use such a module from
//! integration tests and benchmarks only, where both see the same build of the crate under test
//! (a unit test's `#[cfg(test)]` build of that crate is a different one, with distinct types).
//!
//! The helpers panic with a message that names what failed and how to fix it: they run inside
//! tests, where a panic is the failure report.

#![warn(missing_docs, unreachable_pub)]

pub mod cli;
#[cfg(feature = "fake-llm")]
pub mod fake_llm;
pub mod mcp_fixtures;
pub mod pg;
#[cfg(feature = "quota")]
pub mod quota;
pub mod redis;
#[cfg(feature = "server")]
pub mod server;

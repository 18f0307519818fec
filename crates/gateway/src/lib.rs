//! toolgate-gateway: the MCP servers users already run, governed by toolgate.
//!
//! An upstream server is declared by a [`ServerEntry`] (stdio: an absolute program and its
//! arguments, run in the sandbox; or a Streamable HTTP URL, reached through the network policy).
//! Its tools become toolgate tools named `SERVER__TOOL` ([`naming`]), governed by the entry's
//! defaults and per-tool overrides ([`govern`]), and pinned by a definition hash ([`pin`]): a
//! tool whose definition changes after it was approved is withheld until a person approves the
//! new version. [`upstream`] holds the client side: connections, their lifecycle and the
//! forwarding of calls.
//!
//! The crate knows no SQL and no front-end: the runtime keeps pins and entries in the store and
//! registers the tools; the CLI, REST and the web UI present them.

#![warn(missing_docs, unreachable_pub)]

pub mod config;
mod error;
pub mod govern;
pub mod import;
pub mod naming;
pub mod pin;
pub mod upstream;

pub use config::{ServerEntry, ServerName};
pub use error::{GatewayError, GatewayErrorKind};
pub use pin::UpstreamTool;

//! toolgate's runtime: the one place that assembles a working toolgate (store, registry with its
//! run kinds, the production call pipeline) and the use cases every front-end offers. It knows
//! no transport: the CLI and the server parse, authenticate and present; the runtime does.
//!
//! Use cases so far: [`definitions`] (add, update, remove a custom definition), [`decide`]
//! (approve, deny, run an approved call) and [`views`] (the typed list and show views whose JSON
//! is the one shape the CLI's `--json`, the REST API and the web UI share). Their refusals are
//! [`OpError`]s.

pub mod decide;
pub mod definitions;
mod op_error;
pub mod views;

pub use op_error::{OpError, OpErrorKind};

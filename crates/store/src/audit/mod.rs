//! The audit log: append-only entries in one SHA-256 hash chain, plus large outputs kept apart.
//!
//! Each entry is `started` (written before a write/delete/side_effect call runs) or `finished`
//! (every call's outcome). `hash = SHA-256(prev_hash || canonical JSON of the entry's content)`,
//! where the content is every stored column except `prev_hash` and `hash` (and includes `seq`),
//! and the first entry's `prev_hash` is 64 zeros. Appends are serialized by the store's write lock,
//! so the chain cannot fork. A `finished` entry whose output was stored apart carries the
//! output's SHA-256, so [`Store::verify`] also detects an altered or removed output. Content
//! blocks a call returned beside its data (images, audio, resources) are kept as digests (kind,
//! MIME type or URI, size, SHA-256), which the hash covers too; entries without content hash
//! exactly as they did before digests existed.
//!
//! The module is cut by job: `record` holds the entry types (what callers write and read, and
//! the stored row they become), `chain` hashes and links entries and verifies the chain, `query`
//! reads and filters the log, `writer` is the group-commit writer every append goes through,
//! `outputs` keeps large outputs apart, `gateway` records the MCP gateway's events (a tool
//! quarantined, a definition approved) as ordinary entries, and `hooks` plugs the log into the call pipeline
//! ([`AuditStage`], [`AuditObserver`]).

mod chain;
mod gateway;
mod hooks;
mod outputs;
mod query;
mod record;
mod writer;

pub use chain::{BrokenLink, VerifyReport};
pub use gateway::{GATEWAY_PRINCIPAL, GATEWAY_VIA, GatewayAudit};
pub use hooks::{AuditObserver, AuditStage, LARGE_OUTPUT_BYTES};
pub use query::AuditQuery;
pub use record::{AuditCall, AuditRecord, AuditStart, ContentDigest};

pub(crate) use chain::hex;
pub(crate) use writer::AuditWriter;

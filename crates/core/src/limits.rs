//! Defaults and allowed ranges for constraints (`docs/tool-model.md#constraints`).

/// Default per-attempt timeout.
pub const DEFAULT_TIMEOUT_MS: u64 = 15_000;
/// Shortest allowed timeout: 1 s.
pub const MIN_TIMEOUT_MS: u64 = 1_000;
/// Longest allowed timeout: 10 min.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Default output cap: 10 MiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 10 * 1024 * 1024;
/// Smallest allowed output cap: 1 KiB.
pub const MIN_OUTPUT_BYTES: u64 = 1024;
/// Largest allowed output cap: 100 MiB.
pub const MAX_OUTPUT_BYTES: u64 = 100 * 1024 * 1024;
/// Default number of attempts for retryable failures.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Most attempts a tool may ask for.
pub const MAX_ATTEMPTS: u32 = 10;
/// Longest description.
pub const MAX_DESCRIPTION_LEN: usize = 1024;
/// Descriptions shorter than this get a warning: they rarely route a model well.
pub const SHORT_DESCRIPTION_LEN: usize = 20;

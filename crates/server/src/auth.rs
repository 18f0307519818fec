//! Who is calling: a bearer token's SHA-256 names a principal id, and the runtime's principals
//! say who that is (grants, plan); with no principals configured, every request is the one
//! local principal (the server is then bound to loopback).

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use toolgate_core::{Principal, Quota};
use toolgate_runtime::Principals;
use toolgate_store::Tier;

use crate::error::ServerError;

/// A principal with the SHA-256 of its bearer token, for [`crate::GatewayOptions`]: the
/// runtime's part (identity, grants, plan, quota) and the server's (the token).
#[derive(Clone, Debug)]
pub struct PrincipalEntry {
    /// Identity and grants.
    pub principal: Principal,
    /// SHA-256 of the bearer token; `None` for principals that cannot sign in over HTTP.
    pub token_sha256: Option<[u8; 32]>,
    /// The plan it calls under.
    pub plan: Tier,
    /// Its rate and concurrency limits.
    pub quota: Quota,
}

/// The SHA-256 of each principal's bearer token, by principal id.
pub type TokenHashes = Vec<(String, [u8; 32])>;

/// The runtime's principals in `entries` (under `default_plan`) and their token hashes by
/// principal id.
pub(crate) fn split_entries(
    entries: Vec<PrincipalEntry>,
    default_plan: Tier,
) -> Result<(Principals, TokenHashes), ServerError> {
    let mut tokens = Vec::new();
    let mut runtime_entries = Vec::with_capacity(entries.len());
    for p in entries {
        if let Some(hash) = p.token_sha256 {
            tokens.push((p.principal.id.as_str().to_owned(), hash));
        }
        runtime_entries.push(toolgate_runtime::PrincipalEntry {
            principal: p.principal,
            plan: p.plan,
            quota: p.quota,
        });
    }
    Ok((Principals::new(runtime_entries, default_plan)?, tokens))
}

/// The authenticated caller of one request.
#[derive(Debug)]
pub struct Caller {
    /// The principal, the built-ins outside its plan hidden from it.
    pub principal: Arc<Principal>,
    /// The plan it calls under.
    pub plan: Tier,
}

impl Caller {
    /// `principal` calling under `plan`: the built-ins the plan leaves out do not exist for it.
    pub fn new(principal: Principal, plan: Tier) -> Self {
        Self {
            principal: Arc::new(plan.restrict(principal)),
            plan,
        }
    }

    /// Whether the caller may see (and so call) the tool; tools it may not see — outside its
    /// tool list, or built-ins its plan leaves out — are reported as not found, never as
    /// forbidden, so their existence does not leak.
    pub fn sees(&self, tool: &str) -> bool {
        self.principal.may_call(tool)
    }
}

/// The SHA-256 of a token, as stored in the config file (`token_sha256`).
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Parses 64 hex digits into a SHA-256 digest.
pub fn parse_token_hash(hex: &str) -> Result<[u8; 32], String> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "token_sha256 must be 64 hex digits (the SHA-256 of the token), got {} characters",
            hex.len()
        ));
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .map_err(|_| "token_sha256 must be hex digits".to_owned())?;
    }
    Ok(out)
}

/// Resolves requests to callers: token hash to the runtime's principal of that id.
#[derive(Debug)]
pub struct Auth {
    by_token: HashMap<[u8; 32], Arc<Caller>>,
    /// Set when no principal is configured (loopback only): everyone is this caller.
    open: Option<Arc<Caller>>,
}

impl Auth {
    /// Matches `tokens` (principal id, SHA-256 of its token) to the runtime's `principals`;
    /// with no principals, every request is the local principal (the caller ensures loopback).
    /// A token for an unknown principal, or one token for two principals, is refused.
    pub fn new(
        principals: &Principals,
        tokens: &[(String, [u8; 32])],
    ) -> Result<Self, ServerError> {
        if let Some(local) = principals.local() {
            return Ok(Self {
                by_token: HashMap::new(),
                open: Some(Arc::new(Caller::new(
                    local.principal.clone(),
                    local.plan.clone(),
                ))),
            });
        }
        let mut by_token = HashMap::new();
        for (id, hash) in tokens {
            let Some(entry) = principals.get(id) else {
                return Err(ServerError::BadRequest(format!(
                    "A token_sha256 names principal {id}, which is not configured; define it under [principals.{id}]"
                )));
            };
            let caller = Arc::new(Caller::new(entry.principal.clone(), entry.plan.clone()));
            if by_token.insert(*hash, caller).is_some() {
                return Err(ServerError::BadRequest(format!(
                    "Two principals share one token (principal {id} repeats a token_sha256); give each principal its own token"
                )));
            }
        }
        Ok(Self {
            by_token,
            open: None,
        })
    }

    /// From entries that carry both parts (see [`PrincipalEntry`]): the runtime's principals
    /// under `default_plan` and their tokens.
    pub fn from_entries(
        entries: &[PrincipalEntry],
        default_plan: &Tier,
    ) -> Result<Self, ServerError> {
        let (principals, tokens) = split_entries(entries.to_vec(), default_plan.clone())?;
        Self::new(&principals, &tokens)
    }

    /// Whether requests need a token.
    pub fn requires_token(&self) -> bool {
        self.open.is_none()
    }

    /// The caller of a request, from its `Authorization: Bearer` header.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Arc<Caller>, ServerError> {
        if let Some(open) = &self.open {
            return Ok(Arc::clone(open));
        }
        let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
            return Err(ServerError::Unauthenticated(
                "Missing bearer token: send `Authorization: Bearer TOKEN` with a token configured for a principal".into(),
            ));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ServerError::Unauthenticated(
                    "Malformed Authorization header: use `Authorization: Bearer TOKEN`".into(),
                )
            })?;
        self.by_token
            .get(&token_hash(token))
            .cloned()
            .ok_or_else(|| {
                ServerError::Unauthenticated(
                    "Invalid bearer token: it matches no principal's token_sha256 in the config file".into(),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_hash_round_trips_through_hex() {
        let h = token_hash("s3cret");
        let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(parse_token_hash(&hex).unwrap(), h);
        assert!(parse_token_hash("abc").is_err());
        assert!(parse_token_hash(&"zz".repeat(32)).is_err());
    }
}

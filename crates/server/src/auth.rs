//! Who is calling: bearer tokens matched by their SHA-256 against the configured principals,
//! or the one local principal when the server is bound to loopback with no principals.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use toolgate_core::{Principal, Quota};
use toolgate_store::Plan;

use crate::error::ServerError;

/// A principal as the server knows it: identity and grants, the SHA-256 of its bearer token,
/// its plan and its quota.
#[derive(Clone, Debug)]
pub struct PrincipalEntry {
    pub principal: Principal,
    /// SHA-256 of the bearer token; `None` for principals that cannot sign in over HTTP.
    pub token_sha256: Option<[u8; 32]>,
    pub plan: Plan,
    pub quota: Quota,
}

/// The authenticated caller of one request.
#[derive(Debug)]
pub struct Caller {
    pub principal: Arc<Principal>,
    pub plan: Plan,
}

impl Caller {
    /// `principal` calling under `plan`: the built-ins the plan leaves out do not exist for it.
    pub fn new(principal: Principal, plan: Plan) -> Self {
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

/// Resolves requests to callers.
#[derive(Debug)]
pub struct Auth {
    by_token: HashMap<[u8; 32], Arc<Caller>>,
    /// Every configured principal by id (those without a token too).
    by_id: HashMap<String, Arc<Caller>>,
    /// Set when no principal is configured (loopback only): everyone is this caller.
    open: Option<Arc<Caller>>,
}

impl Auth {
    /// With no principals, every request is the local principal (the caller ensures loopback).
    pub fn new(principals: &[PrincipalEntry], default_plan: &Plan) -> Result<Self, ServerError> {
        if principals.is_empty() {
            return Ok(Self {
                by_token: HashMap::new(),
                by_id: HashMap::new(),
                open: Some(Arc::new(Caller::new(
                    Principal::local(),
                    default_plan.clone(),
                ))),
            });
        }
        let mut by_token = HashMap::new();
        let mut by_id = HashMap::new();
        for entry in principals {
            let caller = Arc::new(Caller::new(entry.principal.clone(), entry.plan.clone()));
            by_id.insert(entry.principal.id.as_str().to_owned(), Arc::clone(&caller));
            let Some(hash) = entry.token_sha256 else {
                continue;
            };
            if by_token.insert(hash, caller).is_some() {
                return Err(ServerError::BadRequest(format!(
                    "Two principals share one token (principal {} repeats a token_sha256); give each principal its own token",
                    entry.principal.id
                )));
            }
        }
        Ok(Self {
            by_token,
            by_id,
            open: None,
        })
    }

    /// The caller named `id` as configured now (the local principal in open local mode), for
    /// running an approved call with the principal's current grants.
    pub fn caller_by_id(&self, id: &str) -> Option<Arc<Caller>> {
        match &self.open {
            Some(open) if open.principal.id.as_str() == id => Some(Arc::clone(open)),
            Some(_) => None,
            None => self.by_id.get(id).cloned(),
        }
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

//! The configured principals as the runtime knows them: identity and grants, plan and quota.
//! Quotas come from here, and so do the grants an approved call runs with ("as configured
//! now"). How a principal signs in (a bearer token's hash) is the server's business.

use std::collections::HashMap;
use std::sync::Arc;

use toolgate_core::{Principal, Quota};
use toolgate_store::Tier;

use crate::error::RuntimeError;

/// One configured principal: who it is and what it may do, the plan it calls under and its
/// quota.
#[derive(Clone, Debug)]
pub struct PrincipalEntry {
    /// Identity and grants.
    pub principal: Principal,
    /// The plan it calls under (the built-ins outside it do not exist for it).
    pub plan: Tier,
    /// Its rate and concurrency limits.
    pub quota: Quota,
}

impl PrincipalEntry {
    /// The principal as it calls: the built-ins its plan leaves out hidden from it.
    pub fn restricted(&self) -> Principal {
        self.plan.restrict(self.principal.clone())
    }
}

/// Every configured principal by id, or — when none is configured — the one local principal
/// with every permission under the default plan (front-ends then serve loopback only).
#[derive(Clone, Debug)]
pub struct Principals {
    by_id: HashMap<String, Arc<PrincipalEntry>>,
    /// In configuration order.
    order: Vec<Arc<PrincipalEntry>>,
    /// Set when no principal is configured: everyone is this one.
    local: Option<Arc<PrincipalEntry>>,
    default_plan: Tier,
}

impl Principals {
    /// `entries` (none means the local principal under `default_plan`). Two entries with one id
    /// are refused.
    pub fn new(entries: Vec<PrincipalEntry>, default_plan: Tier) -> Result<Self, RuntimeError> {
        let local = entries.is_empty().then(|| {
            Arc::new(PrincipalEntry {
                principal: Principal::local(),
                plan: default_plan.clone(),
                quota: Quota::default(),
            })
        });
        let mut by_id = HashMap::new();
        let mut order = Vec::with_capacity(entries.len());
        for entry in entries {
            let entry = Arc::new(entry);
            let id = entry.principal.id.as_str().to_owned();
            if by_id.insert(id.clone(), Arc::clone(&entry)).is_some() {
                return Err(RuntimeError::Config(format!(
                    "Principal {id} is configured twice; give each principal its own id"
                )));
            }
            order.push(entry);
        }
        Ok(Self {
            by_id,
            order,
            local,
            default_plan,
        })
    }

    /// Whether no principal is configured (everyone is the local principal).
    pub fn is_open(&self) -> bool {
        self.local.is_some()
    }

    /// The local principal, when no principal is configured.
    pub fn local(&self) -> Option<&Arc<PrincipalEntry>> {
        self.local.as_ref()
    }

    /// The principal named `id` as configured now (the local principal when none is
    /// configured), or `None` when no such principal exists.
    pub fn get(&self, id: &str) -> Option<Arc<PrincipalEntry>> {
        match &self.local {
            Some(local) if local.principal.id.as_str() == id => Some(Arc::clone(local)),
            Some(_) => None,
            None => self.by_id.get(id).cloned(),
        }
    }

    /// The configured principals in configuration order (none in open local mode).
    pub fn iter(&self) -> impl Iterator<Item = &Arc<PrincipalEntry>> {
        self.order.iter()
    }

    /// The plan for callers without one of their own.
    pub fn default_plan(&self) -> &Tier {
        &self.default_plan
    }

    /// Each configured principal's quota, by id (for the quota stage).
    pub fn quotas(&self) -> impl Iterator<Item = (String, Quota)> + '_ {
        self.order
            .iter()
            .map(|e| (e.principal.id.as_str().to_owned(), e.quota))
    }
}

#[cfg(test)]
mod tests {
    use toolgate_core::PrincipalId;

    use super::*;

    fn entry(id: &str) -> PrincipalEntry {
        PrincipalEntry {
            principal: Principal::new(PrincipalId::parse(id).unwrap()),
            plan: Tier::named("enterprise").unwrap(),
            quota: Quota::default(),
        }
    }

    #[test]
    fn no_principals_means_the_local_one_and_configured_ones_are_found_by_id() {
        let enterprise = Tier::named("enterprise").unwrap();
        let open = Principals::new(Vec::new(), enterprise.clone()).unwrap();
        assert!(open.is_open());
        assert!(open.get("local").is_some());
        assert!(open.get("alice").is_none());
        let configured =
            Principals::new(vec![entry("alice"), entry("bob")], enterprise.clone()).unwrap();
        assert!(!configured.is_open());
        assert!(configured.get("alice").is_some());
        assert!(configured.get("local").is_none());
        assert_eq!(configured.quotas().count(), 2);
        assert!(Principals::new(vec![entry("alice"), entry("alice")], enterprise).is_err());
    }
}

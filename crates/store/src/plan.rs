//! Plans (seed 003 §3.2's license tiers, made general): limits on custom definitions and on the
//! strongest isolation level a definition may ask for.

use serde::Serialize;
use toolgate_core::Isolation;

/// A named plan. The plan in force comes from the configuration file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub name: String,
    /// Most live custom definitions; `None` is unlimited.
    pub max_custom_definitions: Option<u64>,
    /// Strongest isolation level a definition may require (feed it to validation's `Env`).
    pub max_isolation: Isolation,
}

/// The built-in plans, weakest first: (name, custom definitions, strongest isolation).
const PLANS: [(&str, Option<u64>, Isolation); 4] = [
    ("core", Some(0), Isolation::Standard),
    ("writer_pro", Some(10), Isolation::Standard),
    ("teams", Some(50), Isolation::Strict),
    ("enterprise", None, Isolation::Restricted),
];

impl Plan {
    /// The names [`Plan::named`] knows, weakest first.
    pub const NAMES: [&'static str; 4] = ["core", "writer_pro", "teams", "enterprise"];

    /// One of the seed's tiers: `core` (0 custom definitions, isolation up to standard),
    /// `writer_pro` (10, standard), `teams` (50, strict), `enterprise` (unlimited, restricted).
    pub fn named(name: &str) -> Option<Plan> {
        PLANS
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|&(n, max, iso)| Plan {
                name: n.to_owned(),
                max_custom_definitions: max,
                max_isolation: iso,
            })
    }

    /// The message of a refused insert: names the plan, its limit and how to change it.
    pub(crate) fn limit_message(&self, limit: u64) -> String {
        let upgrade = PLANS
            .iter()
            .find(|(_, max, _)| max.is_none_or(|m| m > limit))
            .map(|(n, max, _)| match max {
                Some(m) => format!("set `plan = \"{n}\"` ({m}) or higher in the config file"),
                None => format!("set `plan = \"{n}\"` (unlimited) in the config file"),
            })
            .unwrap_or_else(|| "choose a plan with a higher limit in the config file".to_owned());
        let allowed = if limit == 0 {
            "does not allow custom tool definitions".to_owned()
        } else {
            format!("allows at most {limit} custom tool definitions, and that many exist")
        };
        format!(
            "The `{}` plan {allowed}; remove one with `toolgate tools rm NAME`, or {upgrade}",
            self.name
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn seed_table() {
        let core = Plan::named("core").unwrap();
        assert_eq!(core.max_custom_definitions, Some(0));
        assert_eq!(core.max_isolation, Isolation::Standard);
        assert_eq!(
            Plan::named("writer_pro").unwrap().max_custom_definitions,
            Some(10)
        );
        let teams = Plan::named("teams").unwrap();
        assert_eq!(
            (teams.max_custom_definitions, teams.max_isolation),
            (Some(50), Isolation::Strict)
        );
        let ent = Plan::named("enterprise").unwrap();
        assert_eq!(
            (ent.max_custom_definitions, ent.max_isolation),
            (None, Isolation::Restricted)
        );
        assert!(Plan::named("gold").is_none());
        let msg = Plan::named("writer_pro").unwrap().limit_message(10);
        assert!(
            msg.contains("`writer_pro`")
                && msg.contains("10")
                && msg.contains("`plan = \"teams\"` (50)"),
            "{msg}"
        );
    }
}

//! Plans (seed 003 §3.2's license tiers, made general): limits on custom definitions, the
//! strongest isolation level a definition may ask for, the JSON Schema level of its schemas and
//! the built-in tools the plan makes available.

use std::collections::BTreeSet;

use serde::Serialize;
use toolgate_core::{Isolation, PlanCaps, Principal, SchemaLevel};

/// A named plan. The plan in force comes from the configuration file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub name: String,
    /// Most live custom definitions; `None` is unlimited.
    pub max_custom_definitions: Option<u64>,
    /// Strongest isolation level a definition may require (feed it to validation's `ValidationEnv`).
    pub max_isolation: Isolation,
    /// How much of JSON Schema custom definitions may use.
    pub schema_level: SchemaLevel,
    /// The built-in tools the plan makes available; the other built-ins in [`ALL_BUILTINS`] do
    /// not exist for its callers (see [`Plan::restrict`]).
    pub builtins: &'static [&'static str],
}

/// Every built-in tool toolgate ships (`toolgate_builtins::BUILTIN_NAMES`; the CLI's tests
/// check the two lists agree, so a new built-in needs a decision about which plans get it).
pub const ALL_BUILTINS: [&str; 10] = [
    "calculator",
    "read_file",
    "write_file",
    "list_directory",
    "delete_file",
    "web_search",
    "wikipedia",
    "web_scraper",
    "todo_manager",
    "validate_output",
];

/// The built-ins of `core` and `writer_pro` (seed 003 §3.2: 5): reading files, computing and
/// planning; nothing that writes, deletes or reaches the network.
const BUILTINS_5: [&str; 5] = [
    "calculator",
    "read_file",
    "list_directory",
    "todo_manager",
    "validate_output",
];

/// The built-ins of `teams` (seed 003 §3.2: 8): the five, plus writing and deleting files in the
/// root and Wikipedia (one fixed host).
const BUILTINS_8: [&str; 8] = [
    "calculator",
    "read_file",
    "write_file",
    "list_directory",
    "delete_file",
    "wikipedia",
    "todo_manager",
    "validate_output",
];

/// One row of the plan table.
struct Row {
    name: &'static str,
    max_custom_definitions: Option<u64>,
    max_isolation: Isolation,
    schema_level: SchemaLevel,
    builtins: &'static [&'static str],
}

/// The built-in plans, weakest first. `enterprise` gets all ten built-ins where the seed says 8:
/// it is the default plan (no limits), and the two it adds — `web_search` and `web_scraper`,
/// the tools that fetch from arbitrary hosts — stay out of every plan below it.
const PLANS: [Row; 4] = [
    Row {
        name: "core",
        max_custom_definitions: Some(0),
        max_isolation: Isolation::Standard,
        schema_level: SchemaLevel::Basic,
        builtins: &BUILTINS_5,
    },
    Row {
        name: "writer_pro",
        max_custom_definitions: Some(10),
        max_isolation: Isolation::Standard,
        schema_level: SchemaLevel::Basic,
        builtins: &BUILTINS_5,
    },
    Row {
        name: "teams",
        max_custom_definitions: Some(50),
        max_isolation: Isolation::Strict,
        schema_level: SchemaLevel::Advanced,
        builtins: &BUILTINS_8,
    },
    Row {
        name: "enterprise",
        max_custom_definitions: None,
        max_isolation: Isolation::Restricted,
        schema_level: SchemaLevel::Full,
        builtins: &ALL_BUILTINS,
    },
];

impl Plan {
    /// The names [`Plan::named`] knows, weakest first.
    pub const NAMES: [&'static str; 4] = ["core", "writer_pro", "teams", "enterprise"];

    /// One of the seed's tiers: `core` (0 custom definitions, isolation up to standard, basic
    /// JSON Schema, 5 built-ins), `writer_pro` (10, standard, basic, 5), `teams` (50, strict,
    /// advanced, 8), `enterprise` (unlimited, restricted, full, all 10).
    pub fn named(name: &str) -> Option<Plan> {
        PLANS.iter().find(|r| r.name == name).map(|r| Plan {
            name: r.name.to_owned(),
            max_custom_definitions: r.max_custom_definitions,
            max_isolation: r.max_isolation,
            schema_level: r.schema_level,
            builtins: r.builtins,
        })
    }

    /// What the plan allows a definition (for the registry and validation).
    pub fn caps(&self) -> PlanCaps {
        PlanCaps {
            max_isolation: self.max_isolation,
            schema_level: self.schema_level,
        }
    }

    /// Whether `tool` is a built-in this plan leaves out.
    pub fn hides(&self, tool: &str) -> bool {
        ALL_BUILTINS.contains(&tool) && !self.builtins.contains(&tool)
    }

    /// The built-ins of [`ALL_BUILTINS`] this plan leaves out.
    pub fn hidden_builtins(&self) -> BTreeSet<String> {
        ALL_BUILTINS
            .iter()
            .filter(|b| self.hides(b))
            .map(|b| (*b).to_owned())
            .collect()
    }

    /// `principal` as a caller under this plan: the built-ins the plan leaves out do not exist
    /// for it (`Principal::may_call` is false for them, so every listing, lookup and call —
    /// MCP, REST, exports, the CLI, the pipeline's resolve stage — treats them as unknown).
    pub fn restrict(&self, principal: Principal) -> Principal {
        principal.hide_tools(self.hidden_builtins())
    }

    /// The message of a refused insert: names the plan, its limit and how to change it.
    pub(crate) fn limit_message(&self, limit: u64) -> String {
        let upgrade = PLANS
            .iter()
            .map(|r| (r.name, r.max_custom_definitions))
            .find(|(_, max)| max.is_none_or(|m| m > limit))
            .map(|(n, max)| match max {
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
        // The JSON Schema column and the built-ins column (5, 5, 8, 10: see PLANS).
        let levels: Vec<(SchemaLevel, usize)> = Plan::NAMES
            .iter()
            .map(|n| Plan::named(n).unwrap())
            .map(|p| (p.schema_level, p.builtins.len()))
            .collect();
        assert_eq!(
            levels,
            vec![
                (SchemaLevel::Basic, 5),
                (SchemaLevel::Basic, 5),
                (SchemaLevel::Advanced, 8),
                (SchemaLevel::Full, 10)
            ]
        );
        // Each level's lowest plan (named in refusals) is the weakest plan with that level.
        for level in SchemaLevel::ALL {
            let weakest = Plan::NAMES
                .iter()
                .find(|n| Plan::named(n).unwrap().schema_level >= level)
                .unwrap();
            assert_eq!(*weakest, level.lowest_plan(), "{level}");
        }
        // A plan's built-ins include every weaker plan's, and all are real built-ins.
        for pair in Plan::NAMES.windows(2) {
            let (lo, hi) = (Plan::named(pair[0]).unwrap(), Plan::named(pair[1]).unwrap());
            assert!(lo.builtins.iter().all(|b| hi.builtins.contains(b)));
            assert!(hi.builtins.iter().all(|b| ALL_BUILTINS.contains(b)));
        }
        let hidden = Plan::named("teams").unwrap().hidden_builtins();
        assert_eq!(
            hidden.into_iter().collect::<Vec<_>>(),
            vec!["web_scraper", "web_search"]
        );
        assert!(
            Plan::named("enterprise")
                .unwrap()
                .hidden_builtins()
                .is_empty()
        );
        let p = Plan::named("core").unwrap().restrict(Principal::local());
        assert!(p.may_call("read_file") && !p.may_call("write_file") && p.may_call("my_tool"));
        let msg = Plan::named("writer_pro").unwrap().limit_message(10);
        assert!(
            msg.contains("`writer_pro`")
                && msg.contains("10")
                && msg.contains("`plan = \"teams\"` (50)"),
            "{msg}"
        );
    }
}

//! License tiers, called plans in the config file (`plan = "…"`, `docs/tool-model.md#plans`):
//! limits on custom definitions, the strongest isolation level a definition may ask for, the JSON
//! Schema level of its schemas and the built-in tools the tier makes available.

use std::collections::BTreeSet;

use serde::Serialize;
use toolgate_core::{Isolation, Principal, SchemaLevel, TierCaps};

/// A named license tier (the config file's `plan`). The tier in force comes from the
/// configuration file. (Not the todo tool's plans: those are `todo.rs`.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Tier {
    /// The plan's name, like `teams`.
    pub name: String,
    /// Most live custom definitions; `None` is unlimited.
    pub max_custom_definitions: Option<u64>,
    /// Strongest isolation level a definition may require (feed it to validation's `ValidationEnv`).
    pub max_isolation: Isolation,
    /// How much of JSON Schema custom definitions may use.
    pub schema_level: SchemaLevel,
    /// The built-in tools the plan makes available; the other built-ins in [`ALL_BUILTINS`] do
    /// not exist for its callers (see [`Tier::restrict`]).
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

/// The built-ins of `core` and `writer_pro` (5): reading files, computing and
/// planning; nothing that writes, deletes or reaches the network.
const BUILTINS_5: [&str; 5] = [
    "calculator",
    "read_file",
    "list_directory",
    "todo_manager",
    "validate_output",
];

/// The built-ins of `teams` (8): the five, plus writing and deleting files in the
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

/// The built-in plans, weakest first. `enterprise` gets all ten built-ins: it is the default plan
/// (no limits), and the two it adds — `web_search` and `web_scraper`, the tools that fetch from
/// arbitrary hosts — stay out of every plan below it.
const TIERS: [Row; 4] = [
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

impl Tier {
    /// The names [`Tier::named`] knows, weakest first.
    pub const NAMES: [&'static str; 4] = ["core", "writer_pro", "teams", "enterprise"];

    /// One of the built-in plans (`docs/tool-model.md#plans`): `core` (0 custom definitions,
    /// isolation up to standard, basic JSON Schema, 5 built-ins), `writer_pro` (10, standard,
    /// basic, 5), `teams` (50, strict, advanced, 8), `enterprise` (unlimited, restricted, full,
    /// all 10).
    pub fn named(name: &str) -> Option<Tier> {
        TIERS.iter().find(|r| r.name == name).map(Self::from_row)
    }

    /// The strongest tier, `enterprise` (no definition limit, every isolation level, full JSON
    /// Schema, every built-in): the default when none is configured.
    pub fn enterprise() -> Tier {
        Self::from_row(&TIERS[TIERS.len() - 1])
    }

    fn from_row(r: &Row) -> Tier {
        Tier {
            name: r.name.to_owned(),
            max_custom_definitions: r.max_custom_definitions,
            max_isolation: r.max_isolation,
            schema_level: r.schema_level,
            builtins: r.builtins,
        }
    }

    /// What the plan allows a definition (for the registry and validation).
    pub fn caps(&self) -> TierCaps {
        TierCaps {
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
        let upgrade = TIERS
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
        let core = Tier::named("core").unwrap();
        assert_eq!(core.max_custom_definitions, Some(0));
        assert_eq!(core.max_isolation, Isolation::Standard);
        assert_eq!(
            Tier::named("writer_pro").unwrap().max_custom_definitions,
            Some(10)
        );
        let teams = Tier::named("teams").unwrap();
        assert_eq!(
            (teams.max_custom_definitions, teams.max_isolation),
            (Some(50), Isolation::Strict)
        );
        let ent = Tier::named("enterprise").unwrap();
        assert_eq!(Tier::enterprise(), ent);
        assert_eq!(
            (ent.max_custom_definitions, ent.max_isolation),
            (None, Isolation::Restricted)
        );
        assert!(Tier::named("gold").is_none());
        // The JSON Schema column and the built-ins column (5, 5, 8, 10: see TIERS).
        let levels: Vec<(SchemaLevel, usize)> = Tier::NAMES
            .iter()
            .map(|n| Tier::named(n).unwrap())
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
            let weakest = Tier::NAMES
                .iter()
                .find(|n| Tier::named(n).unwrap().schema_level >= level)
                .unwrap();
            assert_eq!(*weakest, level.lowest_plan(), "{level}");
        }
        // A plan's built-ins include every weaker plan's, and all are real built-ins.
        for pair in Tier::NAMES.windows(2) {
            let (lo, hi) = (Tier::named(pair[0]).unwrap(), Tier::named(pair[1]).unwrap());
            assert!(lo.builtins.iter().all(|b| hi.builtins.contains(b)));
            assert!(hi.builtins.iter().all(|b| ALL_BUILTINS.contains(b)));
        }
        let hidden = Tier::named("teams").unwrap().hidden_builtins();
        assert_eq!(
            hidden.into_iter().collect::<Vec<_>>(),
            vec!["web_scraper", "web_search"]
        );
        assert!(
            Tier::named("enterprise")
                .unwrap()
                .hidden_builtins()
                .is_empty()
        );
        let p = Tier::named("core").unwrap().restrict(Principal::local());
        assert!(p.may_call("read_file") && !p.may_call("write_file") && p.may_call("my_tool"));
        let msg = Tier::named("writer_pro").unwrap().limit_message(10);
        assert!(
            msg.contains("`writer_pro`")
                && msg.contains("10")
                && msg.contains("`plan = \"teams\"` (50)"),
            "{msg}"
        );
    }
}

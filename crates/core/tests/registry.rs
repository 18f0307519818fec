//! The registry: unique names, protected built-ins, dependencies (resolution, cycles, removal),
//! filtered and paginated listings, lock-free snapshots under concurrent writes, change
//! notifications, and a registry of 100,000 definitions.
#![cfg(test)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;
use toolgate_core::registry::{DEFAULT_PAGE, MAX_PAGE};
use toolgate_core::{
    Category, Consequence, CoreError, CoreErrorKind, Effect, Page, Query, Registry, Snapshot, Tool,
    ToolBuilder, ToolDefinition, ToolName,
};

fn def(name: &str) -> ToolDefinition {
    ToolDefinition::new(
        name,
        "A test tool that does one thing. Use it in tests only.",
    )
}

fn def_with_deps(name: &str, deps: &[&str]) -> ToolDefinition {
    let mut d = def(name);
    d.depends_on = deps.iter().map(|s| (*s).to_owned()).collect();
    d
}

fn tool(name: &str) -> Arc<dyn Tool> {
    Arc::new(
        ToolBuilder::new(
            name,
            "A test tool that does one thing. Use it in tests only.",
        )
        .handler(|_, _| async { Ok(json!("ok")) }),
    )
}

fn names(page: &Page) -> Vec<String> {
    page.items
        .iter()
        .map(|t| t.spec().name().to_string())
        .collect()
}

fn all_names(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .iter()
        .map(|t| t.spec().name().to_string())
        .collect()
}

fn codes(err: &CoreError) -> Vec<String> {
    err.report()
        .map(|r| r.errors.iter().map(|e| e.code.clone()).collect())
        .unwrap_or_default()
}

/// Every page of `query`, following cursors; panics on a loop.
fn walk(registry: &Registry, query: &Query) -> (Vec<String>, usize) {
    let mut q = query.clone();
    let mut out = Vec::new();
    let mut pages = 0;
    loop {
        let page = registry.list(&q).unwrap();
        pages += 1;
        assert!(page.items.len() <= q.limit.clamp(1, MAX_PAGE));
        out.extend(names(&page));
        match page.next_cursor {
            Some(c) => {
                assert!(!page.items.is_empty(), "a page with a cursor has items");
                assert_ne!(q.cursor.as_ref(), Some(&c), "the cursor must move on");
                q.cursor = Some(c);
            }
            None => break,
        }
        assert!(
            pages <= registry.snapshot().len(),
            "pagination does not end"
        );
    }
    (out, pages)
}

#[test]
fn names_are_unique() {
    let registry = Registry::new();
    registry.register_definition(def("alpha")).unwrap();
    let version = registry.snapshot().version();
    for err in [
        registry.register_definition(def("alpha")).unwrap_err(),
        registry.register(tool("alpha")).unwrap_err(),
        registry
            .register_definitions(vec![def("beta"), def("alpha")])
            .unwrap_err(),
        registry
            .register_definitions(vec![def("gamma"), def("gamma")])
            .unwrap_err(),
    ] {
        assert!(
            matches!(&err, CoreError::Duplicate(n) if n == "alpha" || n == "gamma"),
            "{err:?}"
        );
        assert_eq!(err.kind(), CoreErrorKind::Conflict);
    }
    // Failed registrations change nothing, batches included.
    let snap = registry.snapshot();
    assert_eq!(snap.version(), version);
    assert_eq!(all_names(&snap), ["alpha"]);
}

#[test]
fn invalid_definitions_are_refused_with_their_report() {
    let registry = Registry::new();
    let mut bad = def("Bad Name");
    bad.description = String::new();
    let err = registry.register_definition(bad).unwrap_err();
    assert_eq!(err.kind(), CoreErrorKind::Invalid);
    assert_eq!(codes(&err), ["name.format", "description.empty"]);
    assert!(err.to_string().contains("Invalid tool definition Bad Name"));
    // All or none: one invalid definition keeps the whole batch out.
    let err = registry
        .register_definitions(vec![def("good_one"), def("run")])
        .unwrap_err();
    assert_eq!(codes(&err), ["name.reserved"]);
    assert!(registry.snapshot().is_empty());
    assert_eq!(registry.snapshot().version(), 0);
}

#[test]
fn isolation_is_limited_by_the_registry_plan() {
    let registry = Registry::with_max_isolation(toolgate_core::Isolation::Standard);
    let mut d = def("sandboxed");
    d.constraints = Some(toolgate_core::Constraints {
        isolation: Some(toolgate_core::Isolation::Strict),
        ..Default::default()
    });
    let err = registry.register_definition(d.clone()).unwrap_err();
    assert_eq!(codes(&err), ["constraints.isolation_plan"]);
    assert!(Registry::new().register_definition(d).is_ok());
}

#[test]
fn builtins_are_protected() {
    let registry = Registry::new();
    registry
        .register_all(vec![tool("read_file"), tool("write_file")], true)
        .unwrap();
    registry.register(tool("custom")).unwrap();
    assert!(registry.get("read_file").unwrap().is_builtin());
    assert!(!registry.get("custom").unwrap().is_builtin());
    for err in [
        registry.register_builtin(tool("read_file")).unwrap_err(),
        registry.register(tool("write_file")).unwrap_err(),
        registry.replace(tool("read_file")).unwrap_err(),
        registry.replace_definition(def("write_file")).unwrap_err(),
        registry.remove("read_file").unwrap_err(),
    ] {
        assert!(matches!(err, CoreError::BuiltinProtected(_)), "{err:?}");
        assert_eq!(err.kind(), CoreErrorKind::Forbidden);
    }
    // A custom tool may depend on a built-in, and a built-in stays put.
    registry
        .register_definition(def_with_deps("uses_read", &["read_file"]))
        .unwrap();
    assert_eq!(registry.snapshot().len(), 4);
}

#[test]
fn handlers_are_kept_only_for_implemented_tools() {
    let registry = Registry::new();
    registry.register(tool("implemented")).unwrap();
    registry.register_definition(def("declared")).unwrap();
    assert!(registry.get("implemented").unwrap().handler().is_some());
    assert!(registry.get("declared").unwrap().handler().is_none());
    // Replacing the definition keeps the implementation.
    let mut newer = def("implemented");
    newer.tags = vec!["v2".into()];
    registry.replace_definition(newer).unwrap();
    let t = registry.get("implemented").unwrap();
    assert!(t.handler().is_some());
    assert_eq!(t.spec().tags(), ["v2".to_owned()]);
    // Replacing a declared tool with an implementation adds one.
    registry.replace(tool("declared")).unwrap();
    assert!(registry.get("declared").unwrap().handler().is_some());
}

#[test]
fn replace_and_remove_need_an_existing_tool() {
    let registry = Registry::new();
    for err in [
        registry.replace_definition(def("ghost")).unwrap_err(),
        registry.replace(tool("ghost")).unwrap_err(),
        registry.remove("ghost").unwrap_err(),
        registry.remove("Not A Name").unwrap_err(),
    ] {
        assert!(matches!(err, CoreError::NotFound(_)), "{err:?}");
        assert_eq!(err.kind(), CoreErrorKind::NotFound);
    }
    registry.register_definition(def("present")).unwrap();
    let removed = registry.remove("present").unwrap();
    assert_eq!(removed.name().as_str(), "present");
    assert!(registry.get("present").is_none());
    assert!(registry.snapshot().is_empty());
    // The name is free again.
    registry.register_definition(def("present")).unwrap();
}

#[test]
fn get_ignores_names_that_cannot_exist() {
    let registry = Registry::new();
    registry.register_definition(def("alpha")).unwrap();
    assert!(registry.get("alpha").is_some());
    for name in ["Alpha", "", "alpha ", "run", "a-b"] {
        assert!(registry.get(name).is_none(), "{name:?}");
    }
}

#[test]
fn depends_on_must_resolve() {
    let registry = Registry::new();
    let err = registry
        .register_definition(def_with_deps("a", &["b"]))
        .unwrap_err();
    assert_eq!(codes(&err), ["depends_on.unknown"]);
    registry.register_definition(def("b")).unwrap();
    registry
        .register_definition(def_with_deps("a", &["b"]))
        .unwrap();
    // In a batch, a dependency registered earlier in the same batch resolves.
    registry
        .register_definitions(vec![def("c"), def_with_deps("d", &["c", "a"])])
        .unwrap();
    // Replacing cannot introduce an unknown dependency either.
    let err = registry
        .replace_definition(def_with_deps("a", &["b", "zzz"]))
        .unwrap_err();
    assert_eq!(codes(&err), ["depends_on.unknown"]);
    assert_eq!(
        registry.get("a").unwrap().spec().definition().depends_on,
        ["b".to_owned()]
    );
}

#[test]
fn cycles_are_refused_on_replace() {
    let registry = Registry::new();
    registry.register_definition(def("b")).unwrap();
    registry
        .register_definition(def_with_deps("a", &["b"]))
        .unwrap();
    let before = registry.snapshot().version();

    let err = registry
        .replace_definition(def_with_deps("b", &["a"]))
        .unwrap_err();
    assert_eq!(err.kind(), CoreErrorKind::Invalid);
    assert_eq!(codes(&err), ["depends_on.cycle"]);
    assert_eq!(err.report().unwrap().errors[0].path, "depends_on");
    assert!(
        registry
            .get("b")
            .unwrap()
            .spec()
            .definition()
            .depends_on
            .is_empty()
    );
    assert_eq!(registry.snapshot().version(), before);

    // A longer cycle: a → b → c, then c → a.
    registry.register_definition(def("c")).unwrap();
    registry
        .replace_definition(def_with_deps("b", &["c"]))
        .unwrap();
    let err = registry
        .replace_definition(def_with_deps("c", &["a"]))
        .unwrap_err();
    assert_eq!(codes(&err), ["depends_on.cycle"]);
    // Self-dependency is caught by validation.
    let err = registry
        .replace_definition(def_with_deps("c", &["c"]))
        .unwrap_err();
    assert_eq!(codes(&err), ["depends_on.self"]);
    // A diamond is not a cycle.
    registry.register_definition(def("d")).unwrap();
    registry
        .replace_definition(def_with_deps("b", &["c", "d"]))
        .unwrap();
    registry
        .replace_definition(def_with_deps("c", &["d"]))
        .unwrap();
    registry
        .replace_definition(def_with_deps("a", &["b", "c", "d"]))
        .unwrap();
}

#[test]
fn batches_resolve_dependencies_in_any_order_and_refuse_cycles() {
    let registry = Registry::new();
    // The dependent comes first; the batch still resolves it.
    registry
        .register_definitions(vec![def_with_deps("uses", &["used"]), def("used")])
        .unwrap();
    // A cycle inside one batch is refused, and the batch writes nothing.
    let before = registry.snapshot().version();
    let err = registry
        .register_definitions(vec![
            def_with_deps("ping", &["pong"]),
            def_with_deps("pong", &["ping"]),
            def("innocent"),
        ])
        .unwrap_err();
    assert_eq!(codes(&err), ["depends_on.cycle"]);
    assert_eq!(registry.snapshot().version(), before);
    assert!(registry.get("innocent").is_none());
    assert!(registry.get("ping").is_none());
    // A name in neither the registry nor the batch is still unknown.
    let err = registry
        .register_definitions(vec![def_with_deps("lonely", &["nobody"])])
        .unwrap_err();
    assert_eq!(codes(&err), ["depends_on.unknown"]);
}

#[test]
fn removal_is_refused_while_depended_on() {
    let registry = Registry::new();
    registry.register_definition(def("base_tool")).unwrap();
    registry
        .register_definitions(vec![
            def_with_deps("user_one", &["base_tool"]),
            def_with_deps("user_two", &["base_tool"]),
        ])
        .unwrap();
    let err = registry.remove("base_tool").unwrap_err();
    match &err {
        CoreError::InUse { name, dependents } => {
            assert_eq!(name, "base_tool");
            assert_eq!(dependents, "user_one, user_two");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.kind(), CoreErrorKind::Conflict);
    registry.remove("user_one").unwrap();
    assert!(matches!(
        registry.remove("base_tool").unwrap_err(),
        CoreError::InUse { dependents, .. } if dependents == "user_two"
    ));
    // Replacing the dependent to drop the dependency frees the tool.
    registry.replace_definition(def("user_two")).unwrap();
    registry.remove("base_tool").unwrap();
    assert_eq!(all_names(&registry.snapshot()), ["user_two"]);
}

fn listing_registry() -> Registry {
    let registry = Registry::new();
    let mut defs = Vec::new();
    type Row<'a> = (
        &'a str,
        &'a str,
        Category,
        Effect,
        Consequence,
        &'a [&'a str],
    );
    let rows: &[Row<'_>] = &[
        (
            "read_file",
            "Reads a FILE from disk. Use to inspect contents.",
            Category::Filesystem,
            Effect::Read,
            Consequence::Low,
            &["files"],
        ),
        (
            "write_file",
            "Writes a file to disk. Use to save contents.",
            Category::Filesystem,
            Effect::Write,
            Consequence::Medium,
            &["files", "mutating"],
        ),
        (
            "delete_file",
            "Deletes a file from disk. Use only when asked.",
            Category::Filesystem,
            Effect::Delete,
            Consequence::High,
            &["files", "mutating"],
        ),
        (
            "web_search",
            "Searches the web for pages. Use for fresh facts.",
            Category::Network,
            Effect::Read,
            Consequence::Low,
            &["web"],
        ),
        (
            "send_email",
            "Sends an email message. Use to notify people.",
            Category::Communication,
            Effect::SideEffect,
            Consequence::High,
            &["mutating"],
        ),
        (
            "query_db",
            "Runs a read-only SQL query. Use for reporting.",
            Category::Database,
            Effect::Read,
            Consequence::Medium,
            &[],
        ),
        (
            "profile_lookup",
            "Looks up a user profile by email address.",
            Category::ExternalApi,
            Effect::Read,
            Consequence::Low,
            &["web"],
        ),
    ];
    for (name, description, category, effect, consequence, tags) in rows {
        let mut d = ToolDefinition::new(*name, *description);
        d.category = Some(*category);
        d.effect = Some(*effect);
        d.consequence = Some(*consequence);
        d.requires_confirmation = Some(*consequence == Consequence::High);
        d.tags = tags.iter().map(|t| (*t).to_owned()).collect();
        defs.push(d);
    }
    registry.register_definitions(defs).unwrap();
    registry
}

#[test]
fn list_filters() {
    let registry = listing_registry();
    let q = Query::default;
    let cases: Vec<(&str, Query, Vec<&str>)> = vec![
        (
            "no filter",
            q(),
            vec![
                "delete_file",
                "profile_lookup",
                "query_db",
                "read_file",
                "send_email",
                "web_search",
                "write_file",
            ],
        ),
        (
            "category",
            Query {
                category: Some(Category::Filesystem),
                ..q()
            },
            vec!["delete_file", "read_file", "write_file"],
        ),
        (
            "category without tools",
            Query {
                category: Some(Category::Knowledge),
                ..q()
            },
            vec![],
        ),
        (
            "effect",
            Query {
                effect: Some(Effect::Read),
                ..q()
            },
            vec!["profile_lookup", "query_db", "read_file", "web_search"],
        ),
        (
            "consequence",
            Query {
                consequence: Some(Consequence::High),
                ..q()
            },
            vec!["delete_file", "send_email"],
        ),
        (
            "tag",
            Query {
                tag: Some("mutating".into()),
                ..q()
            },
            vec!["delete_file", "send_email", "write_file"],
        ),
        (
            "tag is exact",
            Query {
                tag: Some("file".into()),
                ..q()
            },
            vec![],
        ),
        (
            "text in name",
            Query {
                text: Some("_file".into()),
                ..q()
            },
            vec!["delete_file", "read_file", "write_file"],
        ),
        (
            "text is case-insensitive",
            Query {
                text: Some("  EMAIL ".into()),
                ..q()
            },
            vec!["profile_lookup", "send_email"],
        ),
        (
            "text in description only",
            Query {
                text: Some("sql query".into()),
                ..q()
            },
            vec!["query_db"],
        ),
        (
            "text matches upper-case description",
            Query {
                text: Some("a file from".into()),
                ..q()
            },
            vec!["delete_file", "read_file"],
        ),
        (
            "filters combine",
            Query {
                category: Some(Category::Filesystem),
                effect: Some(Effect::Write),
                tag: Some("mutating".into()),
                text: Some("disk".into()),
                ..q()
            },
            vec!["write_file"],
        ),
        (
            "combined filters that exclude each other",
            Query {
                category: Some(Category::Network),
                effect: Some(Effect::Delete),
                ..q()
            },
            vec![],
        ),
    ];
    for (label, query, want) in cases {
        let page = registry.list(&query).unwrap();
        assert_eq!(names(&page), want, "{label}");
        assert!(page.next_cursor.is_none(), "{label}");
    }
}

#[test]
fn text_search_follows_changes() {
    let registry = listing_registry();
    let q = |text: &str| Query {
        text: Some(text.into()),
        ..Query::default()
    };
    let search = |text: &str| names(&registry.list(&q(text)).unwrap());
    assert_eq!(search("disk"), ["delete_file", "read_file", "write_file"]);
    // A new tool is found at once, a removed one is gone, a replaced description is searched.
    registry
        .register_definition(ToolDefinition::new(
            "copy_file",
            "Copies a file on DISK. Use to duplicate files.",
        ))
        .unwrap();
    assert_eq!(
        search("disk"),
        ["copy_file", "delete_file", "read_file", "write_file"]
    );
    registry.remove("read_file").unwrap();
    assert_eq!(search("disk"), ["copy_file", "delete_file", "write_file"]);
    registry
        .replace_definition(ToolDefinition::new(
            "write_file",
            "Stores text in object storage. Use to save contents.",
        ))
        .unwrap();
    assert_eq!(search("disk"), ["copy_file", "delete_file"]);
    assert_eq!(search("object storage"), ["write_file"]);
    // Matches never span two tools, and an empty needle filters nothing.
    assert!(search("duplicate files.delete_file").is_empty());
    assert!(search("asked.profile_lookup").is_empty());
    assert_eq!(search("").len(), registry.snapshot().len());
    assert_eq!(search("   ").len(), registry.snapshot().len());
    assert!(search("no such words anywhere").is_empty());
    // Text search pages like any other filter.
    let (seen, pages) = walk(
        &registry,
        &Query {
            text: Some("file".into()),
            limit: 1,
            ..Query::default()
        },
    );
    assert_eq!(
        seen,
        ["copy_file", "delete_file", "profile_lookup", "write_file"]
    );
    assert_eq!(pages, 4);
}

#[test]
fn listing_is_in_stable_name_order() {
    let registry = Registry::new();
    let order = ["m_tool", "a_tool", "z_tool", "b2", "b10", "b1", "aa", "a"];
    for name in order {
        registry.register_definition(def(name)).unwrap();
    }
    let mut sorted: Vec<String> = order.iter().map(|s| (*s).to_owned()).collect();
    sorted.sort();
    assert_eq!(all_names(&registry.snapshot()), sorted);
    assert_eq!(names(&registry.list(&Query::default()).unwrap()), sorted);
    // Repeated listings agree.
    for _ in 0..3 {
        assert_eq!(names(&registry.list(&Query::default()).unwrap()), sorted);
    }
}

fn numbered_registry(n: usize) -> Registry {
    let registry = Registry::new();
    let defs = (0..n)
        .map(|i| {
            let mut d = def(&format!("tool_{i:04}"));
            d.category = Some(Category::ALL[i % Category::ALL.len()]);
            if i % 3 == 0 {
                d.tags = vec!["third".into()];
            }
            d
        })
        .collect();
    registry.register_definitions(defs).unwrap();
    registry
}

#[test]
fn pagination_walks_every_item_exactly_once() {
    let registry = numbered_registry(103);
    let everything: Vec<String> = (0..103).map(|i| format!("tool_{i:04}")).collect();
    for limit in [1, 2, 7, 10, 50, 102, 103, 104, 1000] {
        let (seen, pages) = walk(
            &registry,
            &Query {
                limit,
                ..Query::default()
            },
        );
        assert_eq!(seen, everything, "limit {limit}");
        assert_eq!(pages, 103usize.div_ceil(limit), "limit {limit}");
    }
    // With filters: every match once, in order.
    let query = Query {
        tag: Some("third".into()),
        limit: 4,
        ..Query::default()
    };
    let (seen, pages) = walk(&registry, &query);
    let want: Vec<String> = (0..103)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("tool_{i:04}"))
        .collect();
    assert_eq!(seen, want);
    assert_eq!(pages, want.len().div_ceil(4));
    let query = Query {
        category: Some(Category::Database),
        text: Some("TOOL_00".into()),
        limit: 3,
        ..Query::default()
    };
    let (seen, _) = walk(&registry, &query);
    let want: Vec<String> = (0..100)
        .filter(|i| i % 8 == 2)
        .map(|i| format!("tool_{i:04}"))
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn page_sizes_and_last_page() {
    let registry = numbered_registry(60);
    let page = registry.list(&Query::default()).unwrap();
    assert_eq!(page.items.len(), DEFAULT_PAGE);
    assert_eq!(page.next_cursor.as_deref(), Some("after:tool_0049"));
    // A limit of 0 still returns one item; an enormous one is capped.
    let page = registry
        .list(&Query {
            limit: 0,
            ..Query::default()
        })
        .unwrap();
    assert_eq!(names(&page), ["tool_0000"]);
    let page = registry
        .list(&Query {
            limit: usize::MAX,
            ..Query::default()
        })
        .unwrap();
    assert_eq!(page.items.len(), 60);
    assert!(page.next_cursor.is_none());
    // Exactly `limit` matches: one page, no cursor.
    let page = registry
        .list(&Query {
            limit: 60,
            ..Query::default()
        })
        .unwrap();
    assert_eq!(page.items.len(), 60);
    assert!(page.next_cursor.is_none());
    // Empty registry: empty page, no cursor.
    let page = Registry::new().list(&Query::default()).unwrap();
    assert!(page.items.is_empty() && page.next_cursor.is_none());
}

#[test]
fn cursors_survive_changes_between_pages() {
    let registry = numbered_registry(10);
    let first = registry
        .list(&Query {
            limit: 4,
            ..Query::default()
        })
        .unwrap();
    assert_eq!(names(&first).last().unwrap(), "tool_0003");
    // The last item of the page disappears and a new one sorts into the rest.
    registry.remove("tool_0003").unwrap();
    registry.register_definition(def("tool_0003a")).unwrap();
    let second = registry
        .list(&Query {
            limit: 4,
            cursor: first.next_cursor,
            ..Query::default()
        })
        .unwrap();
    assert_eq!(
        names(&second),
        ["tool_0003a", "tool_0004", "tool_0005", "tool_0006"]
    );
}

#[test]
fn bad_cursors_are_refused() {
    let registry = numbered_registry(5);
    for cursor in [
        "",
        "garbage",
        "tool_0001",
        "after:",
        "after:Bad Name",
        "after:run",
        "before:tool_0001",
    ] {
        let err = registry
            .list(&Query {
                cursor: Some(cursor.into()),
                ..Query::default()
            })
            .unwrap_err();
        assert!(
            matches!(&err, CoreError::BadCursor(c) if c == cursor),
            "{cursor:?}: {err:?}"
        );
        assert_eq!(err.kind(), CoreErrorKind::BadRequest);
        assert!(err.to_string().contains("nextCursor"));
    }
    // A well-formed cursor after the last name is simply the end.
    let page = registry
        .list(&Query {
            cursor: Some("after:zzz".into()),
            ..Query::default()
        })
        .unwrap();
    assert!(page.items.is_empty() && page.next_cursor.is_none());
}

struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[test]
fn concurrent_readers_see_consistent_snapshots() {
    const TOOLS: usize = 400;
    let registry = Registry::new();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let mut readers = Vec::new();
        for _ in 0..4 {
            readers.push(scope.spawn(|| {
                let mut last_version = 0;
                let mut observed = 0u64;
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let snap = registry.snapshot();
                    // One tool per change: the count always matches the version.
                    assert_eq!(snap.len() as u64, snap.version());
                    assert!(snap.version() >= last_version, "versions never go back");
                    last_version = snap.version();
                    let names = all_names(&snap);
                    assert_eq!(names.len(), snap.len());
                    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
                    // Every dependency is in the same snapshot.
                    for t in snap.iter() {
                        for d in &t.spec().definition().depends_on {
                            assert!(snap.get(d).is_some(), "{d} missing from a snapshot");
                        }
                    }
                    // A listing of the snapshot agrees with it.
                    let page = snap
                        .list(&Query {
                            limit: MAX_PAGE,
                            ..Query::default()
                        })
                        .unwrap();
                    assert_eq!(page.items.len(), snap.len().min(MAX_PAGE));
                    observed += 1;
                    if finished {
                        return (last_version, observed);
                    }
                }
            }));
        }
        scope
            .spawn(|| {
                // Readers stop even if this writer panics: a failure, never a hang.
                let _done = SetOnDrop(&done);
                for i in 0..TOOLS {
                    let name = format!("tool_{i:04}");
                    let d = if i == 0 {
                        def(&name)
                    } else {
                        def_with_deps(&name, &[&format!("tool_{:04}", i - 1)])
                    };
                    registry.register_definition(d).unwrap();
                }
            })
            .join()
            .unwrap();
        for reader in readers {
            let (last, observed) = reader.join().unwrap();
            assert_eq!(last, TOOLS as u64, "the last read saw every write");
            assert!(observed >= 1);
        }
    });
}

#[test]
fn concurrent_writers_never_lose_a_change() {
    let registry = Registry::new();
    std::thread::scope(|scope| {
        for w in 0..4 {
            let registry = &registry;
            scope.spawn(move || {
                for i in 0..50 {
                    registry
                        .register_definition(def(&format!("w{w}_tool_{i:02}")))
                        .unwrap();
                }
            });
        }
    });
    let snap = registry.snapshot();
    assert_eq!(snap.len(), 200);
    assert_eq!(snap.version(), 200);
}

#[test]
fn subscribe_sees_version_bumps() {
    let registry = Registry::new();
    let mut rx = registry.subscribe();
    assert_eq!(*rx.borrow_and_update(), 0);
    assert!(!rx.has_changed().unwrap());

    registry.register_definition(def("one")).unwrap();
    assert!(rx.has_changed().unwrap());
    assert_eq!(*rx.borrow_and_update(), 1);

    // A batch is one change.
    registry
        .register_definitions(vec![def("two"), def("three"), def("four")])
        .unwrap();
    assert_eq!(*rx.borrow_and_update(), 2);
    assert_eq!(registry.snapshot().version(), 2);

    // A refused change is no change.
    registry.register_definition(def("one")).unwrap_err();
    assert!(!rx.has_changed().unwrap());

    registry.replace_definition(def("two")).unwrap();
    assert_eq!(*rx.borrow_and_update(), 3);
    registry.remove("two").unwrap();
    assert_eq!(*rx.borrow_and_update(), 4);
    assert_eq!(registry.snapshot().version(), 4);
}

#[tokio::test]
async fn subscribers_are_woken_by_changes() {
    let registry = Arc::new(Registry::new());
    let mut rx = registry.subscribe();
    let writer = {
        let registry = Arc::clone(&registry);
        tokio::spawn(async move {
            for i in 0..3 {
                tokio::task::yield_now().await;
                registry.register_definition(def(&format!("t{i}"))).unwrap();
            }
        })
    };
    let mut seen = Vec::new();
    while seen.last() != Some(&3) {
        rx.changed().await.unwrap();
        seen.push(*rx.borrow_and_update());
    }
    writer.await.unwrap();
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(registry.snapshot().len(), 3);
}

#[test]
fn snapshots_are_immutable() {
    let registry = numbered_registry(3);
    let before = registry.snapshot();
    registry.register_definition(def("later")).unwrap();
    registry.remove("tool_0000").unwrap();
    assert_eq!(all_names(&before), ["tool_0000", "tool_0001", "tool_0002"]);
    assert_eq!(before.version(), 1);
    assert_eq!(registry.snapshot().version(), 3);
}

#[test]
fn a_hundred_thousand_definitions() {
    const N: usize = 100_000;
    let registry = Registry::new();
    let template = def("template");
    let defs: Vec<ToolDefinition> = (0..N)
        .map(|i| {
            let mut d = template.clone();
            d.name = format!("tool_{i:06}");
            d.category = Some(Category::ALL[i % Category::ALL.len()]);
            d
        })
        .collect();
    let specs = registry.register_definitions(defs).unwrap();
    assert_eq!(specs.len(), N);
    let snap = registry.snapshot();
    assert_eq!(snap.len(), N);
    assert_eq!(snap.version(), 1);

    for i in [0, 1, 49_999, 77_777, N - 1] {
        let name = format!("tool_{i:06}");
        let t = registry.get(&name).unwrap();
        assert_eq!(t.spec().name().as_str(), name);
        assert_eq!(t.spec().category(), Category::ALL[i % 8]);
    }
    assert!(registry.get("tool_100000").is_none());

    let page = registry
        .list(&Query {
            limit: 3,
            ..Query::default()
        })
        .unwrap();
    assert_eq!(names(&page), ["tool_000000", "tool_000001", "tool_000002"]);
    let page = registry
        .list(&Query {
            cursor: Some("after:tool_099998".into()),
            ..Query::default()
        })
        .unwrap();
    assert_eq!(names(&page), ["tool_099999"]);
    assert!(page.next_cursor.is_none());

    // Walking everything visits each name once, in order.
    let (seen, pages) = walk(
        &registry,
        &Query {
            limit: MAX_PAGE,
            ..Query::default()
        },
    );
    assert_eq!(pages, N / MAX_PAGE);
    assert_eq!(seen.len(), N);
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), N);

    // Filters still work at this size.
    let (seen, _) = walk(
        &registry,
        &Query {
            text: Some("TOOL_09999".into()),
            limit: MAX_PAGE,
            ..Query::default()
        },
    );
    let want: Vec<String> = (99_990..N).map(|i| format!("tool_{i:06}")).collect();
    assert_eq!(seen, want);
    let (seen, _) = walk(
        &registry,
        &Query {
            category: Some(Category::Knowledge),
            limit: MAX_PAGE,
            ..Query::default()
        },
    );
    assert_eq!(seen.len(), N / 8);

    // One more registration and removal on top of the large map.
    registry.register_definition(def("zzz_extra")).unwrap();
    registry.remove("tool_050000").unwrap();
    assert_eq!(registry.snapshot().len(), N);
    assert!(registry.get("tool_050000").is_none());
    assert!(registry.get("zzz_extra").is_some());
}

#[test]
fn register_each_registers_what_it_can_and_names_cycles() {
    let registry = Registry::new();
    let mut bad = def("bad_one");
    bad.description = String::new();
    let outcomes = registry.register_each(vec![
        def_with_deps("uses", &["used"]),
        bad,
        def_with_deps("ping", &["pong"]),
        def_with_deps("pong", &["ping"]),
        def_with_deps("lonely", &["nobody"]),
        def("used"),
    ]);
    let codes: Vec<Vec<String>> = outcomes
        .iter()
        .map(|o| match o {
            Ok(_) => Vec::new(),
            Err(e) => codes(e),
        })
        .collect();
    assert_eq!(
        codes,
        [
            vec![],
            vec!["description.empty".to_owned()],
            vec!["depends_on.cycle".to_owned()],
            vec!["depends_on.cycle".to_owned()],
            vec!["depends_on.unknown".to_owned()],
            vec![],
        ]
    );
    let cycle = outcomes[2].as_ref().unwrap_err().report().unwrap();
    assert!(
        cycle.errors[0].message.contains("ping, pong"),
        "{}",
        cycle.errors[0].message
    );
    assert!(registry.get("uses").is_some() && registry.get("used").is_some());
    assert!(registry.get("ping").is_none() && registry.get("bad_one").is_none());
}

// ---- withholding ------------------------------------------------------------------------------

fn tool_name(name: &str) -> ToolName {
    ToolName::parse(name).unwrap()
}

const QUARANTINED: &str = "Tool files__read is quarantined: its description changed since it was approved; approve the new version with `toolgate servers approve files read`";

#[test]
fn a_withheld_name_is_in_no_list_search_or_iteration() {
    let registry = Registry::new();
    registry
        .register_all(vec![tool("files__read"), tool("files__write")], false)
        .unwrap();
    let changes = registry.subscribe();
    let before = registry.snapshot().version();

    let removed = registry
        .withhold(&tool_name("files__read"), QUARANTINED)
        .unwrap();
    assert_eq!(removed.unwrap().name().as_str(), "files__read");
    assert!(
        changes.has_changed().unwrap(),
        "withholding publishes a change"
    );
    let snapshot = registry.snapshot();
    assert_eq!(snapshot.version(), before + 1);
    assert!(registry.get("files__read").is_none());
    assert_eq!(all_names(&snapshot), ["files__write"]);
    assert_eq!(snapshot.len(), 1);
    let search = Query {
        text: Some("files__read".into()),
        ..Query::default()
    };
    assert!(registry.list(&search).unwrap().items.is_empty());
    assert_eq!(
        names(&registry.list(&Query::default()).unwrap()),
        ["files__write"]
    );
    assert_eq!(snapshot.withheld_reason("files__read"), Some(QUARANTINED));
    assert_eq!(snapshot.withheld_reason("files__write"), None);
    assert_eq!(
        registry.withheld(),
        [(tool_name("files__read"), QUARANTINED.to_owned())]
    );

    // A name can be withheld before anything is registered under it; a new reason replaces the
    // old one; the same reason again changes nothing.
    assert!(
        registry
            .withhold(&tool_name("files__new"), "pending")
            .unwrap()
            .is_none()
    );
    registry
        .withhold(&tool_name("files__new"), "pending review")
        .unwrap();
    let version = registry.snapshot().version();
    registry
        .withhold(&tool_name("files__new"), "pending review")
        .unwrap();
    assert_eq!(registry.snapshot().version(), version);
    assert_eq!(
        registry.withheld(),
        [
            (tool_name("files__new"), "pending review".to_owned()),
            (tool_name("files__read"), QUARANTINED.to_owned()),
        ]
    );
}

#[test]
fn registering_a_withheld_name_ends_the_withholding_and_release_ends_it_too() {
    let registry = Registry::new();
    registry.register(tool("files__read")).unwrap();
    registry
        .withhold(&tool_name("files__read"), QUARANTINED)
        .unwrap();
    // Not registered any more: a registration (not a replacement) brings it back.
    assert_eq!(
        registry.replace(tool("files__read")).unwrap_err().kind(),
        CoreErrorKind::NotFound
    );
    registry.register(tool("files__read")).unwrap();
    assert!(registry.get("files__read").is_some());
    assert!(registry.withheld().is_empty());
    assert_eq!(registry.snapshot().withheld_reason("files__read"), None);

    registry
        .withhold(&tool_name("files__gone"), "pending")
        .unwrap();
    assert!(registry.release("files__gone").unwrap());
    assert!(!registry.release("files__gone").unwrap(), "released once");
    assert!(!registry.release("never_withheld").unwrap());
    assert!(registry.withheld().is_empty());
    assert!(registry.get("files__gone").is_none());
}

#[test]
fn builtins_cannot_be_withheld_and_dependents_stay_resolved() {
    let registry = Registry::new();
    registry.register_builtin(tool("calculator")).unwrap();
    let err = registry
        .withhold(&tool_name("calculator"), "no")
        .unwrap_err();
    assert!(matches!(err, CoreError::BuiltinProtected(_)), "{err}");
    assert!(registry.get("calculator").is_some());
    assert!(registry.withheld().is_empty());

    registry.register_definition(def("upstream")).unwrap();
    registry
        .register_definition(def_with_deps("uses_upstream", &["upstream"]))
        .unwrap();
    registry
        .withhold(&tool_name("upstream"), "pending")
        .unwrap();
    assert!(registry.get("uses_upstream").is_some());
    // The withheld name is still known: a new definition may depend on it.
    registry
        .register_definition(def_with_deps("also_uses", &["upstream"]))
        .unwrap();
    // Releasing it without registering anything would leave them unresolved.
    let err = registry.release("upstream").unwrap_err();
    assert!(matches!(err, CoreError::InUse { .. }), "{err}");
    assert!(
        err.to_string().contains("also_uses, uses_upstream"),
        "{err}"
    );
    registry.register_definition(def("upstream")).unwrap();
    assert!(registry.withheld().is_empty());
}

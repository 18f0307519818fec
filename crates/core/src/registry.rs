//! The registry: every known tool by name. Reads take a lock-free snapshot (an `Arc` of a
//! persistent map), writes are serialized and publish a new snapshot, so readers never wait
//! and never see a half-applied change.

use std::collections::HashSet;
use std::fmt;
use std::ops::Bound;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use arc_swap::ArcSwap;
use imbl::{HashMap as HashIndex, OrdMap};
use tokio::sync::watch;

use crate::definition::Isolation;
use crate::definition::{Category, Consequence, Effect, ToolDefinition};
use crate::error::CoreError;
use crate::names::ToolName;
use crate::runkind::RunKind;
use crate::schema_level::TierCaps;
use crate::spec::ToolSpec;
use crate::telemetry;
use crate::tool::Tool;
use crate::validate::{Lookup, ValidationEnv, validate_in};

/// A registered tool: its validated spec, its implementation (if any) and whether it is built in.
#[derive(Clone)]
pub struct RegisteredTool {
    spec: ToolSpec,
    handler: Option<Arc<dyn Tool>>,
    builtin: bool,
    /// Copies of the spec's filterable fields, stored inline so that filtered scans read the
    /// map's nodes instead of chasing one pointer per tool.
    facets: (Category, Effect, Consequence),
}

impl RegisteredTool {
    /// The validated definition.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The implementation; `None` for a definition that can be listed and exported but not run.
    pub fn handler(&self) -> Option<&Arc<dyn Tool>> {
        self.handler.as_ref()
    }

    /// Whether this is a built-in tool (cannot be replaced or removed).
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", self.spec.name())
            .field("builtin", &self.builtin)
            .field("implemented", &self.handler.is_some())
            .finish()
    }
}

/// An immutable view of the registry at one moment.
///
/// Tools live in a name-ordered persistent map (listing, pagination) and a persistent hash index
/// (lookup by name); both share their entries, and a write copies only O(log n) nodes of each.
#[derive(Clone, Default)]
pub struct Snapshot {
    tools: OrdMap<ToolName, RegisteredTool>,
    by_name: HashIndex<ToolName, RegisteredTool>,
    by_category: [u64; 8],
    version: u64,
    text: TextIndex,
    /// Names held back from every list and call, with the reason a call is refused with.
    withheld: OrdMap<ToolName, Arc<str>>,
}

/// Every tool's lower-cased `name\ndescription` in one buffer, in name order, built on the first
/// free-text query of a snapshot: one `memmem` pass over contiguous memory instead of a pointer
/// chase per tool. A cloned (changed) snapshot starts without one.
#[derive(Default)]
struct TextIndex(OnceLock<(String, Vec<(usize, ToolName)>)>);

impl Clone for TextIndex {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl Snapshot {
    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name)
    }

    /// Names whose search text contains `needle` (lower-cased), in name order.
    fn text_matches(&self, needle: &str) -> Vec<ToolName> {
        let (buffer, starts) = self.text.0.get_or_init(|| {
            let mut buffer = String::new();
            let mut starts = Vec::with_capacity(self.tools.len());
            for (name, tool) in self.tools.iter() {
                starts.push((buffer.len(), name.clone()));
                buffer.push_str(tool.spec.search_text());
                buffer.push('\0');
            }
            (buffer, starts)
        });
        let mut names: Vec<ToolName> = Vec::new();
        for at in memchr::memmem::find_iter(buffer.as_bytes(), needle.as_bytes()) {
            let i = starts
                .partition_point(|(start, _)| *start <= at)
                .saturating_sub(1);
            if let Some((_, name)) = starts.get(i)
                && names.last() != Some(name)
            {
                names.push(name.clone());
            }
        }
        names
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Increases by one with every change.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// All tools in name order.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.values()
    }

    /// Why `name` is withheld, when it is (see [`Registry::withhold`]).
    pub fn withheld_reason(&self, name: &str) -> Option<&str> {
        self.withheld.get(name).map(|r| &**r)
    }

    /// Every withheld name with its reason, in name order.
    pub fn withheld(&self) -> impl Iterator<Item = (&ToolName, &str)> {
        self.withheld.iter().map(|(n, r)| (n, &**r))
    }

    fn lookup(&self, name: &str) -> Lookup {
        match self.get(name) {
            // A withheld name is still known: what depends on it stays resolved.
            None if self.withheld.contains_key(name) => Lookup::Custom,
            None => Lookup::Absent,
            Some(t) if t.builtin => Lookup::Builtin,
            Some(_) => Lookup::Custom,
        }
    }

    /// Tools matching `query`, in name order, one page at a time.
    pub fn list(&self, query: &Query) -> Result<Page, CoreError> {
        let limit = query.limit.clamp(1, MAX_PAGE);
        let after = match &query.cursor {
            Some(c) => Some(decode_cursor(c).ok_or_else(|| CoreError::BadCursor(c.clone()))?),
            None => None,
        };
        let text = query
            .text
            .as_ref()
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty());
        if text.as_ref().is_some_and(|t| t.contains('\0')) {
            // No name or description contains NUL (the index uses it as a separator).
            return Ok(Page {
                items: Vec::new(),
                next_cursor: None,
            });
        }
        let mut items = Vec::with_capacity(limit.min(64));
        let mut more = false;
        let mut take = |tool: &RegisteredTool| {
            if !query.matches(tool) {
                return true;
            }
            if items.len() == limit {
                more = true;
                return false;
            }
            items.push(tool.clone());
            true
        };
        match text {
            Some(needle) => {
                for name in self.text_matches(&needle) {
                    if after.as_ref().is_some_and(|a| &name <= a) {
                        continue;
                    }
                    if let Some(tool) = self.tools.get(&name)
                        && !take(tool)
                    {
                        break;
                    }
                }
            }
            None => {
                let start = after.map_or(Bound::Unbounded, Bound::Excluded);
                for (_, tool) in self.tools.range((start, Bound::Unbounded)) {
                    if !take(tool) {
                        break;
                    }
                }
            }
        }
        // When there is at least one more match, the page ends at the last item returned.
        let next_cursor = if more {
            items.last().map(|t| encode_cursor(t.spec.name()))
        } else {
            None
        };
        Ok(Page { items, next_cursor })
    }

    fn dependents_of(&self, name: &str) -> Vec<String> {
        self.tools
            .values()
            .filter(|t| t.spec.definition().depends_on.iter().any(|d| d == name))
            .map(|t| t.spec.name().to_string())
            .collect()
    }

    /// Whether following `depends_on` from `start` reaches `target`.
    fn reaches(&self, start: &[String], target: &str) -> bool {
        let mut stack: Vec<String> = start.to_vec();
        let mut seen = HashSet::new();
        while let Some(n) = stack.pop() {
            if n == target {
                return true;
            }
            if !seen.insert(n.clone()) {
                continue;
            }
            let deps = self
                .get(&n)
                .map(|t| t.spec.definition().depends_on.clone())
                .unwrap_or_default();
            stack.extend(deps);
        }
        false
    }
}

/// Largest page a listing returns.
pub const MAX_PAGE: usize = 1000;
/// Page size when none is asked for.
pub const DEFAULT_PAGE: usize = 50;

fn encode_cursor(name: &ToolName) -> String {
    format!("after:{name}")
}

fn decode_cursor(cursor: &str) -> Option<ToolName> {
    ToolName::parse(cursor.strip_prefix("after:")?).ok()
}

/// Filters for listing tools; all given filters must match.
#[derive(Clone, Debug)]
pub struct Query {
    /// Only tools of this category.
    pub category: Option<Category>,
    /// Only tools of this effect.
    pub effect: Option<Effect>,
    /// Only tools of this consequence.
    pub consequence: Option<Consequence>,
    /// Only tools with this tag.
    pub tag: Option<String>,
    /// Case-insensitive substring of the name or the description.
    pub text: Option<String>,
    /// Most tools on one page.
    pub limit: usize,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl Default for Query {
    fn default() -> Self {
        Self {
            category: None,
            effect: None,
            consequence: None,
            tag: None,
            text: None,
            limit: DEFAULT_PAGE,
            cursor: None,
        }
    }
}

impl Query {
    /// The structured filters (free text is matched through the snapshot's text index).
    fn matches(&self, tool: &RegisteredTool) -> bool {
        let (category, effect, consequence) = tool.facets;
        self.category.is_none_or(|c| category == c)
            && self.effect.is_none_or(|e| effect == e)
            && self.consequence.is_none_or(|c| consequence == c)
            && self
                .tag
                .as_ref()
                .is_none_or(|t| tool.spec.tags().iter().any(|x| x == t))
    }
}

/// One page of a listing.
#[derive(Clone, Debug)]
pub struct Page {
    /// The tools of this page, in name order.
    pub items: Vec<RegisteredTool>,
    /// Pass as `Query::cursor` for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// The tool registry. Share it as `Arc<Registry>`.
pub struct Registry {
    current: ArcSwap<Snapshot>,
    writer: Mutex<()>,
    changes: watch::Sender<u64>,
    /// What the plan in force allows definitions registered here.
    caps: TierCaps,
    run_kinds: RwLock<Vec<Arc<dyn RunKind>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.snapshot().len())
            .finish()
    }
}

/// What a registration adds.
#[allow(clippy::large_enum_variant)] // short-lived, built once per registration
enum Source {
    Tool(Arc<dyn Tool>),
    Definition(ToolDefinition),
}

impl Registry {
    /// An empty registry allowing every isolation level and all of JSON Schema.
    pub fn new() -> Self {
        Self::with_caps(TierCaps::UNLIMITED)
    }

    /// An empty registry whose definitions may ask for at most `max` isolation (the plan in force).
    pub fn with_max_isolation(max: Isolation) -> Self {
        Self::with_caps(TierCaps {
            max_isolation: max,
            ..TierCaps::UNLIMITED
        })
    }

    /// An empty registry whose custom definitions stay within `caps` (the plan in force): the
    /// strongest isolation they may ask for and the JSON Schema level of their schemas.
    pub fn with_caps(caps: TierCaps) -> Self {
        Self {
            current: ArcSwap::from_pointee(Snapshot::default()),
            writer: Mutex::new(()),
            changes: watch::channel(0).0,
            caps,
            run_kinds: RwLock::new(Vec::new()),
        }
    }

    /// What the plan in force allows definitions registered here.
    pub fn caps(&self) -> TierCaps {
        self.caps
    }

    /// Installs a run kind: from now on, definitions whose `run.kind` it implements are checked
    /// by it when registered and run by the handler it builds. Install kinds before
    /// registering definitions; definitions registered earlier keep what they had.
    pub fn add_run_kind(&self, kind: Arc<dyn RunKind>) {
        let mut kinds = self.run_kinds.write().unwrap_or_else(|p| p.into_inner());
        kinds.retain(|k| k.kind() != kind.kind());
        kinds.push(kind);
    }

    fn run_kind(&self, name: &str) -> Option<Arc<dyn RunKind>> {
        let kinds = self.run_kinds.read().unwrap_or_else(|p| p.into_inner());
        kinds.iter().find(|k| k.kind() == name).cloned()
    }

    /// The current state; cheap, never blocks.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<RegisteredTool> {
        self.current.load().get(name).cloned()
    }

    /// Lists tools (see [`Snapshot::list`]).
    pub fn list(&self, query: &Query) -> Result<Page, CoreError> {
        self.current.load().list(query)
    }

    /// A receiver that sees the snapshot version after every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Registers a built-in tool (it can then be neither replaced nor removed).
    pub fn register_builtin(&self, tool: Arc<dyn Tool>) -> Result<ToolSpec, CoreError> {
        self.insert(vec![Source::Tool(tool)], true, false, None)
            .map(|mut v| v.remove(0))
    }

    /// Registers a tool implemented in Rust.
    pub fn register(&self, tool: Arc<dyn Tool>) -> Result<ToolSpec, CoreError> {
        self.insert(vec![Source::Tool(tool)], false, false, None)
            .map(|mut v| v.remove(0))
    }

    /// Registers a definition without an implementation of its own (declarative tools).
    pub fn register_definition(&self, def: ToolDefinition) -> Result<ToolSpec, CoreError> {
        self.insert(vec![Source::Definition(def)], false, false, None)
            .map(|mut v| v.remove(0))
    }

    /// Registers many definitions at once: all or none, one published change.
    pub fn register_definitions(
        &self,
        defs: Vec<ToolDefinition>,
    ) -> Result<Vec<ToolSpec>, CoreError> {
        self.insert(
            defs.into_iter().map(Source::Definition).collect(),
            false,
            false,
            None,
        )
    }

    /// Registers as many definitions as it can, each on its own, and returns every outcome in
    /// the order given. A definition may come before the tools it depends on (registration
    /// goes in passes until nothing changes); definitions left depending on each other are
    /// reported as a cycle naming all of them.
    pub fn register_each(&self, defs: Vec<ToolDefinition>) -> Vec<Result<ToolSpec, CoreError>> {
        let mut outcomes: Vec<Result<ToolSpec, CoreError>> = defs
            .iter()
            .map(|d| self.register_definition(d.clone()))
            .collect();
        let waiting = |outcomes: &[Result<ToolSpec, CoreError>]| -> Vec<usize> {
            (0..outcomes.len())
                .filter(|&i| outcomes[i].as_ref().is_err_and(only_unknown_dependencies))
                .collect()
        };
        let mut pending = waiting(&outcomes);
        loop {
            for &i in &pending {
                outcomes[i] = self.register_definition(defs[i].clone());
            }
            let still = waiting(&outcomes);
            if still.is_empty() || still.len() == pending.len() {
                pending = still;
                break;
            }
            pending = still;
        }
        // Definitions whose dependencies are neither registered nor among the stalled ones can
        // never resolve; leave them out so the rest can be tried together.
        loop {
            let stalled: HashSet<&str> = pending.iter().map(|&i| defs[i].name.as_str()).collect();
            let resolvable = |i: &usize| {
                defs[*i]
                    .depends_on
                    .iter()
                    .all(|d| stalled.contains(d.as_str()) || self.get(d).is_some())
            };
            let kept: Vec<usize> = pending.iter().copied().filter(resolvable).collect();
            if kept.len() == pending.len() {
                break;
            }
            pending = kept;
        }
        if !pending.is_empty() {
            // Stalled: as one batch they may resolve each other, or form a cycle.
            let batch: Vec<ToolDefinition> = pending.iter().map(|&i| defs[i].clone()).collect();
            match self.register_definitions(batch) {
                Ok(specs) => {
                    for (&i, spec) in pending.iter().zip(specs) {
                        outcomes[i] = Ok(spec);
                    }
                }
                Err(e)
                    if e.report()
                        .is_some_and(|r| r.errors.iter().any(|i| i.code == "depends_on.cycle")) =>
                {
                    let names: Vec<&str> = pending.iter().map(|&i| defs[i].name.as_str()).collect();
                    for &i in &pending {
                        let name = defs[i].name.clone();
                        let message = format!(
                            "{name} is part of a dependency cycle among {}; remove one of the dependencies",
                            names.join(", ")
                        );
                        outcomes[i] = Err(CoreError::Invalid {
                            name,
                            report: Box::new(crate::validate::ValidationReport {
                                errors: vec![crate::validate::Issue {
                                    path: "depends_on".into(),
                                    code: "depends_on.cycle".into(),
                                    message,
                                }],
                                warnings: Vec::new(),
                            }),
                        });
                    }
                }
                // Otherwise each keeps its own unknown-dependency report.
                Err(_) => {}
            }
        }
        outcomes
    }

    /// Registers many tools at once: all or none, one published change.
    pub fn register_all(
        &self,
        tools: Vec<Arc<dyn Tool>>,
        builtin: bool,
    ) -> Result<Vec<ToolSpec>, CoreError> {
        self.insert(
            tools.into_iter().map(Source::Tool).collect(),
            builtin,
            false,
            None,
        )
    }

    /// Replaces a custom tool's definition (keeping its implementation unless `tool` is given).
    pub fn replace_definition(&self, def: ToolDefinition) -> Result<ToolSpec, CoreError> {
        self.insert(vec![Source::Definition(def)], false, true, None)
            .map(|mut v| v.remove(0))
    }

    /// Replaces a custom tool (definition and implementation).
    pub fn replace(&self, tool: Arc<dyn Tool>) -> Result<ToolSpec, CoreError> {
        self.insert(vec![Source::Tool(tool)], false, true, None)
            .map(|mut v| v.remove(0))
    }

    /// Removes a custom tool. Built-ins and tools others depend on cannot be removed.
    pub fn remove(&self, name: &str) -> Result<ToolSpec, CoreError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current.load_full();
        let existing = current
            .get(name)
            .ok_or_else(|| CoreError::NotFound(name.to_owned()))?;
        if existing.builtin {
            return Err(CoreError::BuiltinProtected(name.to_owned()));
        }
        let dependents = current.dependents_of(name);
        if !dependents.is_empty() {
            return Err(CoreError::InUse {
                name: name.to_owned(),
                dependents: dependents.join(", "),
            });
        }
        let spec = existing.spec.clone();
        let mut next = (*current).clone();
        next.tools.remove(spec.name());
        next.by_name.remove(spec.name());
        next.by_category[spec.category() as usize] -= 1;
        self.publish(next);
        Ok(spec)
    }

    /// Withholds `name`: a tool registered under it is removed (and returned), and until the name
    /// is registered again or [released](Registry::release) it is in no list, search, snapshot
    /// iteration or export, while a call to it is refused `unavailable` with `reason` — the whole
    /// message the caller sees, naming what happened and the fix. Withholding a withheld name
    /// replaces its reason. Built-ins cannot be withheld. Tools depending on the name stay
    /// registered (the name is still known).
    pub fn withhold(&self, name: &ToolName, reason: &str) -> Result<Option<ToolSpec>, CoreError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current.load_full();
        let mut next = (*current).clone();
        let removed = match next.by_name.remove(name) {
            Some(e) if e.builtin => return Err(CoreError::BuiltinProtected(name.to_string())),
            Some(e) => {
                next.tools.remove(name);
                next.by_category[e.spec.category() as usize] -= 1;
                Some(e.spec)
            }
            None => None,
        };
        if removed.is_none() && current.withheld_reason(name.as_str()) == Some(reason) {
            return Ok(None);
        }
        next.withheld.insert(name.clone(), Arc::from(reason));
        self.publish(next);
        Ok(removed)
    }

    /// Ends the withholding of `name` without registering anything under it (registering the
    /// name ends it too). Returns whether it was withheld. Refused while other tools depend on
    /// the name and nothing is registered under it.
    pub fn release(&self, name: &str) -> Result<bool, CoreError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current.load_full();
        if !current.withheld.contains_key(name) {
            return Ok(false);
        }
        let dependents = current.dependents_of(name);
        if !dependents.is_empty() {
            return Err(CoreError::InUse {
                name: name.to_owned(),
                dependents: dependents.join(", "),
            });
        }
        let mut next = (*current).clone();
        next.withheld.remove(name);
        self.publish(next);
        Ok(true)
    }

    /// Every withheld name with the reason a call to it is refused with, in name order.
    pub fn withheld(&self) -> Vec<(ToolName, String)> {
        self.current
            .load()
            .withheld()
            .map(|(n, r)| (n.clone(), r.to_owned()))
            .collect()
    }

    /// Validates `def` as [`Registry::register_definition`] (or, with `replace`,
    /// [`Registry::replace_definition`]) would, under `caps` when given (a caller's plan may
    /// allow less than the registry's), without changing the registry.
    pub fn check(
        &self,
        def: ToolDefinition,
        replace: bool,
        caps: Option<TierCaps>,
    ) -> Result<ToolSpec, CoreError> {
        let caps = caps.map_or(self.caps, |c| c.min(self.caps));
        self.insert(vec![Source::Definition(def)], false, replace, Some(caps))
            .map(|mut v| v.remove(0))
    }

    /// Adds or replaces tools; with `dry_run` set to the caps to check under, only validates.
    fn insert(
        &self,
        sources: Vec<Source>,
        builtin: bool,
        replace: bool,
        dry_run: Option<TierCaps>,
    ) -> Result<Vec<ToolSpec>, CoreError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current.load_full();
        let mut next = (*current).clone();
        let items: Vec<(ToolDefinition, Option<Arc<dyn Tool>>)> = sources
            .into_iter()
            .map(|source| match source {
                Source::Tool(t) => (t.definition(), Some(t)),
                Source::Definition(d) => (d, None),
            })
            .collect();
        // A batch may list a tool before the tools it depends on.
        let batch: HashSet<&str> = items.iter().map(|(d, _)| d.name.as_str()).collect();
        let mut added = Vec::with_capacity(items.len());
        for (def, handler) in &items {
            let name = def.name.clone();
            let existing = next.get(&name).cloned();
            match (&existing, replace) {
                (Some(e), _) if e.builtin => return Err(CoreError::BuiltinProtected(name)),
                (Some(_), false) => return Err(CoreError::Duplicate(name)),
                (None, true) => return Err(CoreError::NotFound(name)),
                _ => {}
            }
            let snapshot = &next;
            let lookup = |n: &str| match snapshot.lookup(n) {
                Lookup::Absent if batch.contains(n) => Lookup::Custom,
                found => found,
            };
            let caps = dry_run.unwrap_or(self.caps);
            let env = ValidationEnv {
                max_isolation: caps.max_isolation,
                schema_level: caps.schema_level,
                lookup: Some(&lookup),
                builtin,
            };
            let spec = validate_in(def, &env).map_err(|report| CoreError::Invalid {
                name: name.clone(),
                report: Box::new(report),
            })?;
            // A declarative definition whose run kind is installed gets its handler from it.
            let prepared = match (handler, &def.run) {
                (None, Some(run)) => match self.run_kind(&run.kind) {
                    Some(kind) => Some(kind.prepare(def).map_err(|errors| CoreError::Invalid {
                        name: name.clone(),
                        report: Box::new(crate::validate::ValidationReport {
                            errors,
                            warnings: spec.warnings().to_vec(),
                        }),
                    })?),
                    None => None,
                },
                _ => None,
            };
            let handler = match (handler.clone().or(prepared), existing) {
                (Some(h), _) => Some(h),
                // A Rust implementation stays when its definition is replaced; a handler built
                // from an earlier run section does not outlive it.
                (None, Some(e)) if replace && e.spec.definition().run.is_none() => e.handler,
                (None, _) => None,
            };
            let entry = RegisteredTool {
                facets: (spec.category(), spec.effect(), spec.consequence()),
                spec: spec.clone(),
                handler,
                builtin,
            };
            // Registering a withheld name ends its withholding.
            next.withheld.remove(spec.name());
            next.by_name.insert(spec.name().clone(), entry.clone());
            if let Some(old) = next.tools.insert(spec.name().clone(), entry) {
                next.by_category[old.spec.category() as usize] -= 1;
            }
            next.by_category[spec.category() as usize] += 1;
            added.push(spec);
        }
        // With the whole batch in place, no new or changed tool may sit on a dependency cycle.
        for spec in &added {
            let name = spec.name().as_str();
            if next.reaches(&spec.definition().depends_on, name) {
                return Err(CoreError::Invalid {
                    name: name.to_owned(),
                    report: Box::new(crate::validate::ValidationReport {
                        errors: vec![crate::validate::Issue {
                            path: "depends_on".into(),
                            code: "depends_on.cycle".into(),
                            message: format!(
                                "depends_on would form a cycle through {name}; remove one of the dependencies"
                            ),
                        }],
                        warnings: Vec::new(),
                    }),
                });
            }
        }
        if dry_run.is_some() {
            return Ok(added);
        }
        if !builtin && !replace {
            metrics::counter!(telemetry::DEFINITIONS_CREATED).increment(added.len() as u64);
        }
        self.publish(next);
        Ok(added)
    }

    fn publish(&self, mut next: Snapshot) {
        next.version += 1;
        let version = next.version;
        let counts = next.by_category;
        self.current.store(Arc::new(next));
        for (i, c) in counts.iter().enumerate() {
            let category = Category::ALL[i].as_str();
            metrics::gauge!(telemetry::DEFINITIONS_BY_CATEGORY, "category" => category)
                .set(*c as f64);
        }
        self.changes.send_replace(version);
    }
}

/// Whether registration failed only because dependencies are not registered (yet).
fn only_unknown_dependencies(e: &CoreError) -> bool {
    e.report().is_some_and(|r| {
        !r.errors.is_empty() && r.errors.iter().all(|i| i.code == "depends_on.unknown")
    })
}

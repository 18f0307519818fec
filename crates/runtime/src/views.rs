//! What the front-ends list and show, as typed views with one JSON shape: `toolgate … --json`,
//! the REST API (`/openapi.json` documents these shapes) and the web UI read the same fields.
//!
//! The views also hold the listing rules: a tool, approval or call the caller may not see is
//! left out exactly as if it did not exist.

use std::str::FromStr;

use serde::Serialize;
use serde_json::Value;
use toolgate_core::{
    CallId, Category, Consequence, CoreError, Effect, ErrorKind, Isolation, Issue, Principal,
    Query, RegisteredTool, Registry, ToolDefinition,
};
use toolgate_store::{
    Approval, AuditCall, AuditQuery, AuditRecord, Store, StoreError, StoredDefinition,
};

use crate::definitions::DefinitionChange;

// ---------------------------------------------------------------------------------------------
// Tools

/// A tool as lists show it: `GET /v1/tools`, `toolgate tools list --json`, the web UI's list.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSummary {
    /// The tool's name.
    pub name: String,
    /// Its display title, when the definition has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does, for models and people.
    pub description: String,
    /// Its category.
    pub category: Category,
    /// What a call does to the world.
    pub effect: Effect,
    /// How bad a wrong call would be.
    pub consequence: Consequence,
    /// Whether every call needs a person's yes.
    pub requires_confirmation: bool,
    /// Free tags.
    pub tags: Vec<String>,
    /// A built-in (immutable) tool.
    pub builtin: bool,
    /// Whether calls run something (a built-in, a run kind, a handler); a definition without
    /// one answers every call `unavailable`.
    pub implemented: bool,
    /// SHA-256 (hex) of the definition's canonical JSON.
    pub definition_hash: String,
    /// The definition's own version string, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl ToolSummary {
    /// The summary of a registered tool.
    pub fn of(tool: &RegisteredTool) -> Self {
        let spec = tool.spec();
        let def = spec.definition();
        Self {
            name: spec.name().to_string(),
            title: def.title.clone(),
            description: spec.description().to_owned(),
            category: spec.category(),
            effect: spec.effect(),
            consequence: spec.consequence(),
            requires_confirmation: spec.requires_confirmation(),
            tags: spec.tags().to_vec(),
            builtin: tool.is_builtin(),
            implemented: tool.handler().is_some(),
            definition_hash: spec.definition_hash().to_owned(),
            version: def.version.clone(),
        }
    }
}

/// The resolved limits of a tool, as [`ToolDetail`] shows them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitsView {
    /// How long one attempt may run.
    pub timeout_ms: u64,
    /// The output cap.
    pub max_output_bytes: u64,
    /// The isolation level calls run at.
    pub isolation: Isolation,
    /// Attempts at most (retries apply only to idempotent, retryable tools).
    pub max_attempts: u32,
}

/// One tool in full: `GET /v1/tools/{name}` and the web UI's tool page. (`toolgate tools show
/// --json` prints its `definition`: a definition file that can be edited and added again.)
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDetail {
    /// Every field of the summary.
    #[serde(flatten)]
    pub summary: ToolSummary,
    /// The definition document.
    pub definition: ToolDefinition,
    /// The resolved input schema (parameters and defaults as one JSON Schema).
    pub input_schema: Value,
    /// The output schema, when the definition has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The resolved limits.
    pub limits: LimitsView,
    /// The permissions a principal needs to call it.
    pub required_permissions: Vec<String>,
    /// The stored version, for a custom definition kept in the store (`null` for built-ins and
    /// definitions read from files).
    pub stored_version: Option<i64>,
}

impl ToolDetail {
    /// The detail of a registered tool, with its stored version if it has one.
    pub fn of(tool: &RegisteredTool, stored_version: Option<i64>) -> Self {
        let spec = tool.spec();
        let limits = spec.limits();
        Self {
            summary: ToolSummary::of(tool),
            definition: spec.definition().clone(),
            input_schema: spec.input_schema().clone(),
            output_schema: spec.output_schema().cloned(),
            limits: LimitsView {
                timeout_ms: u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX),
                max_output_bytes: limits.max_output_bytes,
                isolation: limits.isolation,
                max_attempts: limits.max_attempts,
            },
            required_permissions: spec
                .required_permissions()
                .iter()
                .map(|p| p.as_str().to_owned())
                .collect(),
            stored_version,
        }
    }
}

/// A definition change as `POST /v1/tools` and `PUT /v1/tools/{name}` answer it: the tool as
/// now served, its warnings and (for an update) the changed fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedTool {
    /// The tool as now served.
    #[serde(flatten)]
    pub detail: ToolDetail,
    /// The definition's warnings and the paths its sandboxed program cannot reach.
    pub warnings: Vec<Issue>,
    /// The top-level fields an update changed (absent for an add).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_fields: Option<Vec<String>>,
}

impl ChangedTool {
    /// The view of a change; `None` when the registry no longer serves the tool (removed
    /// meanwhile by another writer).
    pub fn of(registry: &Registry, change: &DefinitionChange, update: bool) -> Option<Self> {
        let tool = registry.get(change.spec.name().as_str())?;
        Some(Self {
            detail: ToolDetail::of(&tool, Some(change.stored.version)),
            warnings: change.warnings.clone(),
            changed_fields: update.then(|| change.changed_fields.clone()),
        })
    }
}

/// One page of tools: `{"tools": [...], "nextCursor": ...}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsPage {
    /// The tools of this page, by name.
    pub tools: Vec<ToolSummary>,
    /// Where the next page starts; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// Which tools a listing shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// Only this category.
    pub category: Option<Category>,
    /// Only this effect.
    pub effect: Option<Effect>,
    /// Only this consequence.
    pub consequence: Option<Consequence>,
    /// Only tools with this tag.
    pub tag: Option<String>,
    /// Case-insensitive text in the name or the description.
    pub text: Option<String>,
    /// `Some(true)`: built-ins only; `Some(false)`: custom tools only.
    pub builtin: Option<bool>,
}

/// One page of the tools `principal` may see, at most `limit` (pages are cut from the registry
/// and filtered after, so the registry is read until the page is full or exhausted).
///
/// Errors: a cursor that is not one the registry gave out.
pub fn tools_page(
    registry: &Registry,
    principal: &Principal,
    filter: &ToolFilter,
    limit: usize,
    cursor: Option<String>,
) -> Result<ToolsPage, CoreError> {
    let mut cursor = cursor.filter(|c| !c.is_empty());
    let mut tools = Vec::with_capacity(limit.min(toolgate_core::registry::MAX_PAGE));
    loop {
        let page = registry.list(&Query {
            category: filter.category,
            effect: filter.effect,
            consequence: filter.consequence,
            tag: filter.tag.clone(),
            text: filter.text.clone(),
            limit: (limit - tools.len()).min(toolgate_core::registry::MAX_PAGE),
            cursor: cursor.clone(),
        })?;
        tools.extend(
            page.items
                .iter()
                .filter(|t| principal.may_call(t.spec().name().as_str()))
                .filter(|t| filter.builtin.is_none_or(|b| t.is_builtin() == b))
                .map(ToolSummary::of),
        );
        cursor = page.next_cursor;
        if tools.len() >= limit || cursor.is_none() {
            break;
        }
    }
    Ok(ToolsPage {
        tools,
        next_cursor: cursor,
    })
}

/// Every tool `principal` may see that passes `filter`, in one page (`nextCursor` null).
///
/// Errors: none in practice (the registry's own cursors are used).
pub fn all_tools(
    registry: &Registry,
    principal: &Principal,
    filter: &ToolFilter,
) -> Result<ToolsPage, CoreError> {
    tools_page(registry, principal, filter, usize::MAX, None)
}

/// The tool named `name` if `principal` may see it.
pub fn visible_tool(
    registry: &Registry,
    principal: &Principal,
    name: &str,
) -> Option<RegisteredTool> {
    registry.get(name).filter(|_| principal.may_call(name))
}

/// The detail of `name` if `principal` may see it, with its stored version.
///
/// Errors: the store could not be read.
pub async fn tool_detail(
    registry: &Registry,
    store: &Store,
    principal: &Principal,
    name: &str,
) -> Result<Option<ToolDetail>, StoreError> {
    let Some(tool) = visible_tool(registry, principal, name) else {
        return Ok(None);
    };
    let stored = if tool.is_builtin() {
        None
    } else {
        store.definition(name).await?.map(|d| d.version)
    };
    Ok(Some(ToolDetail::of(&tool, stored)))
}

/// Every stored version of a definition: `GET /v1/tools/{name}/history`, `toolgate tools
/// history --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DefinitionHistory {
    /// The tool's name.
    pub name: String,
    /// Oldest first; those of a removed tool carry `deletedAt`.
    pub versions: Vec<StoredDefinition>,
}

/// The history of `name` if `principal` may see the name and it was ever stored.
///
/// Errors: the store could not be read.
pub async fn history(
    store: &Store,
    principal: &Principal,
    name: &str,
) -> Result<Option<DefinitionHistory>, StoreError> {
    if !principal.may_call(name) {
        return Ok(None);
    }
    let versions = store.history(name).await?;
    Ok((!versions.is_empty()).then(|| DefinitionHistory {
        name: name.to_owned(),
        versions,
    }))
}

// ---------------------------------------------------------------------------------------------
// Approvals

/// A list of approvals, newest first: `GET /v1/approvals`, `toolgate approvals list --json`.
/// Each serializes as the store's [`Approval`] (redacted arguments only).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalList {
    /// The approvals.
    pub approvals: Vec<Approval>,
}

// ---------------------------------------------------------------------------------------------
// Calls

/// One page of the audit log, newest first: `GET /v1/calls`, `toolgate audit --json`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallsPage {
    /// The calls' outcome records.
    pub calls: Vec<AuditRecord>,
    /// Where the next page starts (the last record's sequence number); `null` on the last page.
    pub next_cursor: Option<String>,
}

/// Which calls a listing shows by outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// The call returned data.
    Ok,
    /// The call ended with any error.
    Error,
    /// The call ended with this error kind.
    Kind(ErrorKind),
}

impl CallOutcome {
    /// Whether the record's outcome is this one.
    pub fn matches(self, record: &AuditRecord) -> bool {
        match (self, record.error_kind()) {
            (Self::Ok, kind) => kind.is_none(),
            (Self::Error, kind) => kind.is_some(),
            (Self::Kind(want), kind) => kind == Some(want),
        }
    }
}

impl FromStr for CallOutcome {
    type Err = String;

    /// `ok`, `error` or an error kind's name.
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        match raw {
            "ok" => Ok(Self::Ok),
            "error" => Ok(Self::Error),
            raw => ErrorKind::ALL
                .iter()
                .find(|k| k.as_str() == raw)
                .map(|k| Self::Kind(*k))
                .ok_or_else(|| {
                    format!(
                        "Unknown outcome {raw:?}; use ok, error or an error kind ({})",
                        ErrorKind::ALL
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }),
        }
    }
}

/// Which calls a listing shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallFilter {
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only calls made by this principal.
    pub principal: Option<String>,
    /// Only calls with this outcome.
    pub outcome: Option<CallOutcome>,
}

/// How many store pages one listing reads at most while filling a filtered page; a page may
/// then come back short, with a `nextCursor` to go on from.
pub const MAX_CALL_PAGES: usize = 20;

/// A page of at most `limit` calls before sequence number `before` (newest first) that pass
/// `filter` and `may_read(principal, tool)`.
///
/// Errors: the store could not be read.
pub async fn calls_page(
    store: &Store,
    filter: &CallFilter,
    limit: u32,
    mut before: Option<i64>,
    may_read: impl Fn(&str, &str) -> bool,
) -> Result<CallsPage, StoreError> {
    let principal = filter.principal.as_deref().filter(|p| !p.is_empty());
    let mut calls: Vec<AuditRecord> = Vec::new();
    let mut next = None;
    for _ in 0..MAX_CALL_PAGES {
        let want = limit.saturating_sub(u32::try_from(calls.len()).unwrap_or(u32::MAX));
        let records = store
            .audit(&AuditQuery {
                tool: filter.tool.clone().filter(|t| !t.is_empty()),
                limit: want,
                before,
            })
            .await?;
        let full = records.len() == want as usize;
        let last = records.last().and_then(|r| r.seq);
        calls.extend(records.into_iter().filter(|r| {
            may_read(&r.principal, &r.tool)
                && principal.is_none_or(|p| r.principal == p)
                && filter.outcome.is_none_or(|o| o.matches(r))
        }));
        next = if full { last } else { None };
        if next.is_none() || calls.len() >= limit as usize {
            break;
        }
        before = next;
    }
    Ok(CallsPage {
        calls,
        next_cursor: next.map(|s| s.to_string()),
    })
}

/// One call (`{started, finished, interrupted}`) if `may_read(principal, tool)` allows it:
/// `GET /v1/calls/{id}`, `toolgate audit show`.
///
/// Errors: the store could not be read.
pub async fn call_detail(
    store: &Store,
    id: CallId,
    may_read: impl Fn(&str, &str) -> bool,
) -> Result<Option<AuditCall>, StoreError> {
    let Some(call) = store.audit_call(id).await? else {
        return Ok(None);
    };
    let allowed = match (&call.finished, &call.started) {
        (Some(f), _) => may_read(&f.principal, &f.tool),
        (None, Some(s)) => may_read(&s.principal, &s.tool),
        (None, None) => false,
    };
    Ok(allowed.then_some(call))
}

impl crate::Runtime {
    /// One page of the tools `principal` may see ([`tools_page`]).
    ///
    /// Errors: a cursor the registry did not give out.
    pub fn tools_page(
        &self,
        principal: &Principal,
        filter: &ToolFilter,
        limit: usize,
        cursor: Option<String>,
    ) -> Result<ToolsPage, CoreError> {
        tools_page(self.registry(), principal, filter, limit, cursor)
    }

    /// Every tool `principal` may see that passes `filter` ([`all_tools`]).
    ///
    /// Errors: none in practice.
    pub fn all_tools(
        &self,
        principal: &Principal,
        filter: &ToolFilter,
    ) -> Result<ToolsPage, CoreError> {
        all_tools(self.registry(), principal, filter)
    }

    /// The tool named `name` if `principal` may see it.
    pub fn visible_tool(&self, principal: &Principal, name: &str) -> Option<RegisteredTool> {
        visible_tool(self.registry(), principal, name)
    }

    /// The detail of `name` if `principal` may see it ([`tool_detail`]).
    ///
    /// Errors: the store could not be read.
    pub async fn tool_detail(
        &self,
        principal: &Principal,
        name: &str,
    ) -> Result<Option<ToolDetail>, StoreError> {
        tool_detail(self.registry(), self.store(), principal, name).await
    }

    /// The stored history of `name` if `principal` may see it ([`history`]).
    ///
    /// Errors: the store could not be read.
    pub async fn definition_history(
        &self,
        principal: &Principal,
        name: &str,
    ) -> Result<Option<DefinitionHistory>, StoreError> {
        history(self.store(), principal, name).await
    }

    /// A page of the audit log ([`calls_page`]).
    ///
    /// Errors: the store could not be read.
    pub async fn calls_page(
        &self,
        filter: &CallFilter,
        limit: u32,
        before: Option<i64>,
        may_read: impl Fn(&str, &str) -> bool,
    ) -> Result<CallsPage, StoreError> {
        calls_page(self.store(), filter, limit, before, may_read).await
    }

    /// One call if `may_read` allows it ([`call_detail`]).
    ///
    /// Errors: the store could not be read.
    pub async fn call_detail(
        &self,
        id: CallId,
        may_read: impl Fn(&str, &str) -> bool,
    ) -> Result<Option<AuditCall>, StoreError> {
        call_detail(self.store(), id, may_read).await
    }
}

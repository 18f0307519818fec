//! The `todo_manager` built-in (seed 002): an agent's working plan of at most 15 items, kept per
//! calling principal and plan key in a [`PlanStore`].
//!
//! `{action, items?, itemId?, content?, status?, planId?}` → `{items}` (seed 002's `Plan`), where
//! an item is `{id, content, status}` and `status` is `pending`, `in_progress` or `completed`.
//!
//! # Rules
//!
//! - **Actions.** `create` replaces the plan with `items`; `add` appends `items`; `update` changes
//!   the content and/or status of item `itemId`; `complete` marks item `itemId` completed;
//!   `remove` deletes item `itemId`; `list` returns the plan unchanged (an empty plan if none was
//!   created). Every action returns the whole plan, except that `list` pages it: `limit` items
//!   (1-15, default all) from `cursor`, with `nextCursor` when more follow. A list cursor holds
//!   the plan key and the id of the last item returned; if that item was removed since, the
//!   cursor is stale (`validation`: list again without cursor).
//! - **Update.** The new values come from the optional top-level `content`/`status` fields, or
//!   from the one item in `items` (whose `id` may stand in for `itemId`); not both. At least one
//!   of content and status must be given.
//! - **Ids.** Unique within a plan. An item given without an id gets the next number after the
//!   highest numeric id in the plan ("1", "2", …). Duplicate ids are a `validation` error; an
//!   `itemId` that is not in the plan is an `execution` error naming it and the plan's ids.
//! - **Focus.** At most one item is `in_progress`, and whenever none is and a pending item
//!   exists, the first pending item (in plan order) becomes `in_progress` — so `create` starts the
//!   first pending item (seed 002's example) and `complete` moves on to the next. Setting an item
//!   `in_progress` (with `update` or `add`) moves the focus: the item that was in progress goes
//!   back to `pending`. `create` or `add` with more than one `in_progress` item is a
//!   `validation` error.
//! - **Limit.** At most [`MAX_PLAN_ITEMS`] (15) items per plan; a call that would exceed it is a
//!   `validation` error and changes nothing.
//! - **Ownership.** Plans belong to the calling principal (`ctx.principal().id`) and a plan key
//!   (`planId`, default `"default"`): two principals never see each other's plans, and one
//!   principal may keep several plans.
//! - **Atomicity.** Each change is one [`PlanStore::update`]: a read-modify-write the store
//!   serializes per plan, so concurrent calls on one plan never lose an update. A call that fails
//!   writes nothing.
//!
//! Governance: category `system`, effect `write` (it changes stored state; audited as a write,
//! no confirmation), consequence `low`, not idempotent, permission `tool.todo.write`.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_core::{
    BoxFuture, Category, Consequence, Effect, PrincipalId, Tool, ToolBuilder, ToolContext,
    ToolDefinition, ToolError, ToolOutput,
};

use crate::cursor::{self, Cursor};

/// The tool's name.
pub const TODO_MANAGER: &str = "todo_manager";

/// Most items a plan holds (seed 002).
pub const MAX_PLAN_ITEMS: usize = 15;

/// The plan key used when `planId` is not given.
pub const DEFAULT_PLAN_ID: &str = "default";

/// The permission callers must hold.
pub const TODO_PERMISSION: &str = "tool.todo.write";

/// Longest item id, in characters.
pub const MAX_ITEM_ID_CHARS: usize = 64;

/// Longest item content, in characters.
pub const MAX_ITEM_CONTENT_CHARS: usize = 1000;

/// The description a model routes by.
pub const TODO_MANAGER_DESCRIPTION: &str = "Keeps your working plan for a multi-step task: a \
list of at most 15 items {id, content, status}, status pending, in_progress or completed. Use it to \
plan before starting work with several steps, to mark progress as you go, and to check what is left. \
Actions: create (replace the plan with items), add (append items), update (change item itemId: \
give the new content and/or status as the content/status fields, or as the one item in items), \
complete (mark item itemId completed), remove (delete item itemId), list (read the plan, paged \
by limit and cursor). Every action returns the plan as {items}. Exactly one item is in_progress while pending work \
remains: create starts the first pending item, complete moves on to the next pending one, and \
setting an item in_progress puts the previous one back to pending. Items without an id get the next \
number. Plans are private to the caller and persist between calls; keep separate plans with planId. Unknown or duplicate item ids fail with a message listing the plan's ids.";

/// A plan item's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    Pending,
    InProgress,
    Completed,
}

impl ItemStatus {
    /// The wire names, in order.
    pub const NAMES: [&'static str; 3] = ["pending", "in_progress", "completed"];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        match raw {
            "pending" => Some(Self::Pending),
            "in_progress" => Some(Self::InProgress),
            "completed" => Some(Self::Completed),
            _ => None,
        }
    }
}

impl fmt::Display for ItemStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One item of a plan (seed 002 `PlanItem`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanItem {
    pub id: String,
    pub content: String,
    pub status: ItemStatus,
}

/// A change to one plan: receives the stored items (`None` if the plan was never saved) and
/// returns the new items, or an error (then nothing is saved).
pub type PlanEdit = Box<dyn FnOnce(Option<Value>) -> Result<Value, ToolError> + Send>;

/// Where plans live. Items are stored as the JSON array of [`PlanItem`]s; a store does not look
/// inside. Implementations: [`MemoryPlanStore`] here, the database store in the `toolgate` CLI.
pub trait PlanStore: Send + Sync {
    /// The items of `principal`'s plan `plan`; `None` if it was never saved.
    fn load<'a>(
        &'a self,
        principal: &'a PrincipalId,
        plan: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ToolError>>;

    /// Replaces (or creates) `principal`'s plan `plan`.
    fn save<'a>(
        &'a self,
        principal: &'a PrincipalId,
        plan: &'a str,
        items: &'a Value,
    ) -> BoxFuture<'a, Result<(), ToolError>>;

    /// Atomic read-modify-write of one plan: no other write to the same (principal, plan) may
    /// come between reading the items `edit` receives and saving what it returns. When `edit`
    /// fails nothing is saved and its error is returned. Returns the saved items.
    fn update<'a>(
        &'a self,
        principal: &'a PrincipalId,
        plan: &'a str,
        edit: PlanEdit,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
}

/// Plans in memory, for library users and tests; gone when the process ends. Updates are
/// serialized by one lock.
#[derive(Debug, Default)]
pub struct MemoryPlanStore {
    plans: Mutex<HashMap<(PrincipalId, String), Value>>,
}

impl MemoryPlanStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn plans(&self) -> std::sync::MutexGuard<'_, HashMap<(PrincipalId, String), Value>> {
        // The map is only changed after an edit returned, so a panic under the lock cannot
        // leave it half-written: the poisoned data is sound.
        self.plans.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PlanStore for MemoryPlanStore {
    fn load<'a>(
        &'a self,
        principal: &'a PrincipalId,
        plan: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ToolError>> {
        let found = self
            .plans()
            .get(&(principal.clone(), plan.to_owned()))
            .cloned();
        Box::pin(async move { Ok(found) })
    }

    fn save<'a>(
        &'a self,
        principal: &'a PrincipalId,
        plan: &'a str,
        items: &'a Value,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        self.plans()
            .insert((principal.clone(), plan.to_owned()), items.clone());
        Box::pin(async move { Ok(()) })
    }

    fn update<'a>(
        &'a self,
        principal: &'a PrincipalId,
        plan: &'a str,
        edit: PlanEdit,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        let result = {
            let mut plans = self.plans();
            let key = (principal.clone(), plan.to_owned());
            edit(plans.get(&key).cloned()).inspect(|items| {
                plans.insert(key, items.clone());
            })
        };
        Box::pin(async move { result })
    }
}

/// `todo_manager`: an agent's plan, per principal and plan key, in a [`PlanStore`].
#[derive(Clone)]
pub struct TodoManager {
    store: Arc<dyn PlanStore>,
    definition: ToolDefinition,
}

impl fmt::Debug for TodoManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TodoManager").finish_non_exhaustive()
    }
}

impl TodoManager {
    /// The tool over `store`.
    pub fn new(store: Arc<dyn PlanStore>) -> Self {
        let definition = ToolBuilder::new(TODO_MANAGER, TODO_MANAGER_DESCRIPTION)
            .title("Todo manager")
            .category(Category::System)
            .effect(Effect::Write)
            .consequence(Consequence::Low)
            .requires_confirmation(false)
            .idempotent(false)
            .permission(TODO_PERMISSION)
            .input_schema(input_schema())
            .output_schema(output_schema())
            .tag("planning")
            .definition()
            .clone();
        Self { store, definition }
    }
}

fn status_schema(description: &str) -> Value {
    json!({"type": "string", "enum": ItemStatus::NAMES, "description": description})
}

fn input_schema() -> Value {
    let id = json!({
        "type": "string", "minLength": 1, "maxLength": MAX_ITEM_ID_CHARS,
        "description": "The item's id, unique in the plan; left out, the item gets the next number"
    });
    let content = |description: &str| json!({"type": "string", "minLength": 1, "maxLength": MAX_ITEM_CONTENT_CHARS, "description": description});
    json!({
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["create", "add", "update", "complete", "remove", "list"],
                "description": "create: replace the plan with items. add: append items. update: change item itemId (content/status). complete: mark item itemId completed. remove: delete item itemId. list: read the plan"
            },
            "items": {
                "type": "array",
                "description": "create and add: the items (at most 15 in the plan). update: optionally the one item with the new values",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": id,
                        "content": content("What to do, as one short imperative sentence"),
                        "status": status_schema("pending (the default), in_progress or completed")
                    },
                    "additionalProperties": false
                }
            },
            "itemId": {
                "type": "string", "minLength": 1, "maxLength": MAX_ITEM_ID_CHARS,
                "description": "update, complete, remove: the id of the item to change"
            },
            "content": content("update: the item's new content"),
            "status": status_schema("update: the item's new status"),
            "planId": {
                "type": "string",
                "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$",
                "default": DEFAULT_PLAN_ID,
                "description": "Which of your plans (letters, digits, _ . : -; at most 64 characters)"
            },
            "limit": {
                "type": "integer", "minimum": 1, "maximum": MAX_PLAN_ITEMS,
                "description": "list: most items to return (1-15; all when left out); when more follow, the result has nextCursor"
            },
            "cursor": toolgate_core::schema::parameter_schema(&cursor::cursor_param())
        },
        "required": ["action"],
        "additionalProperties": false
    })
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "maxItems": MAX_PLAN_ITEMS,
                "description": "The whole plan after the action, in order",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "content": {"type": "string"},
                        "status": {"type": "string", "enum": ItemStatus::NAMES}
                    },
                    "required": ["id", "content", "status"],
                    "additionalProperties": false
                }
            },
            "nextCursor": cursor::next_cursor_schema()
        },
        "required": ["items"],
        "additionalProperties": false
    })
}

impl Tool for TodoManager {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            let request = Request::parse(&args)?;
            let principal = ctx.principal().id.clone();
            let plan = request.plan.clone();
            ctx.check_cancelled()?;
            if request.action == Action::List {
                let items = match self.store.load(&principal, &plan).await? {
                    Some(stored) => parse_stored(stored, &plan)?,
                    None => Vec::new(),
                };
                return list_page(&items, &request);
            }
            let items = {
                let edit: PlanEdit = Box::new(move |current| {
                    let current = match current {
                        Some(stored) => parse_stored(stored, &request.plan)?,
                        None => Vec::new(),
                    };
                    let next = request.apply(current)?;
                    items_to_value(&next, &request.plan)
                });
                self.store.update(&principal, &plan, edit).await?
            };
            Ok(json!({ "items": items }))
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Create,
    Add,
    Update,
    Complete,
    Remove,
    List,
}

impl Action {
    fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "create" => Self::Create,
            "add" => Self::Add,
            "update" => Self::Update,
            "complete" => Self::Complete,
            "remove" => Self::Remove,
            "list" => Self::List,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Add => "add",
            Self::Update => "update",
            Self::Complete => "complete",
            Self::Remove => "remove",
            Self::List => "list",
        }
    }
}

/// An item as given in `items`: every field optional (what is required depends on the action).
#[derive(Clone, Debug, Default)]
struct ItemInput {
    id: Option<String>,
    content: Option<String>,
    status: Option<ItemStatus>,
}

/// One page of the plan for `list`: after the cursor's item, at most `limit` items.
fn list_page(items: &[PlanItem], request: &Request) -> ToolOutput {
    let plan = request.plan.as_str();
    let start = match &request.cursor {
        None => 0,
        Some(c) => {
            if c.scope_str("plan") != Some(plan) {
                let other = c.scope_str("plan").unwrap_or_default();
                return Err(cursor::mismatch(TODO_MANAGER, &format!("planId {other:?}")));
            }
            let Some(after) = c.position.as_str() else {
                return Err(cursor::mismatch(TODO_MANAGER, "another position"));
            };
            let at = items.iter().position(|i| i.id == after).ok_or_else(|| {
                invalid(format!(
                    "cursor is stale: item {after:?} was removed from plan {plan:?} since the previous page; list again without cursor"
                ))
            })?;
            at + 1
        }
    };
    let limit = request.limit.unwrap_or(MAX_PLAN_ITEMS);
    let page: Vec<PlanItem> = items.iter().skip(start).take(limit).cloned().collect();
    let mut out = json!({ "items": items_to_value(&page, plan)? });
    if let Some(last) = page.last()
        && start + page.len() < items.len()
    {
        let mut scope = serde_json::Map::new();
        scope.insert("plan".into(), json!(plan));
        out["nextCursor"] = json!(cursor::encode(TODO_MANAGER, scope, json!(last.id)));
    }
    Ok(out)
}

/// The parsed arguments of one call.
#[derive(Debug)]
struct Request {
    action: Action,
    plan: String,
    /// `list` only: page size and start.
    limit: Option<usize>,
    cursor: Option<Cursor>,
    items: Option<Vec<ItemInput>>,
    item_id: Option<String>,
    content: Option<String>,
    status: Option<ItemStatus>,
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::validation(message)
}

fn opt_str(args: &Value, name: &str) -> Result<Option<String>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("Argument {name} must be a string"))),
    }
}

fn parse_status(raw: Option<String>, at: &str) -> Result<Option<ItemStatus>, ToolError> {
    raw.map(|s| {
        ItemStatus::parse(&s).ok_or_else(|| {
            invalid(format!(
                "{at} must be pending, in_progress or completed, not {s:?}"
            ))
        })
    })
    .transpose()
}

fn check_id(id: &str, at: &str) -> Result<(), ToolError> {
    if id.trim().is_empty()
        || id.chars().count() > MAX_ITEM_ID_CHARS
        || id.chars().any(char::is_control)
    {
        return Err(invalid(format!(
            "{at} must be 1-{MAX_ITEM_ID_CHARS} printable characters, not {id:?}"
        )));
    }
    Ok(())
}

fn check_content(content: &str, at: &str) -> Result<(), ToolError> {
    if content.trim().is_empty() {
        return Err(invalid(format!("{at} is empty; say what the step is")));
    }
    let chars = content.chars().count();
    if chars > MAX_ITEM_CONTENT_CHARS {
        return Err(invalid(format!(
            "{at} has {chars} characters; an item holds at most {MAX_ITEM_CONTENT_CHARS}, so split the step"
        )));
    }
    Ok(())
}

fn check_plan_id(plan: &str) -> Result<(), ToolError> {
    let ok = (1..=64).contains(&plan.len())
        && plan
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && plan
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "planId must be 1-64 letters, digits, _ . : or - starting with a letter or digit, not {plan:?}"
        )))
    }
}

impl Request {
    fn parse(args: &Value) -> Result<Self, ToolError> {
        let raw = opt_str(args, "action")?.ok_or_else(|| {
            invalid(
                "Missing required argument action (create, add, update, complete, remove or list)",
            )
        })?;
        let action = Action::parse(&raw).ok_or_else(|| {
            invalid(format!(
                "Unknown action {raw:?}: use create, add, update, complete, remove or list"
            ))
        })?;
        let plan = opt_str(args, "planId")?.unwrap_or_else(|| DEFAULT_PLAN_ID.to_owned());
        check_plan_id(&plan)?;
        let items = match args.get("items") {
            None | Some(Value::Null) => None,
            Some(Value::Array(list)) => Some(
                list.iter()
                    .enumerate()
                    .map(|(i, v)| parse_item(v, i))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(_) => {
                return Err(invalid(
                    "Argument items must be an array of {id, content, status} objects",
                ));
            }
        };
        let item_id = opt_str(args, "itemId")?;
        if let Some(id) = &item_id {
            check_id(id, "itemId")?;
        }
        let content = opt_str(args, "content")?;
        if let Some(c) = &content {
            check_content(c, "content")?;
        }
        let status = parse_status(opt_str(args, "status")?, "status")?;
        let limit = match args.get("limit") {
            None | Some(Value::Null) => None,
            Some(_) => Some(cursor::limit_arg(args, MAX_PLAN_ITEMS, MAX_PLAN_ITEMS)?),
        };
        let cursor = cursor::cursor_arg(args, TODO_MANAGER)?;
        let request = Self {
            action,
            plan,
            limit,
            cursor,
            items,
            item_id,
            content,
            status,
        };
        request.check_fields()?;
        Ok(request)
    }

    /// Refuses arguments the action does not use (they are mistakes) and missing ones it needs.
    fn check_fields(&self) -> Result<(), ToolError> {
        let action = self.action.as_str();
        let unused = |name: &str| {
            invalid(format!(
                "Action {action} does not take {name}; {}",
                usage(self.action)
            ))
        };
        let uses_items = matches!(self.action, Action::Create | Action::Add | Action::Update);
        let uses_item_id = matches!(
            self.action,
            Action::Update | Action::Complete | Action::Remove
        );
        if self.items.is_some() && !uses_items {
            return Err(unused("items"));
        }
        if self.item_id.is_some() && !uses_item_id {
            return Err(unused("itemId"));
        }
        if self.action != Action::List {
            if self.limit.is_some() {
                return Err(unused("limit"));
            }
            if self.cursor.is_some() {
                return Err(unused("cursor"));
            }
        }
        if self.action != Action::Update {
            if self.content.is_some() {
                return Err(unused("content"));
            }
            if self.status.is_some() {
                return Err(unused("status"));
            }
        }
        match self.action {
            Action::Create | Action::Add => match &self.items {
                None => Err(invalid(format!(
                    "Action {action} needs items; {}",
                    usage(self.action)
                ))),
                Some(items) if items.is_empty() => Err(invalid(format!(
                    "Action {action} needs at least one item in items; {}",
                    usage(self.action)
                ))),
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if item.content.is_none() {
                            return Err(invalid(format!(
                                "items[{i}] has no content; every new item needs content (what to do)"
                            )));
                        }
                    }
                    Ok(())
                }
            },
            Action::Complete | Action::Remove if self.item_id.is_none() => Err(invalid(format!(
                "Action {action} needs itemId; {}",
                usage(self.action)
            ))),
            _ => Ok(()),
        }
    }

    /// The update's target and new values, from `itemId` + `content`/`status` or the one item.
    fn update_target(&self) -> Result<(String, Option<String>, Option<ItemStatus>), ToolError> {
        let (id, content, status) = match &self.items {
            Some(items) => {
                if self.content.is_some() || self.status.is_some() {
                    return Err(invalid(
                        "Give the new values either as content/status or as the one item in items, not both",
                    ));
                }
                let [item] = items.as_slice() else {
                    return Err(invalid(format!(
                        "Action update changes one item: items must hold exactly one item, not {}",
                        items.len()
                    )));
                };
                let id = match (&self.item_id, &item.id) {
                    (Some(a), Some(b)) if a != b => {
                        return Err(invalid(format!(
                            "itemId {a:?} and items[0].id {b:?} differ; give the id of the item to update once"
                        )));
                    }
                    (Some(a), _) => a.clone(),
                    (None, Some(b)) => b.clone(),
                    (None, None) => {
                        return Err(invalid(format!(
                            "Action update needs itemId; {}",
                            usage(Action::Update)
                        )));
                    }
                };
                (id, item.content.clone(), item.status)
            }
            None => {
                let Some(id) = self.item_id.clone() else {
                    return Err(invalid(format!(
                        "Action update needs itemId; {}",
                        usage(Action::Update)
                    )));
                };
                (id, self.content.clone(), self.status)
            }
        };
        if content.is_none() && status.is_none() {
            return Err(invalid(format!(
                "Action update needs a new content or status for item {id:?}; {}",
                usage(Action::Update)
            )));
        }
        Ok((id, content, status))
    }

    /// The plan after this (mutating) action.
    fn apply(&self, mut plan: Vec<PlanItem>) -> Result<Vec<PlanItem>, ToolError> {
        match self.action {
            Action::Create => {
                let new = self.new_items(&[])?;
                single_focus(&new)?;
                plan = new;
            }
            Action::Add => {
                let new = self.new_items(&plan)?;
                single_focus(&new)?;
                if new.iter().any(|i| i.status == ItemStatus::InProgress) {
                    unfocus(&mut plan);
                }
                plan.extend(new);
            }
            Action::Update => {
                let (id, content, status) = self.update_target()?;
                let at = find(&plan, &id, &self.plan)?;
                if status == Some(ItemStatus::InProgress) {
                    unfocus(&mut plan);
                }
                if let Some(content) = content {
                    plan[at].content = content;
                }
                if let Some(status) = status {
                    plan[at].status = status;
                }
            }
            Action::Complete => {
                let at = find(
                    &plan,
                    self.item_id.as_deref().unwrap_or_default(),
                    &self.plan,
                )?;
                plan[at].status = ItemStatus::Completed;
            }
            Action::Remove => {
                let at = find(
                    &plan,
                    self.item_id.as_deref().unwrap_or_default(),
                    &self.plan,
                )?;
                plan.remove(at);
            }
            Action::List => {}
        }
        focus_first_pending(&mut plan);
        Ok(plan)
    }

    /// The items of a create or add, with ids assigned, checked against each other and `existing`.
    fn new_items(&self, existing: &[PlanItem]) -> Result<Vec<PlanItem>, ToolError> {
        let given = self.items.as_deref().unwrap_or_default();
        let total = existing.len() + given.len();
        if total > MAX_PLAN_ITEMS {
            return Err(too_many(total));
        }
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for (i, item) in given.iter().enumerate() {
            let Some(id) = item.id.as_deref() else {
                continue;
            };
            if existing.iter().any(|e| e.id == id) {
                return Err(invalid(format!(
                    "Item id {id:?} (items[{i}]) is already in the plan; use action update to change that item, or give the new one another id (plan ids: {})",
                    ids(existing)
                )));
            }
            if !seen.insert(id) {
                return Err(invalid(format!(
                    "Item id {id:?} appears more than once in items; every item needs its own id"
                )));
            }
        }
        let mut next = existing
            .iter()
            .map(|e| e.id.as_str())
            .chain(seen.iter().copied())
            .filter_map(|id| id.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        let mut out = Vec::with_capacity(given.len());
        for item in given {
            let id = match &item.id {
                Some(id) => id.clone(),
                None => {
                    next += 1;
                    next.to_string()
                }
            };
            out.push(PlanItem {
                id,
                content: item.content.clone().unwrap_or_default(),
                status: item.status.unwrap_or(ItemStatus::Pending),
            });
        }
        Ok(out)
    }
}

fn parse_item(value: &Value, i: usize) -> Result<ItemInput, ToolError> {
    let Value::Object(fields) = value else {
        return Err(invalid(format!(
            "items[{i}] must be an object {{id, content, status}}"
        )));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "id" | "content" | "status"))
    {
        return Err(invalid(format!(
            "items[{i}] has an unknown field {unknown:?}; an item has id, content and status"
        )));
    }
    let id =
        opt_str(value, "id").map_err(|_| invalid(format!("items[{i}].id must be a string")))?;
    if let Some(id) = &id {
        check_id(id, &format!("items[{i}].id"))?;
    }
    let content = opt_str(value, "content")
        .map_err(|_| invalid(format!("items[{i}].content must be a string")))?;
    if let Some(c) = &content {
        check_content(c, &format!("items[{i}].content"))?;
    }
    let status = opt_str(value, "status")
        .map_err(|_| invalid(format!("items[{i}].status must be a string")))?;
    let status = parse_status(status, &format!("items[{i}].status"))?;
    Ok(ItemInput {
        id,
        content,
        status,
    })
}

fn usage(action: Action) -> &'static str {
    match action {
        Action::Create => {
            "for example {\"action\": \"create\", \"items\": [{\"id\": \"1\", \"content\": \"Gather context\"}]}"
        }
        Action::Add => {
            "for example {\"action\": \"add\", \"items\": [{\"content\": \"Write the summary\"}]}"
        }
        Action::Update => {
            "for example {\"action\": \"update\", \"itemId\": \"2\", \"status\": \"in_progress\"} or {\"action\": \"update\", \"itemId\": \"2\", \"content\": \"Map the billing domain\"}"
        }
        Action::Complete => "for example {\"action\": \"complete\", \"itemId\": \"1\"}",
        Action::Remove => "for example {\"action\": \"remove\", \"itemId\": \"3\"}",
        Action::List => {
            "for example {\"action\": \"list\"} or {\"action\": \"list\", \"limit\": 5, \"cursor\": \"<nextCursor of the previous page>\"}"
        }
    }
}

fn too_many(total: usize) -> ToolError {
    invalid(format!(
        "A plan holds at most {MAX_PLAN_ITEMS} items; this one would have {total}. Remove or complete-and-remove items first"
    ))
}

/// At most one of the given items may be in progress.
fn single_focus(items: &[PlanItem]) -> Result<(), ToolError> {
    let focused: Vec<&str> = items
        .iter()
        .filter(|i| i.status == ItemStatus::InProgress)
        .map(|i| i.id.as_str())
        .collect();
    if focused.len() > 1 {
        return Err(invalid(format!(
            "At most one item can be in_progress, and items {} all are; mark the others pending",
            focused.join(", ")
        )));
    }
    Ok(())
}

/// Puts the item in progress (if any) back to pending.
fn unfocus(plan: &mut [PlanItem]) {
    for item in plan
        .iter_mut()
        .filter(|i| i.status == ItemStatus::InProgress)
    {
        item.status = ItemStatus::Pending;
    }
}

/// With no item in progress, the first pending item becomes in progress.
fn focus_first_pending(plan: &mut [PlanItem]) {
    if plan.iter().any(|i| i.status == ItemStatus::InProgress) {
        return;
    }
    if let Some(first) = plan.iter_mut().find(|i| i.status == ItemStatus::Pending) {
        first.status = ItemStatus::InProgress;
    }
}

fn ids(plan: &[PlanItem]) -> String {
    if plan.is_empty() {
        return "none".to_owned();
    }
    plan.iter()
        .map(|i| i.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The index of item `id`, or an `execution` error naming it and the plan's ids.
fn find(plan: &[PlanItem], id: &str, plan_id: &str) -> Result<usize, ToolError> {
    plan.iter().position(|i| i.id == id).ok_or_else(|| {
        if plan.is_empty() {
            ToolError::execution(format!(
                "No item {id:?}: plan {plan_id:?} has no items; create it first with action create"
            ))
        } else {
            ToolError::execution(format!(
                "No item {id:?} in plan {plan_id:?}; its items are {} (call action list to see them)",
                ids(plan)
            ))
        }
    })
}

fn parse_stored(stored: Value, plan: &str) -> Result<Vec<PlanItem>, ToolError> {
    serde_json::from_value(stored).map_err(|e| {
        ToolError::execution(format!(
            "Plan {plan:?} is stored in an unreadable form ({e}); start it again with action create"
        ))
    })
}

fn items_to_value(items: &[PlanItem], plan: &str) -> Result<Value, ToolError> {
    serde_json::to_value(items)
        .map_err(|e| ToolError::execution(format!("Plan {plan:?} could not be written out: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, status: ItemStatus) -> PlanItem {
        PlanItem {
            id: id.into(),
            content: format!("Step {id}"),
            status,
        }
    }

    #[test]
    fn focus_goes_to_the_first_pending_item() {
        use ItemStatus::*;
        let mut plan = vec![item("1", Completed), item("2", Pending), item("3", Pending)];
        focus_first_pending(&mut plan);
        assert_eq!(plan[1].status, InProgress);
        assert_eq!(plan[2].status, Pending);
        let mut done = vec![item("1", Completed)];
        focus_first_pending(&mut done);
        assert_eq!(done[0].status, Completed);
    }

    #[test]
    fn ids_are_numbered_after_the_highest_numeric_id() {
        let request = Request::parse(&json!({
            "action": "add",
            "items": [{"content": "a"}, {"id": "7", "content": "b"}, {"content": "c"}]
        }))
        .unwrap();
        let existing = vec![
            item("2", ItemStatus::Pending),
            item("x", ItemStatus::Pending),
        ];
        let new = request.new_items(&existing).unwrap();
        let ids: Vec<&str> = new.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["8", "7", "9"]);
    }
}

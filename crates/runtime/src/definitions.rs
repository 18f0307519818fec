//! Adding, updating and removing a custom definition: the one implementation behind
//! `toolgate tools add|update|rm` and `POST|PUT|DELETE /v1/tools[/{name}]`.
//!
//! Every change runs the same steps in the same order: validation in the registry under the
//! editor's plan caps (nothing is written when it fails), the `validated` event, the store write
//! (a new version in the history, the definition-count limit of the plan checked in the same
//! transaction, the `created`/`updated`/`deleted` event), then the registry — so a long-lived
//! process never serves a definition the store did not take. A registry that a sync task brought
//! up to date first is not an error.

use std::time::{Duration, Instant};

use toolgate_core::{CoreError, ErrorChain, Issue, Principal, Registry, ToolDefinition, ToolSpec};
use toolgate_sandbox::ProgramUser;
use toolgate_store::{Store, StoredDefinition, Tier};

use crate::op_error::OpError;

/// What a definition change reads and writes.
#[derive(Clone, Copy, Debug)]
pub struct DefinitionParts<'a> {
    /// Where definitions, their history and their events are kept.
    pub store: &'a Store,
    /// The tools this process serves.
    pub registry: &'a Registry,
    /// The user sandboxed programs run as, for the warnings about paths a command tool's
    /// program cannot reach; `None` leaves those warnings out.
    pub program_user: Option<&'a ProgramUser>,
}

/// Who changes a definition.
#[derive(Clone, Copy, Debug)]
pub struct Editor<'a> {
    /// The principal: tools it may not see do not exist for it (same answers as for a missing
    /// tool).
    pub principal: &'a Principal,
    /// Its plan: isolation and JSON Schema caps, and the definition count.
    pub plan: &'a Tier,
    /// How the history records it (`local`, `api:alice`, …).
    pub actor: &'a str,
}

/// A stored change.
#[derive(Clone, Debug)]
pub struct DefinitionChange {
    /// The validated definition now served.
    pub spec: ToolSpec,
    /// The version the store wrote (the current one when an update changed nothing).
    pub stored: StoredDefinition,
    /// The top-level fields an update changed (empty for an add, or an update that changed
    /// nothing and so wrote nothing).
    pub changed_fields: Vec<String>,
    /// The definition's own warnings, then the paths its sandboxed program cannot reach.
    pub warnings: Vec<Issue>,
}

/// Validates and stores a new custom definition, then serves it.
///
/// Errors: [`OpError::Refused`] when the registry refuses it (every validation problem, a
/// built-in name, a duplicate, the plan's isolation or schema level); the store's `Conflict`
/// (stored meanwhile) or `PlanLimit` (the plan's definition count).
pub async fn add(
    parts: DefinitionParts<'_>,
    editor: Editor<'_>,
    def: ToolDefinition,
) -> Result<DefinitionChange, OpError> {
    let spec = checked(parts, editor, def.clone(), false).await?;
    let stored = parts
        .store
        .insert_definition(&spec, editor.actor, editor.plan)
        .await?;
    if let Err(e) = parts.registry.register_definition(def) {
        // Another writer's change reached the registry first (the sync task converges it).
        tracing::debug!(tool = %spec.name(), error = %ErrorChain(&e), "registered by sync instead");
    }
    Ok(change(parts, spec, stored, Vec::new()))
}

/// Validates and stores a new version of a stored custom definition, then serves it.
///
/// Errors: [`OpError::Forbidden`] for a built-in; [`OpError::NotFound`] for a tool the editor
/// cannot see or one that is not stored (a tools-directory file); [`OpError::Refused`] when the
/// registry refuses the new version.
pub async fn update(
    parts: DefinitionParts<'_>,
    editor: Editor<'_>,
    def: ToolDefinition,
) -> Result<DefinitionChange, OpError> {
    let name = def.name.clone();
    let shown = parts
        .registry
        .get(&name)
        .filter(|_| editor.principal.may_call(&name));
    if shown.as_ref().is_some_and(|t| t.is_builtin()) {
        return Err(OpError::Forbidden(format!(
            "Built-in tool {name} cannot be changed; define a tool with another name"
        )));
    }
    let stored = if editor.principal.may_call(&name) {
        parts.store.definition(&name).await?
    } else {
        None
    };
    if stored.is_none() {
        return Err(OpError::NotFound(match shown {
            Some(_) => format!(
                "No stored tool named {name}: it comes from the tools directory, not the store; add it to the store first (`toolgate tools add`, POST /v1/tools) or edit its file"
            ),
            None => format!(
                "No stored tool named {name}; add it first (`toolgate tools add`, POST /v1/tools)"
            ),
        }));
    }
    let spec = checked(parts, editor, def.clone(), true).await?;
    let (stored, changed) = parts.store.update_definition(&spec, editor.actor).await?;
    if let Err(e) = parts.registry.replace_definition(def) {
        tracing::debug!(tool = %name, error = %ErrorChain(&e), "replaced by sync instead");
    }
    Ok(change(parts, spec, stored, changed))
}

/// Removes a stored custom definition (its versions stay in the history) and stops serving it.
/// Nothing is written when a served tool still depends on it.
///
/// Errors: [`OpError::Forbidden`] for a built-in; [`OpError::Conflict`] for a tool from the
/// tools directory (not stored); [`OpError::Refused`] when tools depend on it;
/// [`OpError::NotFound`] when there is no such tool for the editor.
pub async fn remove(
    parts: DefinitionParts<'_>,
    editor: Editor<'_>,
    name: &str,
) -> Result<StoredDefinition, OpError> {
    let visible = editor.principal.may_call(name);
    let served = parts.registry.get(name).filter(|_| visible);
    if served.as_ref().is_some_and(|t| t.is_builtin()) {
        return Err(OpError::Forbidden(format!(
            "Built-in tool {name} cannot be removed"
        )));
    }
    // A stored definition that no longer loads (so is not served) can still be removed.
    let stored = if visible {
        parts.store.definition(name).await?
    } else {
        None
    };
    if stored.is_none() {
        return Err(match served {
            Some(_) => OpError::Conflict(format!(
                "Tool {name} is not stored (it comes from the tools directory); remove its file instead"
            )),
            None => OpError::NotFound(format!(
                "Tool not found: {name} (`toolgate tools list` or GET /v1/tools lists the tools)"
            )),
        });
    }
    let dependents: Vec<String> = parts
        .registry
        .snapshot()
        .iter()
        .filter(|t| t.spec().definition().depends_on.iter().any(|d| d == name))
        .map(|t| t.spec().name().to_string())
        .collect();
    if !dependents.is_empty() {
        return Err(OpError::Refused {
            name: name.to_owned(),
            error: CoreError::InUse {
                name: name.to_owned(),
                dependents: dependents.join(", "),
            },
        });
    }
    let removed = parts.store.delete_definition(name, editor.actor).await?;
    match parts.registry.remove(name) {
        Ok(_) | Err(CoreError::NotFound(_)) => {}
        // A dependent registered meanwhile: the sync task removes the tool when it can.
        Err(e) => {
            tracing::warn!(tool = %name, error = %ErrorChain(&e), "removed from the store, still served")
        }
    }
    Ok(removed)
}

/// How many parameters a definition has, as the `validated` event counts them: the properties
/// of its resolved input schema (so a definition with a raw `input_schema` counts its
/// properties, as one with `parameters` counts those).
pub fn parameter_count(spec: &ToolSpec) -> usize {
    spec.input_schema()
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map_or(0, serde_json::Map::len)
}

/// Writes the `validated` event of a definition that passed validation in `took`. A failure to
/// record it is logged; it never undoes the change.
pub async fn record_validated(store: &Store, spec: &ToolSpec, took: Duration) {
    if let Err(e) = store
        .record_validated(
            spec.name().as_str(),
            spec.category(),
            parameter_count(spec),
            took,
        )
        .await
    {
        tracing::warn!(tool = %spec.name(), error = %ErrorChain(&e), "could not record the validated event");
    }
}

/// The definition's own warnings, then the `read_paths`/`write_paths` of a command tool that
/// the user its sandboxed program runs as cannot reach.
pub fn warnings(spec: &ToolSpec, program_user: Option<&ProgramUser>) -> Vec<Issue> {
    let mut all = spec.warnings().to_vec();
    if let Some(user) = program_user {
        all.extend(toolgate_sandbox::access_warnings(
            spec.definition(),
            spec.limits().isolation,
            user,
        ));
    }
    all
}

/// Validates as registration would, under the editor's plan, and records the `validated` event.
async fn checked(
    parts: DefinitionParts<'_>,
    editor: Editor<'_>,
    def: ToolDefinition,
    replace: bool,
) -> Result<ToolSpec, OpError> {
    let name = def.name.clone();
    let started = Instant::now();
    let spec = parts
        .registry
        .check(def, replace, Some(editor.plan.caps()))
        .map_err(|error| OpError::Refused { name, error })?;
    record_validated(parts.store, &spec, started.elapsed()).await;
    Ok(spec)
}

fn change(
    parts: DefinitionParts<'_>,
    spec: ToolSpec,
    stored: StoredDefinition,
    changed_fields: Vec<String>,
) -> DefinitionChange {
    let warnings = warnings(&spec, parts.program_user);
    DefinitionChange {
        spec,
        stored,
        changed_fields,
        warnings,
    }
}

impl crate::Runtime {
    /// What a definition change touches in this runtime; `user` is the program user of
    /// [`crate::Runtime::program_user`].
    fn definition_parts<'a>(&'a self, user: Option<&'a ProgramUser>) -> DefinitionParts<'a> {
        DefinitionParts {
            store: self.store(),
            registry: self.registry(),
            program_user: user,
        }
    }

    /// The user sandboxed programs run as, when calls run through the sandbox executor.
    pub fn program_user(&self) -> Option<ProgramUser> {
        self.executor().map(|e| e.runner().program_user())
    }

    /// Adds a custom definition ([`add`]): validated under the editor's plan, stored with its
    /// history, then served.
    ///
    /// Errors: as [`add`].
    pub async fn add_definition(
        &self,
        editor: Editor<'_>,
        def: ToolDefinition,
    ) -> Result<DefinitionChange, OpError> {
        let user = self.program_user();
        add(self.definition_parts(user.as_ref()), editor, def).await
    }

    /// Stores and serves a new version of a stored custom definition ([`update`]).
    ///
    /// Errors: as [`update`].
    pub async fn update_definition(
        &self,
        editor: Editor<'_>,
        def: ToolDefinition,
    ) -> Result<DefinitionChange, OpError> {
        let user = self.program_user();
        update(self.definition_parts(user.as_ref()), editor, def).await
    }

    /// Removes a stored custom definition ([`remove`]); its versions stay in the history.
    ///
    /// Errors: as [`remove`].
    pub async fn remove_definition(
        &self,
        editor: Editor<'_>,
        name: &str,
    ) -> Result<StoredDefinition, OpError> {
        remove(self.definition_parts(None), editor, name).await
    }
}

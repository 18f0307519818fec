//! `toolgate tools add|update|rm|history`: custom definitions kept in the store, with history.
//! Validation runs before anything is written; an invalid definition writes nothing.

use std::io::Write;
use std::process::ExitCode;

use serde_json::json;
use toolgate_core::{CoreError, ToolDefinition};
use toolgate_store::StoredDefinition;

use crate::app::{App, Failure};
use crate::cli::{FileArgs, HistoryArgs, NameArgs};
use crate::exit;

/// Who changes definitions from this command line.
const ACTOR: &str = "local";

/// Reads a definition file, or explains why it cannot be used (exit 1).
fn read(args: &FileArgs) -> Result<ToolDefinition, ExitCode> {
    ToolDefinition::load(&args.file).map_err(|e| {
        report_failure(
            &args.file.display().to_string(),
            &Failure::from_error(&e, None),
        );
        exit::code(exit::FAILURE)
    })
}

fn report_failure(what: &str, failure: &Failure) {
    eprintln!("error: {what} was not stored:");
    match &failure.report {
        Some(r) => {
            for issue in &r.errors {
                eprintln!("  error    {issue}");
            }
            for issue in &r.warnings {
                eprintln!("  warning  {issue}");
            }
        }
        None => eprintln!("  {}", failure.message),
    }
}

/// `tools add FILE`.
pub async fn add(app: &App, args: &FileArgs) -> anyhow::Result<ExitCode> {
    let def = match read(args) {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    // The registry validates (built-in names, depends_on, the plan's isolation) and refuses
    // duplicates; only then is anything written.
    let started = std::time::Instant::now();
    let spec = match app.registry.register_definition(def.clone()) {
        Ok(spec) => spec,
        Err(e) => return Ok(refused(&def.name, &e, &def)),
    };
    record_validated(app, &spec, started.elapsed()).await;
    match app.store.insert_definition(&spec, ACTOR, &app.plan).await {
        Ok(stored) => {
            warn_about(app, &spec);
            writeln!(
                std::io::stdout().lock(),
                "Added {} (version {}, hash {})",
                def.name,
                stored.version,
                short(&stored.definition_hash)
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {}", toolgate_core::ErrorChain(&e));
            Ok(exit::code(exit::FAILURE))
        }
    }
}

/// `tools update FILE`.
pub async fn update(app: &App, args: &FileArgs) -> anyhow::Result<ExitCode> {
    let def = match read(args) {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    if app.store.definition(&def.name).await?.is_none() {
        let hint = match app.registry.get(&def.name).filter(|_| app.sees(&def.name)) {
            Some(t) if t.is_builtin() => {
                "it is a built-in tool, which cannot be changed; define a tool with another name"
                    .to_owned()
            }
            Some(_) => {
                "it comes from --tools-dir, not the store; add it with `toolgate tools add` first"
                    .to_owned()
            }
            None => "add it first with `toolgate tools add`".to_owned(),
        };
        eprintln!("error: No stored tool named {}: {hint}", def.name);
        return Ok(exit::code(exit::FAILURE));
    }
    let started = std::time::Instant::now();
    let spec = match app.registry.replace_definition(def.clone()) {
        Ok(spec) => spec,
        Err(e) => return Ok(refused(&def.name, &e, &def)),
    };
    record_validated(app, &spec, started.elapsed()).await;
    match app.store.update_definition(&spec, ACTOR).await {
        Ok((stored, changed)) => {
            warn_about(app, &spec);
            let what = if changed.is_empty() {
                "nothing changed".to_owned()
            } else {
                format!("changed: {}", changed.join(", "))
            };
            writeln!(
                std::io::stdout().lock(),
                "Updated {} to version {} ({what})",
                def.name,
                stored.version
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {}", toolgate_core::ErrorChain(&e));
            Ok(exit::code(exit::FAILURE))
        }
    }
}

/// `tools rm NAME`.
pub async fn remove(app: &App, args: &NameArgs) -> anyhow::Result<ExitCode> {
    if app.sees(&args.name) && app.registry.get(&args.name).is_some_and(|t| t.is_builtin()) {
        eprintln!("error: Built-in tool {} cannot be removed", args.name);
        return Ok(exit::code(exit::FAILURE));
    }
    if app.store.definition(&args.name).await?.is_none() {
        eprintln!(
            "error: No stored tool named {} (see `toolgate tools list`)",
            args.name
        );
        return Ok(exit::code(exit::FAILURE));
    }
    if let Err(e @ CoreError::InUse { .. }) = app.registry.remove(&args.name) {
        eprintln!("error: {}", toolgate_core::ErrorChain(&e));
        return Ok(exit::code(exit::FAILURE));
    }
    match app.store.delete_definition(&args.name, ACTOR).await {
        Ok(stored) => {
            writeln!(
                std::io::stdout().lock(),
                "Removed {} (its {} version(s) stay in `toolgate tools history {}`)",
                args.name,
                stored.version,
                args.name
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {}", toolgate_core::ErrorChain(&e));
            Ok(exit::code(exit::FAILURE))
        }
    }
}

/// `tools history NAME [--version N] [--json]`.
pub async fn history(app: &App, args: &HistoryArgs) -> anyhow::Result<ExitCode> {
    let versions = app.store.history(&args.name).await?;
    if versions.is_empty() {
        eprintln!("error: No stored tool named {} has any history", args.name);
        return Ok(exit::code(exit::FAILURE));
    }
    let mut out = std::io::stdout().lock();
    if let Some(n) = args.version {
        let Some(v) = versions.iter().find(|v| v.version == n) else {
            let known: Vec<String> = versions.iter().map(|v| v.version.to_string()).collect();
            eprintln!(
                "error: {} has no version {n} (versions: {})",
                args.name,
                known.join(", ")
            );
            return Ok(exit::code(exit::FAILURE));
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&v.definition)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        let items: Vec<_> = versions.iter().map(version_json).collect();
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&json!({ "name": args.name, "versions": items }))?
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "VERSION  HASH          CREATED                   BY      STATUS"
    )?;
    let last = versions.len() - 1;
    for (i, v) in versions.iter().enumerate() {
        let status = match v.deleted_at {
            Some(at) => format!("removed {}", at.format("%Y-%m-%d %H:%M:%S")),
            None if i == last => "current".to_owned(),
            None => "superseded".to_owned(),
        };
        writeln!(
            out,
            "{:<8} {:<13} {:<25} {:<7} {status}",
            v.version,
            short(&v.definition_hash),
            v.created_at.format("%Y-%m-%d %H:%M:%S UTC"),
            v.created_by,
        )?;
    }
    writeln!(
        out,
        "Print one with `toolgate tools history {} --version N`.",
        args.name
    )?;
    Ok(ExitCode::SUCCESS)
}

fn version_json(v: &StoredDefinition) -> serde_json::Value {
    json!({
        "version": v.version,
        "definitionHash": v.definition_hash,
        "createdAt": v.created_at,
        "createdBy": v.created_by,
        "deletedAt": v.deleted_at,
        "definition": v.definition,
    })
}

/// Writes the "validated" definition event (seed 003 §11). A failure to record it is reported
/// but does not undo the command.
pub async fn record_validated(
    app: &App,
    spec: &toolgate_core::ToolSpec,
    took: std::time::Duration,
) {
    let parameters = spec
        .input_schema()
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map_or(0, serde_json::Map::len);
    if let Err(e) = app
        .store
        .record_validated(spec.name().as_str(), spec.category(), parameters, took)
        .await
    {
        eprintln!(
            "warning: could not record the validation event: {}",
            toolgate_core::ErrorChain(&e)
        );
    }
}

fn refused(name: &str, e: &CoreError, def: &ToolDefinition) -> ExitCode {
    report_failure(name, &Failure::from_error(e, Some(def)));
    exit::code(exit::FAILURE)
}

fn warn_about(app: &App, spec: &toolgate_core::ToolSpec) {
    for w in spec
        .warnings()
        .iter()
        .chain(&crate::app::access_warnings(app, spec))
    {
        eprintln!("warning: {w}");
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

//! `toolgate tools add|update|rm|history`: custom definitions kept in the store, with history.
//! The changes themselves are `toolgate_runtime::definitions` (the REST API's too): validation
//! runs before anything is written; an invalid definition writes nothing.

use std::io::Write;
use std::process::ExitCode;

use toolgate_core::{Principal, ToolDefinition};
use toolgate_runtime::OpError;
use toolgate_runtime::definitions::Editor;

use crate::app::{App, Failure};
use crate::cli::{FileArgs, HistoryArgs, NameArgs};
use crate::exit;

/// Who changes definitions from this command line.
const ACTOR: &str = "local";

/// Reads a definition file, or explains why it cannot be used (exit 1).
fn read(args: &FileArgs) -> Result<ToolDefinition, ExitCode> {
    ToolDefinition::load(&args.file).map_err(|e| {
        let mut failure = Failure::from_error(&e, None);
        if failure.report.is_none() {
            // Every mistake at once, not only the first serde met.
            failure.report = crate::tools::file_problems(&args.file);
        }
        report_failure(&args.file.display().to_string(), &failure);
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

/// The CLI's principal: the local one, under the plan in force (built-ins outside the plan do
/// not exist for it).
pub fn local_principal(app: &App) -> Principal {
    app.plan.restrict(Principal::local())
}

/// `tools add FILE`.
pub async fn add(app: &App, args: &FileArgs) -> anyhow::Result<ExitCode> {
    let def = match read(args) {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let me = local_principal(app);
    let editor = Editor {
        principal: &me,
        plan: &app.plan,
        actor: ACTOR,
    };
    match app.runtime.add_definition(editor, def.clone()).await {
        Ok(change) => {
            warn_about(&change.warnings);
            writeln!(
                std::io::stdout().lock(),
                "Added {} (version {}, hash {})",
                def.name,
                change.stored.version,
                short(&change.stored.definition_hash)
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(refused(&def, &e)),
    }
}

/// `tools update FILE`.
pub async fn update(app: &App, args: &FileArgs) -> anyhow::Result<ExitCode> {
    let def = match read(args) {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let me = local_principal(app);
    let editor = Editor {
        principal: &me,
        plan: &app.plan,
        actor: ACTOR,
    };
    match app.runtime.update_definition(editor, def.clone()).await {
        Ok(change) => {
            warn_about(&change.warnings);
            let what = if change.changed_fields.is_empty() {
                "nothing changed".to_owned()
            } else {
                format!("changed: {}", change.changed_fields.join(", "))
            };
            writeln!(
                std::io::stdout().lock(),
                "Updated {} to version {} ({what})",
                def.name,
                change.stored.version
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(refused(&def, &e)),
    }
}

/// `tools rm NAME`.
pub async fn remove(app: &App, args: &NameArgs) -> anyhow::Result<ExitCode> {
    let me = local_principal(app);
    let editor = Editor {
        principal: &me,
        plan: &app.plan,
        actor: ACTOR,
    };
    match app.runtime.remove_definition(editor, &args.name).await {
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
    let me = local_principal(app);
    let Some(history) = app.runtime.definition_history(&me, &args.name).await? else {
        eprintln!("error: No stored tool named {} has any history", args.name);
        return Ok(exit::code(exit::FAILURE));
    };
    let versions = &history.versions;
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
        writeln!(out, "{}", serde_json::to_string_pretty(&history)?)?;
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

/// Reports a refused change: every problem of a definition the registry refused (a built-in
/// name or a duplicate together with the definition's other problems), else the message.
fn refused(def: &ToolDefinition, e: &OpError) -> ExitCode {
    match e {
        OpError::Refused { error, .. } => {
            report_failure(&def.name, &Failure::from_error(error, Some(def)));
        }
        other => eprintln!("error: {other}"),
    }
    exit::code(exit::FAILURE)
}

fn warn_about(warnings: &[toolgate_core::Issue]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

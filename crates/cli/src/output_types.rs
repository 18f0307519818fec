//! `toolgate output-types`: the named output types `validate_output` checks against, kept in
//! the store (the config file's `[output_types]` are the other source; they win on a name clash).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;
use toolgate_builtins::OutputType;

use crate::app::App;
use crate::cli::{OutputTypeAddArgs, OutputTypeNameArgs, OutputTypesCommand};
use crate::exit;

pub async fn run(app: &App, cmd: &OutputTypesCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        OutputTypesCommand::Add(args) => add(app, args).await,
        OutputTypesCommand::List => list(app).await,
        OutputTypesCommand::Show(args) => show(app, args).await,
        OutputTypesCommand::Rm(args) => remove(app, args).await,
    }
}

fn read(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("Cannot read output type file {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("Output type file {} is not valid JSON", path.display()))
}

async fn add(app: &App, args: &OutputTypeAddArgs) -> anyhow::Result<ExitCode> {
    let definition = read(&args.file)?;
    // Checked (name, shape, schemas compile) before anything is stored.
    if let Err(e) = OutputType::compile(&args.name, definition.clone()) {
        eprintln!("error: {}", toolgate_core::ErrorChain(&e));
        return Ok(exit::code(exit::FAILURE));
    }
    let replaced = app.store.put_output_type(&args.name, &definition).await?;
    let verb = if replaced { "replaced" } else { "added" };
    writeln!(
        std::io::stdout().lock(),
        "Output type {} {verb}; validate_output uses it from the next start of toolgate (restart a running `toolgate serve`).",
        args.name
    )?;
    if app.config().output_types.contains_key(&args.name) {
        eprintln!(
            "warning: the config file's [output_types] also defines {}; that one wins",
            args.name
        );
    }
    Ok(exit::code(exit::SUCCESS))
}

async fn list(app: &App) -> anyhow::Result<ExitCode> {
    let stored = app.store.output_types().await?;
    let mut out = std::io::stdout().lock();
    if stored.is_empty() {
        writeln!(
            out,
            "No output types in the store (add one with `toolgate output-types add NAME FILE`)."
        )?;
    }
    for (name, definition) in stored {
        let description = definition
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        writeln!(out, "{name}\t{description}")?;
    }
    Ok(exit::code(exit::SUCCESS))
}

async fn show(app: &App, args: &OutputTypeNameArgs) -> anyhow::Result<ExitCode> {
    let stored = app.store.output_types().await?;
    match stored.into_iter().find(|(n, _)| *n == args.name) {
        Some((_, definition)) => {
            writeln!(
                std::io::stdout().lock(),
                "{}",
                serde_json::to_string_pretty(&definition)?
            )?;
            Ok(exit::code(exit::SUCCESS))
        }
        None => {
            eprintln!("error: Output type not found in the store: {}", args.name);
            Ok(exit::code(exit::FAILURE))
        }
    }
}

async fn remove(app: &App, args: &OutputTypeNameArgs) -> anyhow::Result<ExitCode> {
    if app.store.remove_output_type(&args.name).await? {
        writeln!(
            std::io::stdout().lock(),
            "Output type {} removed.",
            args.name
        )?;
        Ok(exit::code(exit::SUCCESS))
    } else {
        eprintln!("error: Output type not found in the store: {}", args.name);
        Ok(exit::code(exit::FAILURE))
    }
}

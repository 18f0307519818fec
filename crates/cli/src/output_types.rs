//! `toolgate output-types`: the named output types `validate_output` checks against, kept in
//! the store (the config file's `[output_types]` are the other source; they win on a name clash).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;
use toolgate_builtins::OutputType;

use crate::app::App;
use crate::cli::{OutputTypeAddArgs, OutputTypeNameArgs, OutputTypesCommand};

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
        eprintln!("error: {e}");
        return Ok(ExitCode::from(1));
    }
    let replaced = app
        .store
        .put_output_type(&args.name, &definition)
        .await
        .map_err(anyhow::Error::msg)?;
    let verb = if replaced { "replaced" } else { "added" };
    println!(
        "Output type {} {verb}; validate_output uses it from the next start of toolgate (restart a running `toolgate serve`).",
        args.name
    );
    if app.config().output_types.contains_key(&args.name) {
        eprintln!(
            "warning: the config file's [output_types] also defines {}; that one wins",
            args.name
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(app: &App) -> anyhow::Result<ExitCode> {
    let stored = app.store.output_types().await.map_err(anyhow::Error::msg)?;
    if stored.is_empty() {
        println!(
            "No output types in the store (add one with `toolgate output-types add NAME FILE`)."
        );
    }
    for (name, definition) in stored {
        let description = definition
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        println!("{name}\t{description}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(app: &App, args: &OutputTypeNameArgs) -> anyhow::Result<ExitCode> {
    let stored = app.store.output_types().await.map_err(anyhow::Error::msg)?;
    match stored.into_iter().find(|(n, _)| *n == args.name) {
        Some((_, definition)) => {
            println!("{}", serde_json::to_string_pretty(&definition)?);
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!("error: Output type not found in the store: {}", args.name);
            Ok(ExitCode::from(1))
        }
    }
}

async fn remove(app: &App, args: &OutputTypeNameArgs) -> anyhow::Result<ExitCode> {
    if app
        .store
        .remove_output_type(&args.name)
        .await
        .map_err(anyhow::Error::msg)?
    {
        println!("Output type {} removed.", args.name);
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("error: Output type not found in the store: {}", args.name);
        Ok(ExitCode::from(1))
    }
}

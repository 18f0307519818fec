//! `toolgate tools list|show|validate|export`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};
use toolgate_core::{CoreError, RegisteredTool, ToolDefinition, ToolSpec};
use toolgate_export::{ExportFormat, ExportOptions};
use toolgate_runtime::views::{ToolDetail, ToolFilter, ToolSummary};

use crate::app::{self, App};
use crate::cli::{ExportArgs, ExportFormatArg, GlobalArgs, ListArgs, ShowArgs, ValidateArgs};
use crate::exit;

/// `tools list`.
pub fn list(app: &App, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let filter = ToolFilter {
        category: args.category,
        effect: args.effect,
        consequence: args.consequence,
        tag: args.tag.clone(),
        text: args.search.clone(),
        builtin: None,
    };
    let me = crate::definitions::local_principal(app);
    let page = app.runtime.all_tools(&me, &filter)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&page)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if page.tools.is_empty() {
        writeln!(out, "No tools match.")?;
        return Ok(ExitCode::SUCCESS);
    }
    write!(out, "{}", table(&page.tools))?;
    Ok(ExitCode::SUCCESS)
}

/// The table `tools list` prints.
pub fn table(tools: &[ToolSummary]) -> String {
    let rows: Vec<[String; 6]> = tools
        .iter()
        .map(|t| {
            [
                t.name.clone(),
                t.category.to_string(),
                t.effect.to_string(),
                t.consequence.to_string(),
                if t.requires_confirmation { "yes" } else { "no" }.to_owned(),
                first_sentence(&t.description, 60),
            ]
        })
        .collect();
    let header = [
        "NAME",
        "CATEGORY",
        "EFFECT",
        "CONSEQUENCE",
        "CONFIRM",
        "DESCRIPTION",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(header.map(str::to_owned)).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 5 {
                    c.clone()
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

fn first_sentence(text: &str, max: usize) -> String {
    let sentence = text
        .split(". ")
        .next()
        .unwrap_or(text)
        .trim_end_matches('.');
    if sentence.chars().count() <= max {
        sentence.to_owned()
    } else {
        let cut: String = sentence.chars().take(max - 1).collect();
        format!("{}…", cut.trim_end())
    }
}

/// `tools show`.
pub fn show(app: &App, args: &ShowArgs) -> anyhow::Result<ExitCode> {
    let me = crate::definitions::local_principal(app);
    let Some(tool) = app.runtime.visible_tool(&me, &args.name) else {
        eprintln!(
            "Tool not found: {} (run `toolgate tools list` to see the registered tools)",
            args.name
        );
        return Ok(exit::code(exit::FAILURE));
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        // The `definition` of the tool's detail view: a definition file that can be edited and
        // added again (the rest of the view is derived from it).
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&ToolDetail::of(&tool, None).definition)?
        )?;
    } else {
        write!(out, "{}", describe_tool(&tool))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The readable form of `tools show`.
pub fn describe_tool(tool: &RegisteredTool) -> String {
    let s = tool.spec();
    let d = s.definition();
    let l = s.limits();
    let mut t = String::new();
    let title = d
        .title
        .as_deref()
        .map(|x| format!(" — {x}"))
        .unwrap_or_default();
    t.push_str(&format!("{}{title}\n\n{}\n\n", s.name(), s.description()));
    let kind = if tool.is_builtin() {
        "built-in"
    } else {
        "custom"
    };
    let implemented = if tool.handler().is_some() {
        "yes"
    } else {
        "no (definition only)"
    };
    let rows = [
        ("kind", kind.to_owned()),
        ("implemented", implemented.to_owned()),
        ("category", s.category().to_string()),
        ("effect", s.effect().to_string()),
        ("consequence", s.consequence().to_string()),
        ("requires confirmation", yes_no(s.requires_confirmation())),
        ("idempotent", yes_no(s.idempotent())),
        (
            "permissions",
            join_or_none(s.required_permissions().iter().map(|p| p.as_str())),
        ),
        ("tags", join_or_none(s.tags().iter().map(String::as_str))),
        ("version", d.version.clone().unwrap_or_else(|| "-".into())),
        (
            "depends on",
            join_or_none(d.depends_on.iter().map(String::as_str)),
        ),
        ("timeout", format!("{} ms", l.timeout.as_millis())),
        ("max output", format!("{} bytes", l.max_output_bytes)),
        (
            "retries",
            if l.retryable && s.idempotent() {
                format!("up to {} attempts", l.max_attempts)
            } else {
                "none".into()
            },
        ),
        ("isolation", l.isolation.to_string()),
        ("definition hash", s.definition_hash().to_owned()),
    ];
    for (k, v) in rows {
        t.push_str(&format!("  {:<24}{v}\n", format!("{k}:")));
    }
    t.push_str("\nParameters:\n");
    let props = s
        .input_schema()
        .get("properties")
        .and_then(Value::as_object);
    let required: Vec<&str> = s
        .input_schema()
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match props {
        Some(props) if !props.is_empty() => {
            for (name, prop) in props {
                let ty = prop
                    .get("type")
                    .map(|t| match t {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_else(|| "any".into());
                let req = if required.contains(&name.as_str()) {
                    ", required"
                } else {
                    ""
                };
                let default = prop
                    .get("default")
                    .map(|d| format!(", default {d}"))
                    .unwrap_or_default();
                let values = prop
                    .get("enum")
                    .map(|e| format!(", one of {e}"))
                    .unwrap_or_default();
                let desc = prop
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                t.push_str(&format!("  {name} ({ty}{req}{default}{values})"));
                if !desc.is_empty() {
                    t.push_str(&format!(": {desc}"));
                }
                t.push('\n');
            }
        }
        _ => t.push_str("  (none)\n"),
    }
    t
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_owned()
}

fn join_or_none<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = items.collect();
    if v.is_empty() {
        "-".to_owned()
    } else {
        v.join(", ")
    }
}

/// `tools validate`.
pub async fn validate(global: &GlobalArgs, args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let parsed: Vec<(std::path::PathBuf, Result<ToolDefinition, CoreError>)> = args
        .files
        .iter()
        .map(|p| (p.clone(), ToolDefinition::load(p)))
        .collect();
    let names: Vec<String> = parsed
        .iter()
        .filter_map(|(_, d)| d.as_ref().ok().map(|d| d.name.clone()))
        .collect();
    // Validate against the built-ins and the tools dir (minus the files' own names), so that
    // built-in names are refused and depends_on resolves as it would on `tools add`.
    let app = App::with_excluded(global, &names).await?;
    let started = std::time::Instant::now();
    let mut results = app::register_in_order(&app.registry, parsed);
    // A file serde stopped reading at its first mistake: find all of them.
    for loaded in &mut results {
        if let Err(failure) = &mut loaded.outcome
            && failure.report.is_none()
        {
            failure.report = file_problems(&loaded.path);
        }
    }
    let per_file = started.elapsed() / u32::try_from(results.len().max(1)).unwrap_or(u32::MAX);
    for loaded in &results {
        if let Ok(spec) = &loaded.outcome {
            toolgate_runtime::definitions::record_validated(&app.store, spec, per_file).await;
        }
    }
    let order: Vec<&std::path::PathBuf> = args.files.iter().collect();
    results.sort_by_key(|l| {
        order
            .iter()
            .position(|p| **p == l.path)
            .unwrap_or(usize::MAX)
    });
    let all_valid = results.iter().all(|l| l.outcome.is_ok());
    let mut out = std::io::stdout().lock();
    if args.json {
        let report: Vec<Value> = results
            .iter()
            .map(|l| file_report(l, &extra_warnings(&app, l)))
            .collect();
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&json!({ "valid": all_valid, "files": report }))?
        )?;
    } else {
        for l in &results {
            write!(out, "{}", file_text(l, &extra_warnings(&app, l)))?;
        }
        let bad = results.iter().filter(|l| l.outcome.is_err()).count();
        writeln!(
            out,
            "{} of {} file(s) valid",
            results.len() - bad,
            results.len()
        )?;
    }
    Ok(if all_valid {
        ExitCode::SUCCESS
    } else {
        exit::code(exit::FAILURE)
    })
}

/// Warnings beyond the definition's own: paths its sandboxed program cannot reach.
fn extra_warnings(app: &App, l: &app::Loaded) -> Vec<toolgate_core::Issue> {
    match &l.outcome {
        Ok(spec) => app::access_warnings(app, spec),
        Err(_) => Vec::new(),
    }
}

fn file_report(l: &app::Loaded, extra: &[toolgate_core::Issue]) -> Value {
    let file = l.path.display().to_string();
    match &l.outcome {
        Ok(spec) => {
            let warnings: Vec<&toolgate_core::Issue> =
                spec.warnings().iter().chain(extra).collect();
            json!({"file": file, "name": spec.name().as_str(), "valid": true, "errors": [], "warnings": warnings})
        }
        Err(f) => match &f.report {
            Some(r) => {
                json!({"file": file, "valid": false, "errors": r.errors, "warnings": r.warnings})
            }
            None => {
                json!({"file": file, "valid": false, "errors": [{"path": "", "code": "file.unreadable", "message": f.message}], "warnings": []})
            }
        },
    }
}

fn file_text(l: &app::Loaded, extra: &[toolgate_core::Issue]) -> String {
    let path = l.path.display();
    let mut t = String::new();
    match &l.outcome {
        Ok(spec) => {
            t.push_str(&format!("ok       {path} ({})\n", spec.name()));
            for w in spec.warnings().iter().chain(extra) {
                t.push_str(&format!("  warning  {w}\n"));
            }
        }
        Err(f) => {
            t.push_str(&format!("invalid  {path}\n"));
            match &f.report {
                Some(r) => {
                    for i in &r.errors {
                        t.push_str(&format!("  error    {i}\n"));
                    }
                    for w in &r.warnings {
                        t.push_str(&format!("  warning  {w}\n"));
                    }
                }
                None => t.push_str(&format!("  error    {}\n", f.message)),
            }
        }
    }
    t
}

/// `tools export`.
pub fn export(app: &App, args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let mut specs = all_specs(app);
    if !args.tool.is_empty() {
        if let Some(unknown) = args
            .tool
            .iter()
            .find(|name| !specs.iter().any(|s| s.name().as_str() == name.as_str()))
        {
            anyhow::bail!(
                "Tool not found: {unknown}; `toolgate tools list` shows the tools you can export"
            );
        }
        specs.retain(|s| args.tool.iter().any(|name| s.name().as_str() == name));
    }
    let format = match args.format {
        ExportFormatArg::Openai => ExportFormat::OpenAi,
        ExportFormatArg::OpenaiResponses => ExportFormat::OpenAiResponses,
        ExportFormatArg::Anthropic => ExportFormat::Anthropic,
        ExportFormatArg::Gemini => ExportFormat::Gemini,
        ExportFormatArg::GeminiJsonSchema => ExportFormat::GeminiJsonSchema,
        ExportFormatArg::Mcp => ExportFormat::Mcp,
    };
    let options = ExportOptions {
        strict: args.strict,
        require_strict: args.require_strict,
    };
    let exported = match toolgate_export::export(&specs, format, &options) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {}", toolgate_core::ErrorChain(&e));
            // A flag combination that cannot work is a usage error; a tool that cannot be
            // expressed in the format is a finding about the tools.
            let usage = e.kind() == toolgate_export::ExportErrorKind::BadRequest;
            return Ok(exit::code(if usage { exit::USAGE } else { exit::FAILURE }));
        }
    };
    for note in &exported.notes {
        eprintln!("note: {note}");
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(&exported.document).context("Cannot print export")?
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Every tool the CLI's caller sees (built-ins outside the plan are left out).
fn all_specs(app: &App) -> Vec<ToolSpec> {
    app.registry
        .snapshot()
        .iter()
        .filter(|t| app.sees(t.spec().name().as_str()))
        .map(|t| t.spec().clone())
        .collect()
}

/// Every problem of a definition file serde stopped reading at its first mistake, each with its
/// line and column; `None` when there is nothing more to say than the parser's own message.
pub fn file_problems(path: &std::path::Path) -> Option<toolgate_core::ValidationReport> {
    let format = toolgate_core::Format::from_path(path)?;
    let text = std::fs::read_to_string(path).ok()?;
    let errors: Vec<toolgate_core::Issue> = toolgate_core::document_problems(&text, format)
        .into_iter()
        .map(|(at, mut issue)| {
            issue.message = format!("{} (line {}, column {})", issue.message, at.line, at.column);
            issue
        })
        .collect();
    (!errors.is_empty()).then_some(toolgate_core::ValidationReport {
        errors,
        warnings: Vec::new(),
    })
}

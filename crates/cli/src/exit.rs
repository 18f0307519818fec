//! Every exit code of the `toolgate` binary, in one place: the commands return these, `main`
//! maps errors to them, and `--help` lists them from [`CODES`].

use std::process::ExitCode;

use toolgate_core::{CancelNote, CancellationToken};

/// Success: a call returned data, every validated file is valid, the output was written (or its
/// reader closed the pipe early, as `toolgate audit | head -1` does).
pub const SUCCESS: u8 = 0;

/// A call returned an error result, a definition was invalid or a change refused, the tools
/// could not be exported as asked (`--require-strict` included), `audit verify` found the log
/// altered, or `agent run`'s model API failed or Ctrl-C cancelled it.
pub const FAILURE: u8 = 1;

/// A usage or configuration error (clap exits with 2 for bad flags too), or any error that
/// stopped the command.
pub const USAGE: u8 = 2;

/// A call waits for approval: it became (or already was) a durable approval.
pub const PENDING: u8 = 3;

/// `agent run` stopped because a budget of its run was spent (max_turns, max_tool_calls,
/// timeout_ms, max_attempts_per_tool).
pub const EXHAUSTED: u8 = 4;

/// A second Ctrl-C quit at once (128 + SIGINT, as shells report it).
pub const INTERRUPTED: u8 = 130;

/// Every exit code with its meaning as `--help` shows it (continuation lines are indented there).
pub const CODES: [(u8, &str); 6] = [
    (
        SUCCESS,
        "success (a call returned data; every validated file is valid)",
    ),
    (
        FAILURE,
        "a call returned an error result (budget_exhausted included), a definition file is invalid
or unreadable, a tool or server was not found, a change to the store was refused (plan limit,
duplicate, built-in, a server entry that is invalid or taken, nothing to approve), the tools
cannot be exported as asked (with --require-strict: a tool cannot be strict; every such tool
is listed with its reason), `audit verify` found the log altered, or `agent run`'s model API
failed (unreachable, an error status, a response that is not its shape) or Ctrl-C cancelled
it",
    ),
    (
        USAGE,
        "usage or configuration error (bad flags or config, unreadable --args file, malformed JSON,
a database that cannot be opened; for `agent run`: no API key in OPENAI_API_KEY or
ANTHROPIC_API_KEY, a budget flag looser than the principal's ceiling)",
    ),
    (
        PENDING,
        "a call waits for approval: it became (or already was) a durable approval, whose id is
printed; decide it with `toolgate approvals approve ID` or `toolgate approvals deny ID`
(`agent run` stops there too)",
    ),
    (
        EXHAUSTED,
        "`agent run` stopped because its run spent a budget (max_turns, max_tool_calls,
timeout_ms or max_attempts_per_tool; the message names which)",
    ),
    (
        INTERRUPTED,
        "a second Ctrl-C quit at once (the first cancels the running call or stops the server)",
    ),
];

/// The exit code as the process returns it.
pub fn code(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// Ends the process at once with `code` (for a second Ctrl-C, which must not wait for anything).
pub fn now(code: u8) -> ! {
    std::process::exit(i32::from(code))
}

/// Ctrl-C for a command that runs one cancellable thing (`call`, `agent run`): the first notes
/// who cancelled (`user:cli`, which the audit log keeps) and cancels `cancel`; a second quits at
/// once with [`INTERRUPTED`]. Spawns a task that waits for the signals.
pub fn cancel_on_ctrl_c(cancel: CancellationToken, note: CancelNote) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("Cancelling… (press Ctrl-C again to quit at once)");
            note.set("user:cli");
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                now(INTERRUPTED);
            }
        }
    });
}

/// The `Exit codes:` section of `--help`, from [`CODES`].
pub fn help_section() -> String {
    let mut text = String::from("Exit codes:\n");
    for (code, meaning) in CODES {
        text.push_str(&format!("  {code}  {}\n", meaning.replace('\n', "\n     ")));
    }
    text
}

/// Whether an error is a closed standard output (`toolgate audit | head -1`): an
/// [`std::io::ErrorKind::BrokenPipe`] anywhere in its chain. Such a run ends quietly with
/// [`SUCCESS`], as ripgrep's does.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn help_lists_every_exit_code() {
        let help = crate::cli::Cli::command().render_long_help().to_string();
        for (code, meaning) in CODES {
            let first = meaning.lines().next().unwrap_or_default();
            assert!(
                help.contains(&format!("\n  {code}  {first}")),
                "--help does not list exit code {code}:\n{help}"
            );
        }
        let codes: Vec<u8> = CODES.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            codes,
            [SUCCESS, FAILURE, USAGE, PENDING, EXHAUSTED, INTERRUPTED]
        );
    }

    #[test]
    fn a_broken_pipe_is_found_anywhere_in_the_chain() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(is_broken_pipe(&anyhow::Error::new(pipe)));
        let wrapped = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing the list");
        assert!(is_broken_pipe(&wrapped));
        let json = serde_json::Error::io(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(is_broken_pipe(&anyhow::Error::new(json)));
        assert!(!is_broken_pipe(&anyhow::anyhow!("Broken pipe")));
        let other = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(!is_broken_pipe(&anyhow::Error::new(other)));
    }
}

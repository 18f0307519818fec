//! The terminal's approval prompt: core's [`PromptApproval`] asks over any reader/writer pair and
//! does no terminal I/O itself; the CLI gives it standard error and standard input.

use std::io::BufReader;

use toolgate_core::PromptApproval;

/// Builds the prompt that asks on the terminal (`PromptApproval::terminal()`).
pub trait TerminalPrompt {
    /// Prompts on standard error, reads the answer from standard input.
    fn terminal() -> Self;
}

impl TerminalPrompt for PromptApproval {
    fn terminal() -> Self {
        Self::new(
            Box::new(BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
        )
    }
}

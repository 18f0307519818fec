//! toolgate's built-in tools: `calculator` and the jailed file tools `read_file`, `write_file`,
//! `list_directory` and `delete_file` (seed 001's contracts).
//!
//! ```no_run
//! use std::path::Path;
//! let tools = toolgate_builtins::builtin_tools(Path::new(".")).unwrap();
//! assert_eq!(tools.len(), toolgate_builtins::BUILTIN_NAMES.len());
//! ```
//!
//! Every file tool is confined to one root directory by a [`Jail`]; see it for the exact
//! rules. Handlers return `authorization` errors with the message `Permission denied:
//! <path>` for paths that leave the root and `execution` errors with `File not found: <path>`
//! for missing files.

mod args;
mod calculator;
mod error;
mod expr;
mod files;
mod jail;

use std::path::Path;
use std::sync::Arc;

use toolgate_core::Tool;

pub use calculator::{CALCULATOR, CALCULATOR_DESCRIPTION, Calculator};
pub use error::{BuiltinError, BuiltinErrorKind};
pub use expr::{CalcError, CalcErrorKind, MAX_EXPRESSION_CHARS, MAX_NESTING, evaluate};
pub use files::{
    DELETE_FILE, DELETE_FILE_DESCRIPTION, DeleteFile, LIST_DIRECTORY, LIST_DIRECTORY_DESCRIPTION,
    ListDirectory, MAX_FILE_BYTES, MAX_LIST_ENTRIES, READ_ENCODINGS, READ_FILE,
    READ_FILE_DESCRIPTION, ReadFile, WRITE_FILE, WRITE_FILE_DESCRIPTION, WriteFile,
};
pub use jail::{Jail, MAX_PATH_BYTES, MAX_PATH_DEPTH};

/// The names of the built-in tools, in the order [`builtin_tools`] returns them.
pub const BUILTIN_NAMES: &[&str] = &[
    CALCULATOR,
    READ_FILE,
    WRITE_FILE,
    LIST_DIRECTORY,
    DELETE_FILE,
];

/// Every built-in tool, the file tools confined to `root` (which must be an existing directory;
/// it is canonicalized once, here).
pub fn builtin_tools(root: &Path) -> Result<Vec<Arc<dyn Tool>>, BuiltinError> {
    let jail = Arc::new(Jail::new(root)?);
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Calculator::new())];
    tools.extend(file_tools(jail));
    Ok(tools)
}

/// The file tools (`read_file`, `write_file`, `list_directory`, `delete_file`) sharing `jail`.
pub fn file_tools(jail: Arc<Jail>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFile::new(Arc::clone(&jail))),
        Arc::new(WriteFile::new(Arc::clone(&jail))),
        Arc::new(ListDirectory::new(Arc::clone(&jail))),
        Arc::new(DeleteFile::new(jail)),
    ]
}

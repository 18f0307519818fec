//! toolgate's built-in tools — `calculator`, the jailed file tools `read_file`, `write_file`,
//! `list_directory` and `delete_file`, the web tools `web_search`, `wikipedia` and
//! `web_scraper`, `todo_manager` and `validate_output` (`docs/tool-model.md#built-in-tools`) —
//! and the declarative `http` run kind ([`HttpKind`]).
//!
//! ```no_run
//! use std::path::{Path, PathBuf};
//! let tools = toolgate_builtins::builtin_tools(Path::new(".")).unwrap();
//! assert_eq!(tools.len(), toolgate_builtins::BUILTIN_NAMES.len());
//! ```
//!
//! Every file tool is confined to one root directory by a [`Jail`]; see it for the exact
//! rules. Handlers return `authorization` errors with the message `Permission denied:
//! <path>` for paths that leave the root and `execution` errors with `File not found: <path>`
//! for missing files.

#![warn(missing_docs, unreachable_pub)]

mod args;
mod base64;
mod calculator;
mod cursor;
mod error;
mod expr;
mod files;
mod http;
mod jail;
mod todo;
mod validate_output;
mod web;

use std::path::Path;
use std::sync::Arc;

use toolgate_core::Tool;

pub use calculator::{CALCULATOR, CALCULATOR_DESCRIPTION, Calculator};
pub use error::{BuiltinError, BuiltinErrorKind};
pub use expr::{CalcError, CalcErrorKind, MAX_EXPRESSION_CHARS, MAX_NESTING, evaluate};
pub use files::{
    DEFAULT_LIST_ENTRIES, DEFAULT_READ_LINES, DELETE_FILE, DELETE_FILE_DESCRIPTION, DeleteFile,
    LIST_DIRECTORY, LIST_DIRECTORY_DESCRIPTION, ListDirectory, MAX_FILE_BYTES, MAX_LIST_ENTRIES,
    MAX_READ_LINES, READ_ENCODINGS, READ_FILE, READ_FILE_DESCRIPTION, ReadFile, WRITE_FILE,
    WRITE_FILE_DESCRIPTION, WriteFile,
};
pub use http::{HTTP_KIND, HttpKind};
pub use jail::{FileRoot, Jail, MAX_PATH_BYTES, MAX_PATH_DEPTH};
pub use todo::{
    DEFAULT_PLAN_ID, ItemStatus, MAX_ITEM_CONTENT_CHARS, MAX_ITEM_ID_CHARS, MAX_PLAN_ITEMS,
    MemoryPlanStore, PlanEdit, PlanItem, PlanStore, TODO_MANAGER, TODO_MANAGER_DESCRIPTION,
    TODO_PERMISSION, TodoManager,
};
pub use validate_output::{
    DOMAIN_MAP_DEFINITION, MAX_OUTPUT_TYPE_NAME, OutputReport, OutputType, OutputTypeError,
    OutputTypes, VALIDATE_OUTPUT, ValidateOutput,
};
pub use web::{
    DEFAULT_MAX_RESPONSE_BYTES, ENV_SEARCH_API_KEY, ENV_SEARCH_BASE_URL, ENV_SEARCH_CX,
    ENV_SEARCH_ENGINE, ENV_WIKIPEDIA_BASE_URL, MAX_SEARCH_RESULTS, ParseSearchEngineError,
    SearchConfig, SearchEngine, WEB_SCRAPER, WEB_SCRAPER_DESCRIPTION, WEB_SEARCH,
    WEB_SEARCH_DESCRIPTION, WEB_USER_AGENT, WIKIPEDIA, WIKIPEDIA_DESCRIPTION, WebScraper,
    WebSearch, Wikipedia, WikipediaConfig,
};

/// The names of the built-in tools, in the order [`builtin_tools`] returns them.
pub const BUILTIN_NAMES: &[&str] = &[
    CALCULATOR,
    READ_FILE,
    WRITE_FILE,
    LIST_DIRECTORY,
    DELETE_FILE,
    WEB_SEARCH,
    WIKIPEDIA,
    WEB_SCRAPER,
    TODO_MANAGER,
    VALIDATE_OUTPUT,
];

/// What the built-in tools need besides code: the file tools' root, the search engine and
/// Wikipedia settings, where todo plans live and the output types `validate_output` knows.
#[derive(Clone)]
pub struct BuiltinOptions {
    /// The directory the file tools are jailed to (must exist; canonicalized once), or
    /// [`FileRoot::Disabled`]: the file tools answer `unavailable`.
    pub root: FileRoot,
    /// `web_search`'s engine, key and base URL.
    pub search: SearchConfig,
    /// `wikipedia`'s base URL.
    pub wikipedia: WikipediaConfig,
    /// Where `todo_manager` keeps its plans.
    pub plans: Arc<dyn PlanStore>,
    /// The output types `validate_output` checks against.
    pub output_types: Arc<OutputTypes>,
}

impl BuiltinOptions {
    /// Defaults for `root`: search and Wikipedia settings from the environment, plans in
    /// memory, the default output types (`domain_map`).
    pub fn new(root: impl Into<FileRoot>) -> Self {
        Self {
            root: root.into(),
            search: SearchConfig::default().with_env(),
            wikipedia: WikipediaConfig::default().with_env(),
            plans: Arc::new(MemoryPlanStore::new()),
            output_types: Arc::new(OutputTypes::with_defaults()),
        }
    }
}

impl std::fmt::Debug for BuiltinOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltinOptions")
            .field("root", &self.root)
            .field("search", &self.search)
            .field("wikipedia", &self.wikipedia)
            .finish_non_exhaustive()
    }
}

/// Every built-in tool with [`BuiltinOptions::new`]: the file tools confined to `root` (which
/// must be an existing directory; it is canonicalized once, here).
pub fn builtin_tools(root: &Path) -> Result<Vec<Arc<dyn Tool>>, BuiltinError> {
    builtin_tools_with(BuiltinOptions::new(root))
}

/// Every built-in tool, in [`BUILTIN_NAMES`] order.
pub fn builtin_tools_with(options: BuiltinOptions) -> Result<Vec<Arc<dyn Tool>>, BuiltinError> {
    let jail = Arc::new(Jail::for_root(&options.root)?);
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Calculator::new())];
    tools.extend(file_tools(jail));
    tools.push(Arc::new(WebSearch::new(options.search)));
    tools.push(Arc::new(Wikipedia::new(options.wikipedia)));
    tools.push(Arc::new(WebScraper::new()));
    tools.push(Arc::new(TodoManager::new(options.plans)));
    tools.push(Arc::new(ValidateOutput::new(options.output_types)));
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

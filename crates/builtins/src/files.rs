//! The file built-ins (`docs/tool-model.md#built-in-tools`) — `read_file`, `write_file`,
//! `list_directory` — and `delete_file`, all confined to a [`Jail`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use toolgate_core::{
    BoxFuture, CancellationToken, Category, Consequence, Constraints, Effect, ParamType, Parameter,
    Tool, ToolBuilder, ToolContext, ToolDefinition, ToolError, ToolOutput,
};

use crate::args::{blocking, bool_or, string_arg, string_or};
use crate::cursor::{self, Cursor};
use crate::jail::{Jail, io_error};

/// Largest file `read_file` reads and `write_file` writes: 10 MiB.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Largest `limit` of `list_directory`: most entries one page holds.
pub const MAX_LIST_ENTRIES: usize = 10_000;

/// Entries per `list_directory` page when `limit` is left out.
pub const DEFAULT_LIST_ENTRIES: usize = 1_000;

/// Lines per `read_file` page when `limit` is left out.
pub const DEFAULT_READ_LINES: usize = 2_000;

/// Largest `limit` of `read_file`, in lines.
pub const MAX_READ_LINES: usize = 20_000;

/// The encodings `read_file` accepts: text, or the raw bytes in base64.
pub const READ_ENCODINGS: &[&str] = &["utf-8", "base64"];

/// Output cap of `read_file`: room for a 10 MiB file in base64 (4/3 of it) plus JSON framing.
const READ_MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

/// The `read_file` tool's name.
pub const READ_FILE: &str = "read_file";
/// The `write_file` tool's name.
pub const WRITE_FILE: &str = "write_file";
/// The `list_directory` tool's name.
pub const LIST_DIRECTORY: &str = "list_directory";
/// The `delete_file` tool's name.
pub const DELETE_FILE: &str = "delete_file";

const PATH_DESCRIPTION: &str = "Path relative to the workspace root, e.g. \"docs/notes.md\" (absolute paths must lie inside the root)";

/// Descriptions a model routes by.
pub const READ_FILE_DESCRIPTION: &str = "Reads one file inside the workspace root and returns \
{content, size, startLine, lineCount, totalLines, nextCursor}, where size is the file's length in \
bytes. Use it to look at source code, configuration, notes or data before answering questions \
about them or changing them; use list_directory first when you do not know the exact path. With \
encoding \"utf-8\" (the default) content is the text, at most limit lines (default 2000) from \
line startLine, each with its line break; nextCursor is there when the file has more lines: pass \
it as cursor with the same path to read on. Files that are not valid UTF-8 fail with a message \
saying so; with encoding \"base64\" content is the whole file's raw bytes in base64, for binary \
files (no paging). Paths are relative to \
the root; paths that leave it through .. or a symbolic link fail with \"Permission denied: \
<path>\", missing files with \"File not found: <path>\". Directories and files larger than \
10 MiB are refused.";

/// The `write_file` tool's description.
pub const WRITE_FILE_DESCRIPTION: &str = "Writes text to one file inside the workspace root and \
returns {bytesWritten}. Creates the file, and any missing parent directories, if it does not \
exist; otherwise replaces its whole content. Use it to save a complete new version of a file: it \
neither appends nor patches, so read the file first if parts of it must stay. The write is \
atomic: the file holds either the old or the new content, never a mix. Content is stored as \
UTF-8, at most 10 MiB. Paths are relative to the root; paths that leave it through .. or a \
symbolic link fail with \"Permission denied: <path>\". Every call needs a person's approval.";

/// The `list_directory` tool's description.
pub const LIST_DIRECTORY_DESCRIPTION: &str = "Lists a directory inside the workspace root and \
returns {entries: [{name, type, size}], truncated, nextCursor}. type is \"file\" or \"directory\"; size is \
in bytes (0 for directories). With recursive = true it also lists every subdirectory, naming \
entries by their path relative to the listed directory (for example src/main.rs). Entries are \
sorted by name, each directory followed by its contents. Use \".\" for the root itself, and use \
this tool to find paths before read_file, write_file or delete_file. Symbolic links are shown as \
the file or directory they point to when that lies inside the root (linked directories are not \
walked into) and left out otherwise; so are sockets, pipes and devices, and the contents of \
subdirectories that cannot be read. At most limit entries are returned (default 1000, at most \
10000); when there are more, truncated is true and nextCursor is there: pass it as cursor with \
the same path and recursive to get the next entries.";

/// The `delete_file` tool's description.
pub const DELETE_FILE_DESCRIPTION: &str = "Deletes one file inside the workspace root and \
returns {deleted: path}. Use it only when the user wants that file removed: deletion cannot be \
undone. Directories are refused, so nothing is ever deleted recursively; a symbolic link is \
removed itself, not the file it points to. Paths are relative to the root; paths that leave it \
through .. or a symbolic link fail with \"Permission denied: <path>\", missing files with \
\"File not found: <path>\". Every call needs a person's approval.";

fn path_param() -> Parameter {
    Parameter::new("path", ParamType::String)
        .description(PATH_DESCRIPTION)
        .required()
}

fn file_tool(name: &str, title: &str, description: &str) -> ToolBuilder {
    ToolBuilder::new(name, description)
        .title(title)
        .category(Category::Filesystem)
        .tag("files")
        .param(path_param())
}

// ---------------------------------------------------------------------------------------------
// read_file

/// `read_file`: `{path, encoding?, limit?, cursor?}` →
/// `{content, size, startLine?, lineCount?, totalLines?, nextCursor?}` (the line fields for
/// utf-8 text, which is paged by lines).
#[derive(Clone, Debug)]
pub struct ReadFile {
    jail: Arc<Jail>,
    definition: ToolDefinition,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Utf8,
    Base64,
}

impl Encoding {
    fn parse(raw: &str) -> Result<Self, ToolError> {
        match raw.to_ascii_lowercase().as_str() {
            "utf-8" | "utf8" => Ok(Self::Utf8),
            "base64" => Ok(Self::Base64),
            _ => Err(ToolError::validation(format!(
                "Unsupported encoding {raw:?}: use \"utf-8\" for text or \"base64\" for the raw bytes of binary files"
            ))),
        }
    }
}

impl ReadFile {
    /// `read_file` confined to `jail`.
    pub fn new(jail: Arc<Jail>) -> Self {
        let definition = file_tool(READ_FILE, "Read file", READ_FILE_DESCRIPTION)
            .effect(Effect::Read)
            .consequence(Consequence::Low)
            .requires_confirmation(false)
            .param(
                Parameter::new("encoding", ParamType::String)
                    .description(
                        "\"utf-8\" to return the text (the default), \"base64\" to return the raw bytes of a binary file",
                    )
                    .one_of(READ_ENCODINGS.iter().map(|e| json!(e)).collect())
                    .default_value(json!("utf-8")),
            )
            .param(cursor::limit_param(DEFAULT_READ_LINES, MAX_READ_LINES, "lines"))
            .param(cursor::cursor_param())
            .permission("tool.filesystem.read")
            .constraints(Constraints {
                max_output_bytes: Some(READ_MAX_OUTPUT_BYTES),
                ..Constraints::default()
            })
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The text of lines startLine to startLine + lineCount - 1, each with its line break; or the whole file's bytes in base64"},
                    "size": {"type": "integer", "minimum": 0, "description": "The whole file's length in bytes"},
                    "startLine": {"type": "integer", "minimum": 1, "description": "utf-8: the number of the first line in content (the first line of the file is 1)"},
                    "lineCount": {"type": "integer", "minimum": 0, "description": "utf-8: how many lines content holds"},
                    "totalLines": {"type": "integer", "minimum": 0, "description": "utf-8: how many lines the whole file has"},
                    "nextCursor": cursor::next_cursor_schema()
                },
                "required": ["content", "size"],
                "additionalProperties": false
            }))
            .definition()
            .clone();
        Self { jail, definition }
    }
}

impl Tool for ReadFile {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            let path = string_arg(&args, "path")?.to_owned();
            let encoding = Encoding::parse(string_or(&args, "encoding", "utf-8")?)?;
            let page = Page {
                limit: cursor::limit_arg(&args, DEFAULT_READ_LINES, MAX_READ_LINES)?,
                cursor: cursor::cursor_arg(&args, READ_FILE)?,
            };
            ctx.check_cancelled()?;
            let jail = Arc::clone(&self.jail);
            blocking(move || read(&jail, &path, encoding, page)).await
        })
    }
}

/// One page's request: its size and where it starts (`None`: the first page).
struct Page {
    limit: usize,
    cursor: Option<Cursor>,
}

fn read(jail: &Jail, given: &str, encoding: Encoding, page: Page) -> Result<Value, ToolError> {
    if encoding == Encoding::Base64 && page.cursor.is_some() {
        return Err(ToolError::validation(
            "cursor pages text by lines; with encoding \"base64\" read_file returns the whole file at once, so leave cursor out",
        ));
    }
    let real = jail.resolve(given)?;
    let before = fs::metadata(&real).map_err(|e| io_error(given, &e))?;
    check_readable(given, &before)?;
    let file = open_read(&real).map_err(|e| io_error(given, &e))?;
    let meta = file.metadata().map_err(|e| io_error(given, &e))?;
    check_readable(given, &meta)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(given, &e))?;
    let size = bytes.len() as u64;
    if size > MAX_FILE_BYTES {
        return Err(too_large(given, size));
    }
    match encoding {
        Encoding::Utf8 => {
            let text = String::from_utf8(bytes).map_err(|e| {
                ToolError::execution(format!(
                    "File is not valid UTF-8 text: {given} (first invalid byte at offset {}); read it with encoding \"base64\" to get its bytes",
                    e.utf8_error().valid_up_to()
                ))
            })?;
            read_lines(given, &text, size, page)
        }
        Encoding::Base64 => Ok(json!({ "content": crate::base64::standard(&bytes), "size": size })),
    }
}

/// One page of `text` by lines. The cursor holds the next line's index and is bound to the
/// path as given and to a digest of the content, so a file changed between pages is refused
/// instead of giving a page that does not follow the last one.
fn read_lines(given: &str, text: &str, size: u64, page: Page) -> Result<Value, ToolError> {
    let digest = cursor::digest_hex(text.as_bytes());
    let start = match &page.cursor {
        None => 0,
        Some(c) => {
            if c.scope_str("path") != Some(given) {
                let path = c.scope_str("path").unwrap_or_default();
                return Err(cursor::mismatch(READ_FILE, &format!("path {path:?}")));
            }
            if c.scope_str("digest") != Some(digest.as_str()) {
                return Err(ToolError::validation(format!(
                    "cursor is stale: the file changed, start again without cursor ({given} is not the file the cursor was made for)"
                )));
            }
            c.position
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| cursor::mismatch(READ_FILE, "another position"))?
        }
    };
    let end = start.saturating_add(page.limit);
    let mut total = 0usize;
    let (mut from, mut to) = (text.len(), text.len());
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        if total == start {
            from = offset;
        }
        offset += line.len();
        total += 1;
        if total == end {
            to = offset;
        }
    }
    if page.cursor.is_some() && start >= total {
        return Err(cursor::mismatch(
            READ_FILE,
            "a line past the end of the file",
        ));
    }
    let to = to.max(from);
    let count = total.saturating_sub(start).min(page.limit);
    let mut out = json!({
        "content": &text[from..to],
        "size": size,
        "startLine": start + 1,
        "lineCount": count,
        "totalLines": total,
    });
    if start + count < total {
        let mut scope = serde_json::Map::new();
        scope.insert("path".into(), json!(given));
        scope.insert("digest".into(), json!(digest));
        out["nextCursor"] = json!(cursor::encode(READ_FILE, scope, json!(start + count)));
    }
    Ok(out)
}

fn check_readable(given: &str, meta: &fs::Metadata) -> Result<(), ToolError> {
    if meta.is_dir() {
        return Err(ToolError::execution(format!(
            "Is a directory: {given} (use list_directory to see what it contains)"
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::execution(format!(
            "Not a regular file: {given} (read_file reads regular files only)"
        )));
    }
    // A hard link made before the jail existed may share its content with a file outside the
    // root, and nothing tells where the other links are: refuse rather than guess.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            return Err(ToolError::authorization(format!(
                "Permission denied: {given} (the file has {} hard links, so it may be shared with a file outside the root)",
                meta.nlink()
            )));
        }
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(given, meta.len()));
    }
    Ok(())
}

fn too_large(given: &str, size: u64) -> ToolError {
    ToolError::execution(format!(
        "File is too large: {given} is {size} bytes; read_file reads at most {MAX_FILE_BYTES} bytes (10 MiB)"
    ))
}

/// Opens for reading without following a final symbolic link (one swapped in after the jail
/// checked the path fails with ELOOP) and without blocking on a FIFO swapped in likewise.
#[cfg(unix)]
fn open_read(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_read(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).open(path)
}

// ---------------------------------------------------------------------------------------------
// write_file

/// `write_file`: `{path, content}` → `{bytesWritten}`; atomic, creates parent directories.
#[derive(Clone, Debug)]
pub struct WriteFile {
    jail: Arc<Jail>,
    definition: ToolDefinition,
}

impl WriteFile {
    /// `write_file` confined to `jail`.
    pub fn new(jail: Arc<Jail>) -> Self {
        let definition = file_tool(WRITE_FILE, "Write file", WRITE_FILE_DESCRIPTION)
            .effect(Effect::Write)
            .consequence(Consequence::Medium)
            .requires_confirmation(true)
            .param(
                Parameter::new("content", ParamType::String)
                    .description("The complete new content of the file, as text")
                    .required(),
            )
            .permission("tool.filesystem.write")
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "bytesWritten": {"type": "integer", "minimum": 0, "description": "Bytes written (the content's length in UTF-8)"}
                },
                "required": ["bytesWritten"],
                "additionalProperties": false
            }))
            .definition()
            .clone();
        Self { jail, definition }
    }
}

impl Tool for WriteFile {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            let path = string_arg(&args, "path")?.to_owned();
            let content = string_arg(&args, "content")?.to_owned();
            ctx.check_cancelled()?;
            let jail = Arc::clone(&self.jail);
            blocking(move || write(&jail, &path, content.as_bytes())).await
        })
    }
}

fn write(jail: &Jail, given: &str, bytes: &[u8]) -> Result<Value, ToolError> {
    let size = bytes.len() as u64;
    if size > MAX_FILE_BYTES {
        return Err(ToolError::validation(format!(
            "Content is {size} bytes; write_file writes at most {MAX_FILE_BYTES} bytes (10 MiB)"
        )));
    }
    let target = jail.resolve_for_write(given)?;
    if fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
        return Err(ToolError::execution(format!(
            "Is a directory: {given} (write_file writes files; give the path of a file)"
        )));
    }
    atomic_write(&target, bytes).map_err(|e| io_error(given, &e))?;
    Ok(json!({ "bytesWritten": size }))
}

/// Writes `bytes` to a new temporary file next to `target`, flushes it to disk and renames it
/// over `target`, so a crash leaves either the old file or the new one. An existing file's
/// permissions are kept.
fn atomic_write(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no parent directory"))?;
    let permissions = fs::metadata(target)
        .ok()
        .filter(fs::Metadata::is_file)
        .map(|m| m.permissions());
    let (temp_path, mut file) = create_temp(dir)?;
    let temp = TempFile(Some(temp_path));
    file.write_all(bytes)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()?;
    drop(file);
    fs::rename(temp.path(), target)?;
    temp.keep();
    sync_dir(dir);
    Ok(())
}

/// Creates a fresh temporary file in `dir` (`O_EXCL`: never opens an existing file or link).
fn create_temp(dir: &Path) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for _ in 0..32 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(
            ".toolgate-write-{}-{nanos}-{n}.tmp",
            std::process::id()
        ));
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "could not create a temporary file",
    ))
}

/// Removes the temporary file on every path that does not rename it into place.
struct TempFile(Option<PathBuf>);

impl TempFile {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }

    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// Makes the rename durable (best effort).
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

// ---------------------------------------------------------------------------------------------
// list_directory

/// `list_directory`: `{path, recursive?, limit?, cursor?}` →
/// `{entries: [{name, type, size}], truncated, nextCursor?}`.
#[derive(Clone, Debug)]
pub struct ListDirectory {
    jail: Arc<Jail>,
    definition: ToolDefinition,
}

impl ListDirectory {
    /// `list_directory` confined to `jail`.
    pub fn new(jail: Arc<Jail>) -> Self {
        let definition = file_tool(LIST_DIRECTORY, "List directory", LIST_DIRECTORY_DESCRIPTION)
            .effect(Effect::Read)
            .consequence(Consequence::Low)
            .requires_confirmation(false)
            .param(
                Parameter::new("recursive", ParamType::Boolean)
                    .description("true to list every subdirectory too, with paths relative to the listed directory")
                    .default_value(json!(false)),
            )
            .param(cursor::limit_param(DEFAULT_LIST_ENTRIES, MAX_LIST_ENTRIES, "entries"))
            .param(cursor::cursor_param())
            .permission("tool.filesystem.read")
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "entries": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string", "description": "Path relative to the listed directory"},
                                "type": {"type": "string", "enum": ["file", "directory"]},
                                "size": {"type": "integer", "minimum": 0, "description": "Bytes; 0 for directories"}
                            },
                            "required": ["name", "type", "size"],
                            "additionalProperties": false
                        }
                    },
                    "truncated": {"type": "boolean", "description": "True when there are more entries than this page holds; nextCursor gets them"},
                    "nextCursor": cursor::next_cursor_schema()
                },
                "required": ["entries", "truncated"],
                "additionalProperties": false
            }))
            .definition()
            .clone();
        Self { jail, definition }
    }
}

impl Tool for ListDirectory {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            let path = string_arg(&args, "path")?.to_owned();
            let recursive = bool_or(&args, "recursive", false)?;
            let page = Page {
                limit: cursor::limit_arg(&args, DEFAULT_LIST_ENTRIES, MAX_LIST_ENTRIES)?,
                cursor: cursor::cursor_arg(&args, LIST_DIRECTORY)?,
            };
            ctx.check_cancelled()?;
            let jail = Arc::clone(&self.jail);
            let cancel = ctx.cancellation().clone();
            blocking(move || list(&jail, &path, recursive, page, &cancel)).await
        })
    }
}

/// One listed entry, before it becomes JSON.
struct Child {
    name: String,
    kind: &'static str,
    size: u64,
    /// A real (not linked) directory to walk into when listing recursively.
    walk: Option<PathBuf>,
}

/// Where a listing page starts: after the entry `after`, in listing order (see [`listing_order`]).
fn list_start(given: &str, recursive: bool, page: &Page) -> Result<Option<String>, ToolError> {
    let Some(c) = &page.cursor else {
        return Ok(None);
    };
    let made_for_recursive = c.scope.get("recursive").and_then(Value::as_bool);
    if c.scope_str("path") != Some(given) || made_for_recursive != Some(recursive) {
        let path = c.scope_str("path").unwrap_or_default();
        let how = if made_for_recursive == Some(true) {
            "recursive = true"
        } else {
            "recursive = false"
        };
        return Err(cursor::mismatch(
            LIST_DIRECTORY,
            &format!("path {path:?} with {how}"),
        ));
    }
    match c.position.as_str() {
        Some(after) => Ok(Some(after.to_owned())),
        None => Err(cursor::mismatch(LIST_DIRECTORY, "another position")),
    }
}

/// The order entries are listed in: by path component, so each directory comes right before
/// its contents (depth-first, siblings sorted by name). A page resumes after the last name of
/// the previous one even when that entry has been deleted since.
fn listing_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.split('/').cmp(b.split('/'))
}

/// Whether some entry under directory `dir` may come after `after` in listing order: not when
/// `dir` comes before `after` and is not one of its ancestors (then its whole subtree does).
fn subtree_reaches(dir: &str, after: &str) -> bool {
    listing_order(dir, after).is_ge() || after.starts_with(&format!("{dir}/"))
}

fn list(
    jail: &Jail,
    given: &str,
    recursive: bool,
    page: Page,
    cancel: &CancellationToken,
) -> Result<Value, ToolError> {
    let after = list_start(given, recursive, &page)?;
    let real = jail.resolve(given)?;
    let meta = fs::metadata(&real).map_err(|e| io_error(given, &e))?;
    if !meta.is_dir() {
        return Err(ToolError::execution(format!(
            "Not a directory: {given} (use read_file to read a file)"
        )));
    }
    let top = children(jail, &real, "").map_err(|e| io_error(given, &e))?;
    let mut entries = Vec::new();
    let mut last: Option<String> = None;
    let mut more = false;
    // Depth-first with an explicit stack, so deep trees cannot exhaust the thread's stack.
    let mut stack = vec![top.into_iter()];
    while let Some(level) = stack.last_mut() {
        let Some(child) = level.next() else {
            stack.pop();
            continue;
        };
        if cancel.is_cancelled() {
            return Err(ToolError::cancelled());
        }
        let listed = after
            .as_deref()
            .is_none_or(|a| listing_order(&child.name, a).is_gt());
        if listed {
            if entries.len() >= page.limit {
                more = true;
                break;
            }
            entries.push(json!({ "name": child.name, "type": child.kind, "size": child.size }));
            last = Some(child.name.clone());
        }
        let reaches = listed
            || after
                .as_deref()
                .is_none_or(|a| subtree_reaches(&child.name, a));
        if let (true, true, Some(dir)) = (recursive, reaches, &child.walk) {
            // An unreadable subdirectory is listed itself, without its contents.
            if let Ok(grandchildren) = children(jail, dir, &child.name) {
                stack.push(grandchildren.into_iter());
            }
        }
    }
    let mut out = json!({ "entries": entries, "truncated": more });
    if let (true, Some(last)) = (more, last) {
        let mut scope = serde_json::Map::new();
        scope.insert("path".into(), json!(given));
        scope.insert("recursive".into(), json!(recursive));
        out["nextCursor"] = json!(cursor::encode(LIST_DIRECTORY, scope, json!(last)));
    }
    Ok(out)
}

/// The entries of `dir`, sorted by name, named `prefix/name`.
fn children(jail: &Jail, dir: &Path, prefix: &str) -> io::Result<Vec<Child>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let (kind, size, walk) = if file_type.is_symlink() {
            match fs::canonicalize(entry.path()) {
                Ok(target) if jail.contains(&target) => match fs::metadata(&target) {
                    Ok(m) if m.is_dir() => ("directory", 0, None),
                    Ok(m) if m.is_file() => ("file", m.len(), None),
                    _ => continue,
                },
                _ => continue,
            }
        } else if file_type.is_dir() {
            ("directory", 0, Some(entry.path()))
        } else if file_type.is_file() {
            ("file", entry.metadata().map_or(0, |m| m.len()), None)
        } else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let name = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        out.push(Child {
            name,
            kind,
            size,
            walk,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// delete_file

/// `delete_file`: `{path}` → `{deleted: path}`; refuses directories.
#[derive(Clone, Debug)]
pub struct DeleteFile {
    jail: Arc<Jail>,
    definition: ToolDefinition,
}

impl DeleteFile {
    /// `delete_file` confined to `jail`.
    pub fn new(jail: Arc<Jail>) -> Self {
        let definition = file_tool(DELETE_FILE, "Delete file", DELETE_FILE_DESCRIPTION)
            .effect(Effect::Delete)
            .consequence(Consequence::High)
            .requires_confirmation(true)
            .permission("tool.filesystem.delete")
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "deleted": {"type": "string", "description": "The path that was deleted, as given"}
                },
                "required": ["deleted"],
                "additionalProperties": false
            }))
            .definition()
            .clone();
        Self { jail, definition }
    }
}

impl Tool for DeleteFile {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            let path = string_arg(&args, "path")?.to_owned();
            ctx.check_cancelled()?;
            let jail = Arc::clone(&self.jail);
            blocking(move || delete(&jail, &path)).await
        })
    }
}

fn delete(jail: &Jail, given: &str) -> Result<Value, ToolError> {
    let entry = jail.resolve_entry(given)?;
    let meta = fs::symlink_metadata(&entry).map_err(|e| io_error(given, &e))?;
    if meta.is_dir() {
        return Err(ToolError::execution(format!(
            "Is a directory: {given} (delete_file deletes single files, never directories)"
        )));
    }
    fs::remove_file(&entry).map_err(|e| io_error(given, &e))?;
    Ok(json!({ "deleted": given }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_parse_case_insensitively() {
        assert_eq!(Encoding::parse("UTF-8"), Ok(Encoding::Utf8));
        assert_eq!(Encoding::parse("utf8"), Ok(Encoding::Utf8));
        assert_eq!(Encoding::parse("base64"), Ok(Encoding::Base64));
        assert!(Encoding::parse("latin-1").is_err());
    }
}

//! The file built-ins of seed 001 — `read_file`, `write_file`, `list_directory` — and
//! `delete_file`, all confined to a [`Jail`].

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
use crate::jail::{Jail, io_error};

/// Largest file `read_file` reads and `write_file` writes: 10 MiB.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Most entries `list_directory` returns; beyond it the listing says `truncated: true`.
pub const MAX_LIST_ENTRIES: usize = 10_000;

/// The encodings `read_file` accepts: text, or the raw bytes in base64.
pub const READ_ENCODINGS: &[&str] = &["utf-8", "base64"];

/// Output cap of `read_file`: room for a 10 MiB file in base64 (4/3 of it) plus JSON framing.
const READ_MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Tool names.
pub const READ_FILE: &str = "read_file";
pub const WRITE_FILE: &str = "write_file";
pub const LIST_DIRECTORY: &str = "list_directory";
pub const DELETE_FILE: &str = "delete_file";

const PATH_DESCRIPTION: &str = "Path relative to the workspace root, e.g. \"docs/notes.md\" (absolute paths must lie inside the root)";

/// Descriptions a model routes by.
pub const READ_FILE_DESCRIPTION: &str = "Reads one file inside the workspace root and returns \
{content, size}, where size is the file's length in bytes. Use it to look at source code, \
configuration, notes or data before answering questions about them or changing them; use \
list_directory first when you do not know the exact path. With encoding \"utf-8\" (the default) \
content is the text, and files that are not valid UTF-8 fail with a message saying so; with \
encoding \"base64\" content is the raw bytes in base64, for binary files. Paths are relative to \
the root; paths that leave it through .. or a symbolic link fail with \"Permission denied: \
<path>\", missing files with \"File not found: <path>\". Directories and files larger than \
10 MiB are refused.";

pub const WRITE_FILE_DESCRIPTION: &str = "Writes text to one file inside the workspace root and \
returns {bytesWritten}. Creates the file, and any missing parent directories, if it does not \
exist; otherwise replaces its whole content. Use it to save a complete new version of a file: it \
neither appends nor patches, so read the file first if parts of it must stay. The write is \
atomic: the file holds either the old or the new content, never a mix. Content is stored as \
UTF-8, at most 10 MiB. Paths are relative to the root; paths that leave it through .. or a \
symbolic link fail with \"Permission denied: <path>\". Every call needs a person's approval.";

pub const LIST_DIRECTORY_DESCRIPTION: &str = "Lists a directory inside the workspace root and \
returns {entries: [{name, type, size}], truncated}. type is \"file\" or \"directory\"; size is \
in bytes (0 for directories). With recursive = true it also lists every subdirectory, naming \
entries by their path relative to the listed directory (for example src/main.rs). Entries are \
sorted by name, each directory followed by its contents. Use \".\" for the root itself, and use \
this tool to find paths before read_file, write_file or delete_file. Symbolic links are shown as \
the file or directory they point to when that lies inside the root (linked directories are not \
walked into) and left out otherwise; so are sockets, pipes and devices, and the contents of \
subdirectories that cannot be read. At most 10000 entries are returned; truncated is true when \
there were more.";

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

/// `read_file`: `{path, encoding?}` → `{content, size}`.
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
            .permission("tool.filesystem.read")
            .constraints(Constraints {
                max_output_bytes: Some(READ_MAX_OUTPUT_BYTES),
                ..Constraints::default()
            })
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The file's text, or its bytes in base64"},
                    "size": {"type": "integer", "minimum": 0, "description": "The file's length in bytes"}
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
            ctx.check_cancelled()?;
            let jail = Arc::clone(&self.jail);
            blocking(move || read(&jail, &path, encoding)).await
        })
    }
}

fn read(jail: &Jail, given: &str, encoding: Encoding) -> Result<Value, ToolError> {
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
    let content = match encoding {
        Encoding::Utf8 => String::from_utf8(bytes).map_err(|e| {
            ToolError::execution(format!(
                "File is not valid UTF-8 text: {given} (first invalid byte at offset {}); read it with encoding \"base64\" to get its bytes",
                e.utf8_error().valid_up_to()
            ))
        })?,
        Encoding::Base64 => base64(&bytes),
    };
    Ok(json!({ "content": content, "size": size }))
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

/// Standard base64 (RFC 4648, with padding).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let symbol = |n: u32, shift: u32| char::from(ALPHABET[((n >> shift) & 63) as usize]);
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        out.push(symbol(n, 18));
        out.push(symbol(n, 12));
        out.push(if chunk.len() > 1 { symbol(n, 6) } else { '=' });
        out.push(if chunk.len() > 2 { symbol(n, 0) } else { '=' });
    }
    out
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

/// `list_directory`: `{path, recursive?}` → `{entries: [{name, type, size}], truncated}`.
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
                    "truncated": {"type": "boolean", "description": "True when more than 10000 entries existed and the rest were left out"}
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
            ctx.check_cancelled()?;
            let jail = Arc::clone(&self.jail);
            let cancel = ctx.cancellation().clone();
            blocking(move || list(&jail, &path, recursive, &cancel)).await
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

fn list(
    jail: &Jail,
    given: &str,
    recursive: bool,
    cancel: &CancellationToken,
) -> Result<Value, ToolError> {
    let real = jail.resolve(given)?;
    let meta = fs::metadata(&real).map_err(|e| io_error(given, &e))?;
    if !meta.is_dir() {
        return Err(ToolError::execution(format!(
            "Not a directory: {given} (use read_file to read a file)"
        )));
    }
    let top = children(jail, &real, "").map_err(|e| io_error(given, &e))?;
    let mut entries = Vec::new();
    let mut truncated = false;
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
        if entries.len() >= MAX_LIST_ENTRIES {
            truncated = true;
            break;
        }
        entries.push(json!({ "name": child.name, "type": child.kind, "size": child.size }));
        if let (true, Some(dir)) = (recursive, &child.walk) {
            // An unreadable subdirectory is listed itself, without its contents.
            if let Ok(grandchildren) = children(jail, dir, &child.name) {
                stack.push(grandchildren.into_iter());
            }
        }
    }
    Ok(json!({ "entries": entries, "truncated": truncated }))
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
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (input, want) in cases {
            assert_eq!(base64(input.as_bytes()), want, "{input:?}");
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn encodings_parse_case_insensitively() {
        assert_eq!(Encoding::parse("UTF-8"), Ok(Encoding::Utf8));
        assert_eq!(Encoding::parse("utf8"), Ok(Encoding::Utf8));
        assert_eq!(Encoding::parse("base64"), Ok(Encoding::Base64));
        assert!(Encoding::parse("latin-1").is_err());
    }
}

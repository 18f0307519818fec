//! The file tools against a real directory tree: the jail (`..`, absolute paths, symbolic links
//! at every position), missing files, atomic writes, recursive listings and deletes.
#![cfg(test)]

use std::fs;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_builtins::{
    BuiltinErrorKind, DeleteFile, Jail, ListDirectory, MAX_FILE_BYTES, ReadFile, WriteFile,
    builtin_tools,
};
use toolgate_core::{ErrorKind, Principal, Tool, ToolContext, ToolError, ToolName};

/// A jail root (`<tmp>/root`) with a sibling directory outside it (`<tmp>/outside`).
struct Fixture {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
    jail: Arc<Jail>,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(root.join("sub/deeper")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(root.join("hello.txt"), "hello world").unwrap();
    fs::write(root.join("sub/a.txt"), "aaa").unwrap();
    fs::write(root.join("sub/deeper/b.bin"), [0u8, 159, 146, 150]).unwrap();
    fs::write(outside.join("secret.txt"), "top secret").unwrap();
    let jail = Arc::new(Jail::new(&root).unwrap());
    Fixture {
        _tmp: tmp,
        root,
        outside,
        jail,
    }
}

fn ctx() -> ToolContext {
    ToolContext::detached(ToolName::parse("x").unwrap(), Principal::local())
}

async fn run(tool: &dyn Tool, args: Value) -> Result<Value, ToolError> {
    tool.call(args, ctx()).await
}

fn assert_err(result: Result<Value, ToolError>, kind: ErrorKind, message: &str) {
    match result {
        Ok(v) => panic!("expected {kind:?} error {message:?}, got {v}"),
        Err(e) => {
            assert_eq!(e.message(), message);
            assert_eq!(e.kind(), kind, "{message}");
        }
    }
}

fn denied(path: &str) -> String {
    format!("Permission denied: {path}")
}

// ---------------------------------------------------------------------------------------------
// read_file

#[tokio::test]
async fn read_returns_content_and_byte_size() {
    let f = fixture();
    let read = ReadFile::new(f.jail.clone());
    let cases = [
        "hello.txt",
        "./hello.txt",
        "sub/../hello.txt",
        "sub/./../hello.txt",
    ];
    for path in cases {
        assert_eq!(
            run(&read, json!({"path": path})).await.unwrap(),
            json!({"content": "hello world", "size": 11, "startLine": 1, "lineCount": 1, "totalLines": 1}),
            "{path}"
        );
    }
    fs::write(f.root.join("utf8.txt"), "héllo").unwrap();
    assert_eq!(
        run(&read, json!({"path": "utf8.txt", "encoding": "utf-8"}))
            .await
            .unwrap(),
        json!({"content": "héllo", "size": 6, "startLine": 1, "lineCount": 1, "totalLines": 1})
    );
}

#[tokio::test]
async fn read_accepts_absolute_paths_inside_the_root() {
    let f = fixture();
    let read = ReadFile::new(f.jail.clone());
    // Both the canonical root and the root as it was given.
    for root in [f.jail.root().to_path_buf(), f.root.clone()] {
        let path = root.join("sub/a.txt").display().to_string();
        assert_eq!(
            run(&read, json!({"path": path})).await.unwrap()["content"],
            json!("aaa")
        );
    }
}

#[tokio::test]
async fn read_binary_files_as_base64_or_refuses_them_as_text() {
    let f = fixture();
    let read = ReadFile::new(f.jail.clone());
    assert_err(
        run(&read, json!({"path": "sub/deeper/b.bin"})).await,
        ErrorKind::Execution,
        "File is not valid UTF-8 text: sub/deeper/b.bin (first invalid byte at offset 1); read it with encoding \"base64\" to get its bytes",
    );
    assert_eq!(
        run(
            &read,
            json!({"path": "sub/deeper/b.bin", "encoding": "base64"})
        )
        .await
        .unwrap(),
        json!({"content": "AJ+Slg==", "size": 4})
    );
    assert_err(
        run(&read, json!({"path": "hello.txt", "encoding": "latin-1"})).await,
        ErrorKind::Validation,
        "Unsupported encoding \"latin-1\": use \"utf-8\" for text or \"base64\" for the raw bytes of binary files",
    );
}

#[tokio::test]
async fn read_refuses_paths_that_leave_the_root() {
    let f = fixture();
    let read = ReadFile::new(f.jail.clone());
    let outside_abs = f.outside.join("secret.txt").display().to_string();
    let sneaky_abs = format!("{}/../outside/secret.txt", f.root.display());
    let cases = [
        "..".to_owned(),
        "../outside/secret.txt".to_owned(),
        "sub/../../outside/secret.txt".to_owned(),
        "sub/deeper/../../../outside/secret.txt".to_owned(),
        "/etc/passwd".to_owned(),
        outside_abs,
        sneaky_abs,
    ];
    for path in cases {
        assert_err(
            run(&read, json!({"path": path})).await,
            ErrorKind::Authorization,
            &denied(&path),
        );
    }
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_that_resolve_outside_are_refused_everywhere() {
    use std::os::unix::fs::symlink;
    let f = fixture();
    symlink("/etc/passwd", f.root.join("passwd")).unwrap();
    symlink(f.outside.join("secret.txt"), f.root.join("secret")).unwrap();
    symlink(&f.outside, f.root.join("out")).unwrap();
    symlink(&f.outside, f.root.join("sub/out")).unwrap();
    symlink("../../outside/secret.txt", f.root.join("sub/relative")).unwrap();
    symlink(f.root.join("missing"), f.root.join("dangling")).unwrap();
    symlink(f.root.join("loop"), f.root.join("loop")).unwrap();
    let read = ReadFile::new(f.jail.clone());
    let list = ListDirectory::new(f.jail.clone());
    let write = WriteFile::new(f.jail.clone());
    let delete = DeleteFile::new(f.jail.clone());

    let escapes = [
        "passwd",             // final component → a file outside
        "secret",             // final component → a file in a sibling directory
        "sub/relative",       // relative link climbing out
        "out/secret.txt",     // intermediate directory link
        "sub/out/secret.txt", // intermediate link below a real directory
        "out",                // final component → a directory outside
        "dangling",           // cannot be proven to stay inside
        "loop",               // a link to itself
    ];
    for path in escapes {
        let args = json!({"path": path, "content": "pwned"});
        for tool in [&read as &dyn Tool, &list, &write, &delete] {
            assert_err(
                run(tool, args.clone()).await,
                ErrorKind::Authorization,
                &denied(path),
            );
        }
    }
    // Nothing outside changed.
    assert_eq!(
        fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "top secret"
    );
    assert!(!f.outside.join("pwned").exists());
    assert!(fs::symlink_metadata(f.root.join("secret")).is_ok());
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_inside_the_root_are_followed() {
    use std::os::unix::fs::symlink;
    let f = fixture();
    symlink("hello.txt", f.root.join("alias.txt")).unwrap();
    symlink("sub", f.root.join("subalias")).unwrap();
    let read = ReadFile::new(f.jail.clone());
    assert_eq!(
        run(&read, json!({"path": "alias.txt"})).await.unwrap()["content"],
        json!("hello world")
    );
    assert_eq!(
        run(&read, json!({"path": "subalias/a.txt"})).await.unwrap()["content"],
        json!("aaa")
    );
    // Writing through a link replaces the target's content and keeps the link.
    let write = WriteFile::new(f.jail.clone());
    run(&write, json!({"path": "alias.txt", "content": "bye"}))
        .await
        .unwrap();
    assert_eq!(fs::read_to_string(f.root.join("hello.txt")).unwrap(), "bye");
    assert!(
        fs::symlink_metadata(f.root.join("alias.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Deleting a link removes the link, not the target.
    let delete = DeleteFile::new(f.jail.clone());
    assert_eq!(
        run(&delete, json!({"path": "alias.txt"})).await.unwrap(),
        json!({"deleted": "alias.txt"})
    );
    assert!(fs::symlink_metadata(f.root.join("alias.txt")).is_err());
    assert!(f.root.join("hello.txt").exists());
}

#[cfg(unix)]
#[tokio::test]
async fn a_root_given_through_a_symlink_works_and_stays_confined() {
    use std::os::unix::fs::symlink;
    let f = fixture();
    let link = f.outside.join("root-link");
    symlink(&f.root, &link).unwrap();
    let jail = Arc::new(Jail::new(&link).unwrap());
    assert_eq!(jail.root(), fs::canonicalize(&f.root).unwrap());
    let read = ReadFile::new(jail);
    let via_link = link.join("hello.txt").display().to_string();
    assert_eq!(
        run(&read, json!({"path": via_link})).await.unwrap()["size"],
        json!(11)
    );
    let escape = format!("{}/../secret.txt", link.display());
    assert_err(
        run(&read, json!({"path": escape})).await,
        ErrorKind::Authorization,
        &denied(&escape),
    );
}

#[tokio::test]
async fn missing_and_wrong_kind_of_paths() {
    let f = fixture();
    let read = ReadFile::new(f.jail.clone());
    let list = ListDirectory::new(f.jail.clone());
    let delete = DeleteFile::new(f.jail.clone());
    for path in ["nope.txt", "nope/a.txt", "hello.txt/x"] {
        for tool in [&read as &dyn Tool, &list, &delete] {
            assert_err(
                run(tool, json!({"path": path})).await,
                ErrorKind::Execution,
                &format!("File not found: {path}"),
            );
        }
    }
    assert_err(
        run(&read, json!({"path": "sub"})).await,
        ErrorKind::Execution,
        "Is a directory: sub (use list_directory to see what it contains)",
    );
    assert_err(
        run(&list, json!({"path": "hello.txt"})).await,
        ErrorKind::Execution,
        "Not a directory: hello.txt (use read_file to read a file)",
    );
    assert_err(
        run(&read, json!({"path": ""})).await,
        ErrorKind::Validation,
        "Path is empty: give a path relative to the root, like notes.txt (use . for the root itself)",
    );
    assert_err(
        run(&read, json!({"path": "a\u{0}b"})).await,
        ErrorKind::Validation,
        "Invalid path \"a\\0b\": paths cannot contain NUL bytes",
    );
    assert_err(
        run(&read, json!({})).await,
        ErrorKind::Validation,
        "Missing required argument path (a string)",
    );
}

#[tokio::test]
async fn read_refuses_files_over_the_cap() {
    let f = fixture();
    let big = fs::File::create(f.root.join("big.bin")).unwrap();
    big.set_len(MAX_FILE_BYTES + 1).unwrap();
    let read = ReadFile::new(f.jail.clone());
    assert_err(
        run(&read, json!({"path": "big.bin"})).await,
        ErrorKind::Execution,
        &format!(
            "File is too large: big.bin is {} bytes; read_file reads at most {MAX_FILE_BYTES} bytes (10 MiB)",
            MAX_FILE_BYTES + 1
        ),
    );
}

#[cfg(unix)]
#[tokio::test]
async fn read_refuses_special_files_without_blocking() {
    let f = fixture();
    let fifo = f.root.join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let read = ReadFile::new(f.jail.clone());
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        run(&read, json!({"path": "fifo"})),
    )
    .await
    .expect("reading a FIFO must not block");
    assert_err(
        result,
        ErrorKind::Execution,
        "Not a regular file: fifo (read_file reads regular files only)",
    );
    // And a listing leaves it out.
    let list = ListDirectory::new(f.jail.clone());
    let names = names(&run(&list, json!({"path": "."})).await.unwrap());
    assert!(!names.contains(&"fifo".to_owned()), "{names:?}");
}

// ---------------------------------------------------------------------------------------------
// write_file

#[tokio::test]
async fn write_creates_replaces_and_reports_bytes() {
    let f = fixture();
    let write = WriteFile::new(f.jail.clone());
    assert_eq!(
        run(&write, json!({"path": "new.txt", "content": "héllo"}))
            .await
            .unwrap(),
        json!({"bytesWritten": 6})
    );
    assert_eq!(fs::read_to_string(f.root.join("new.txt")).unwrap(), "héllo");
    // Replaces the whole content (shorter content leaves no tail behind).
    run(&write, json!({"path": "hello.txt", "content": "hi"}))
        .await
        .unwrap();
    assert_eq!(fs::read_to_string(f.root.join("hello.txt")).unwrap(), "hi");
    // Creates missing parent directories inside the root.
    run(&write, json!({"path": "a/b/c/d.txt", "content": ""}))
        .await
        .unwrap();
    assert_eq!(fs::read(f.root.join("a/b/c/d.txt")).unwrap(), b"");
    // No temporary files are left behind.
    let leftovers: Vec<_> = fs::read_dir(&f.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".toolgate-write"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[cfg(unix)]
#[tokio::test]
async fn write_keeps_the_permissions_of_an_existing_file() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let script = f.root.join("run.sh");
    fs::write(&script, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o750)).unwrap();
    let write = WriteFile::new(f.jail.clone());
    run(
        &write,
        json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
    )
    .await
    .unwrap();
    assert_eq!(
        fs::metadata(&script).unwrap().permissions().mode() & 0o777,
        0o750
    );
}

#[tokio::test]
async fn write_refuses_escapes_directories_and_oversized_content() {
    let f = fixture();
    let write = WriteFile::new(f.jail.clone());
    let outside = f.outside.join("x.txt").display().to_string();
    for path in [
        "../x.txt",
        "../outside/x.txt",
        "new/../../x.txt",
        outside.as_str(),
    ] {
        assert_err(
            run(&write, json!({"path": path, "content": "x"})).await,
            ErrorKind::Authorization,
            &denied(path),
        );
    }
    assert!(!f.outside.join("x.txt").exists());
    assert!(!f.root.join("new").exists());
    for path in ["sub", ".", "sub/"] {
        assert_err(
            run(&write, json!({"path": path, "content": "x"})).await,
            ErrorKind::Execution,
            &format!("Is a directory: {path} (write_file writes files; give the path of a file)"),
        );
    }
    assert_err(
        run(&write, json!({"path": "hello.txt/x", "content": "x"})).await,
        ErrorKind::Execution,
        "Cannot write hello.txt/x: one of its parent paths is a file, not a directory",
    );
    let huge = "x".repeat(usize::try_from(MAX_FILE_BYTES).unwrap() + 1);
    assert_err(
        run(&write, json!({"path": "huge.txt", "content": huge})).await,
        ErrorKind::Validation,
        &format!(
            "Content is {} bytes; write_file writes at most {MAX_FILE_BYTES} bytes (10 MiB)",
            MAX_FILE_BYTES + 1
        ),
    );
    assert!(!f.root.join("huge.txt").exists());
}

/// Every page of a read, following nextCursor: (startLine, lineCount, content) per page.
async fn read_pages(read: &ReadFile, args: Value) -> Vec<(u64, u64, String)> {
    let mut pages = Vec::new();
    let mut args = args;
    loop {
        let out = run(read, args.clone()).await.unwrap();
        pages.push((
            out["startLine"].as_u64().unwrap(),
            out["lineCount"].as_u64().unwrap(),
            out["content"].as_str().unwrap().to_owned(),
        ));
        match out.get("nextCursor") {
            Some(Value::String(c)) => args["cursor"] = json!(c),
            None => return pages,
            Some(other) => panic!("nextCursor {other}"),
        }
        assert!(pages.len() < 10_000, "paging does not end");
    }
}

#[tokio::test]
async fn read_file_pages_by_lines_and_the_pages_add_up_to_the_file() {
    let f = fixture();
    let read = ReadFile::new(f.jail.clone());
    let text: String = (1..=4_500)
        .map(|i| format!("line {i}\n"))
        .collect::<String>()
        + "no newline";
    fs::write(f.root.join("long.txt"), &text).unwrap();
    // Without limit: the first 2000 lines and a cursor.
    let out = run(&read, json!({"path": "long.txt"})).await.unwrap();
    assert_eq!(out["startLine"], json!(1));
    assert_eq!(out["lineCount"], json!(2000));
    assert_eq!(out["totalLines"], json!(4501));
    assert_eq!(out["size"], json!(text.len()));
    assert!(out["content"].as_str().unwrap().ends_with("line 2000\n"));
    assert!(out["nextCursor"].is_string());
    let pages = read_pages(&read, json!({"path": "long.txt"})).await;
    assert_eq!(
        pages.iter().map(|(s, n, _)| (*s, *n)).collect::<Vec<_>>(),
        [(1, 2000), (2001, 2000), (4001, 501)]
    );
    let joined: String = pages.iter().map(|(_, _, c)| c.as_str()).collect();
    assert_eq!(joined, text);
    let pages = read_pages(&read, json!({"path": "long.txt", "limit": 1000})).await;
    assert_eq!(pages.len(), 5);
    let last = pages.last().unwrap();
    assert_eq!((last.0, last.1), (4001, 501));
    assert!(last.2.starts_with("line 4001\n") && last.2.ends_with("line 4500\nno newline"));
    // A file that fits: no cursor; an empty file has no lines.
    let all = run(&read, json!({"path": "long.txt", "limit": 20_000}))
        .await
        .unwrap();
    assert_eq!(all["content"], json!(text));
    assert!(all.get("nextCursor").is_none());
    fs::write(f.root.join("empty.txt"), "").unwrap();
    assert_eq!(
        run(&read, json!({"path": "empty.txt"})).await.unwrap(),
        json!({"content": "", "size": 0, "startLine": 1, "lineCount": 0, "totalLines": 0})
    );
    // base64 returns the whole file, with no paging.
    let b64 = run(
        &read,
        json!({"path": "long.txt", "encoding": "base64", "limit": 1}),
    )
    .await
    .unwrap();
    assert!(b64.get("nextCursor").is_none() && b64.get("lineCount").is_none());
    let cursor = out["nextCursor"].as_str().unwrap();
    let err = run(
        &read,
        json!({"path": "long.txt", "encoding": "base64", "cursor": cursor}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.message().contains("leave cursor out"), "{err}");
}

#[tokio::test]
async fn a_read_cursor_is_stale_once_the_file_changes_and_bound_to_its_path() {
    let f = fixture();
    let read = ReadFile::new(f.jail.clone());
    fs::write(f.root.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    fs::write(f.root.join("other.txt"), "one\ntwo\nthree\n").unwrap();
    let out = run(&read, json!({"path": "notes.txt", "limit": 1}))
        .await
        .unwrap();
    assert_eq!(out["content"], json!("one\n"));
    let cursor = out["nextCursor"].as_str().unwrap().to_owned();
    // The same content under another name is still another file.
    let err = run(&read, json!({"path": "other.txt", "cursor": cursor}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(
        err.message()
            .starts_with("cursor was made for path \"notes.txt\""),
        "{err}"
    );
    // Same size, same line count, other content: stale.
    fs::write(f.root.join("notes.txt"), "one\ntwo\nthreE\n").unwrap();
    let err = run(&read, json!({"path": "notes.txt", "cursor": cursor}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(
        err.message(),
        "cursor is stale: the file changed, start again without cursor (notes.txt is not the file the cursor was made for)"
    );
    // Put back, the cursor reads on.
    fs::write(f.root.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    let next = run(
        &read,
        json!({"path": "notes.txt", "cursor": cursor, "limit": 5}),
    )
    .await
    .unwrap();
    assert_eq!(next["content"], json!("two\nthree\n"));
    assert_eq!(next["startLine"], json!(2));
    let err = run(
        &read,
        json!({"path": "notes.txt", "cursor": "bm90IGEgY3Vyc29y"}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.message(),
        "cursor is not a cursor of read_file (it was cut, changed or made up): pass the nextCursor of the previous read_file result unchanged, or leave cursor out to start from the beginning"
    );
}

// ---------------------------------------------------------------------------------------------
// list_directory

fn names(listing: &Value) -> Vec<String> {
    listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn list_is_sorted_with_types_and_sizes() {
    let f = fixture();
    let list = ListDirectory::new(f.jail.clone());
    assert_eq!(
        run(&list, json!({"path": "."})).await.unwrap(),
        json!({
            "entries": [
                {"name": "hello.txt", "type": "file", "size": 11},
                {"name": "sub", "type": "directory", "size": 0}
            ],
            "truncated": false
        })
    );
    assert_eq!(
        run(&list, json!({"path": ".", "recursive": true}))
            .await
            .unwrap(),
        json!({
            "entries": [
                {"name": "hello.txt", "type": "file", "size": 11},
                {"name": "sub", "type": "directory", "size": 0},
                {"name": "sub/a.txt", "type": "file", "size": 3},
                {"name": "sub/deeper", "type": "directory", "size": 0},
                {"name": "sub/deeper/b.bin", "type": "file", "size": 4}
            ],
            "truncated": false
        })
    );
    // Names are relative to the listed directory.
    assert_eq!(
        names(
            &run(&list, json!({"path": "sub", "recursive": true}))
                .await
                .unwrap()
        ),
        ["a.txt", "deeper", "deeper/b.bin"]
    );
    // Each directory is followed by its own contents, before siblings that sort after it.
    fs::create_dir(f.root.join("sub-x")).unwrap();
    fs::write(f.root.join("sub-x/z.txt"), "").unwrap();
    assert_eq!(
        names(
            &run(&list, json!({"path": ".", "recursive": true}))
                .await
                .unwrap()
        ),
        [
            "hello.txt",
            "sub",
            "sub/a.txt",
            "sub/deeper",
            "sub/deeper/b.bin",
            "sub-x",
            "sub-x/z.txt"
        ]
    );
}

#[cfg(unix)]
#[tokio::test]
async fn list_shows_inside_links_as_targets_and_hides_the_rest() {
    use std::os::unix::fs::symlink;
    let f = fixture();
    symlink("hello.txt", f.root.join("alias.txt")).unwrap();
    symlink("sub", f.root.join("subalias")).unwrap();
    symlink(".", f.root.join("sub/cycle")).unwrap();
    symlink(&f.outside, f.root.join("out")).unwrap();
    symlink("/etc/passwd", f.root.join("passwd")).unwrap();
    symlink("missing", f.root.join("dangling")).unwrap();
    let list = ListDirectory::new(f.jail.clone());
    assert_eq!(
        run(&list, json!({"path": ".", "recursive": true}))
            .await
            .unwrap(),
        json!({
            "entries": [
                {"name": "alias.txt", "type": "file", "size": 11},
                {"name": "hello.txt", "type": "file", "size": 11},
                {"name": "sub", "type": "directory", "size": 0},
                {"name": "sub/a.txt", "type": "file", "size": 3},
                {"name": "sub/cycle", "type": "directory", "size": 0},
                {"name": "sub/deeper", "type": "directory", "size": 0},
                {"name": "sub/deeper/b.bin", "type": "file", "size": 4},
                {"name": "subalias", "type": "directory", "size": 0}
            ],
            "truncated": false
        })
    );
    // Listing through an inside link works like listing its target.
    assert_eq!(
        names(&run(&list, json!({"path": "subalias"})).await.unwrap()),
        ["a.txt", "cycle", "deeper"]
    );
}

#[tokio::test]
async fn list_pages_hold_at_most_limit_entries_and_the_largest_limit_is_the_cap() {
    let f = fixture();
    let many = f.root.join("many");
    fs::create_dir(&many).unwrap();
    for i in 0..toolgate_builtins::MAX_LIST_ENTRIES + 5 {
        fs::write(many.join(format!("f{i:05}")), "").unwrap();
    }
    let list = ListDirectory::new(f.jail.clone());
    // Without limit: the default page, and a cursor to the rest.
    let out = run(&list, json!({"path": "many"})).await.unwrap();
    assert_eq!(out["truncated"], json!(true));
    assert!(out["nextCursor"].is_string(), "{}", out["truncated"]);
    let first = names(&out);
    assert_eq!(first.len(), toolgate_builtins::DEFAULT_LIST_ENTRIES);
    assert_eq!(first.first().map(String::as_str), Some("f00000"));
    // The largest limit is the old cap.
    let out = run(
        &list,
        json!({"path": "many", "limit": toolgate_builtins::MAX_LIST_ENTRIES}),
    )
    .await
    .unwrap();
    assert_eq!(names(&out).len(), toolgate_builtins::MAX_LIST_ENTRIES);
    assert_eq!(out["truncated"], json!(true));
    // A listing that fits says so and has no cursor.
    let exact = run(&list, json!({"path": "sub"})).await.unwrap();
    assert_eq!(exact["truncated"], json!(false));
    assert!(exact.get("nextCursor").is_none(), "{exact}");
    for bad in [
        json!(0),
        json!(toolgate_builtins::MAX_LIST_ENTRIES + 1),
        json!("10"),
    ] {
        let err = run(&list, json!({"path": "sub", "limit": bad}))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{bad}");
        assert!(err.message().contains("from 1 to 10000"), "{err}");
    }
}

/// Every page of a listing, following nextCursor until there is none.
async fn all_pages(list: &ListDirectory, args: Value) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut args = args;
    loop {
        let out = run(list, args.clone()).await.unwrap();
        pages.push(names(&out));
        match out.get("nextCursor") {
            Some(Value::String(c)) => {
                assert_eq!(out["truncated"], json!(true));
                args["cursor"] = json!(c);
            }
            None => {
                assert_eq!(out["truncated"], json!(false));
                return pages;
            }
            Some(other) => panic!("nextCursor {other}"),
        }
        assert!(pages.len() < 1000, "paging does not end");
    }
}

#[tokio::test]
async fn paging_through_a_directory_returns_every_entry_once_in_order() {
    let f = fixture();
    let many = f.root.join("many");
    fs::create_dir(&many).unwrap();
    for i in 0..2_345 {
        fs::write(many.join(format!("f{i:05}")), "x").unwrap();
    }
    let list = ListDirectory::new(f.jail.clone());
    let whole = names(
        &run(&list, json!({"path": "many", "limit": 10_000}))
            .await
            .unwrap(),
    );
    assert_eq!(whole.len(), 2_345);
    let pages = all_pages(&list, json!({"path": "many", "limit": 1000})).await;
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [1000, 1000, 345]
    );
    assert_eq!(pages.concat(), whole);
    // Any page size gives the same sequence.
    for limit in [7, 2_344, 2_345] {
        let pages = all_pages(&list, json!({"path": "many", "limit": limit})).await;
        assert_eq!(pages.concat(), whole, "limit {limit}");
    }
}

#[tokio::test]
async fn recursive_paging_resumes_inside_subdirectories_in_listing_order() {
    let f = fixture();
    // Names where plain string order and listing order differ ("a-b" < "a/x" < "a0").
    for dir in ["t/a", "t/a/x", "t/a-b", "t/a0", "t/b/c/d"] {
        fs::create_dir_all(f.root.join(dir)).unwrap();
    }
    for file in ["t/a/1", "t/a/x/2", "t/a-b/3", "t/a0/4", "t/b/c/d/5", "t/z"] {
        fs::write(f.root.join(file), "").unwrap();
    }
    let list = ListDirectory::new(f.jail.clone());
    let args = json!({"path": "t", "recursive": true});
    let whole = names(&run(&list, args.clone()).await.unwrap());
    assert_eq!(
        whole,
        [
            "a", "a/1", "a/x", "a/x/2", "a-b", "a-b/3", "a0", "a0/4", "b", "b/c", "b/c/d",
            "b/c/d/5", "z"
        ]
    );
    for limit in 1..=whole.len() {
        let mut paged = args.clone();
        paged["limit"] = json!(limit);
        assert_eq!(
            all_pages(&list, paged).await.concat(),
            whole,
            "limit {limit}"
        );
    }
    // A page resumes after the last entry even when that entry was deleted in between.
    let mut paged = args.clone();
    paged["limit"] = json!(4);
    let out = run(&list, paged.clone()).await.unwrap();
    assert_eq!(names(&out), ["a", "a/1", "a/x", "a/x/2"]);
    fs::remove_file(f.root.join("t/a/x/2")).unwrap();
    paged["cursor"] = out["nextCursor"].clone();
    let next = run(&list, paged).await.unwrap();
    assert_eq!(names(&next), ["a-b", "a-b/3", "a0", "a0/4"]);
}

#[tokio::test]
async fn a_list_cursor_only_works_with_the_arguments_it_was_made_for() {
    let f = fixture();
    let list = ListDirectory::new(f.jail.clone());
    let out = run(&list, json!({"path": "sub", "recursive": true, "limit": 1}))
        .await
        .unwrap();
    let cursor = out["nextCursor"].as_str().unwrap().to_owned();
    for other in [
        json!({"path": ".", "recursive": true, "cursor": cursor}),
        json!({"path": "sub", "cursor": cursor}),
    ] {
        let err = run(&list, other.clone()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{other}");
        assert_eq!(
            err.message(),
            "cursor was made for path \"sub\" with recursive = true: call list_directory with the same arguments as the call that returned it, or leave cursor out to start from the beginning"
        );
    }
    // A cursor of another tool, and garbage, are refused and say what to do.
    let read = ReadFile::new(f.jail.clone());
    let err = run(&read, json!({"path": "sub/a.txt", "cursor": cursor}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(
        err.message()
            .starts_with("cursor belongs to list_directory, not to read_file"),
        "{err}"
    );
    let mut edited = cursor.clone();
    edited.insert(3, 'A');
    for garbage in ["garbage", "e30.AAAA", edited.as_str()] {
        let err = run(
            &list,
            json!({"path": "sub", "recursive": true, "cursor": garbage}),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{garbage}");
        assert_eq!(
            err.message(),
            "cursor is not a cursor of list_directory (it was cut, changed or made up): pass the nextCursor of the previous list_directory result unchanged, or leave cursor out to start from the beginning"
        );
    }
}

#[tokio::test]
async fn cancelled_calls_touch_nothing() {
    let f = fixture();
    let ctx = ctx();
    ctx.cancellation().cancel();
    let write = WriteFile::new(f.jail.clone());
    let err = write
        .call(json!({"path": "new.txt", "content": "x"}), ctx.clone())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert!(!f.root.join("new.txt").exists());
    let delete = DeleteFile::new(f.jail.clone());
    let err = delete
        .call(json!({"path": "hello.txt"}), ctx.clone())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert!(f.root.join("hello.txt").exists());
    let list = ListDirectory::new(f.jail.clone());
    let err = list.call(json!({"path": "."}), ctx).await.unwrap_err();
    assert_eq!(err.message(), "Request was cancelled");
}

// ---------------------------------------------------------------------------------------------
// delete_file

#[tokio::test]
async fn delete_removes_files_and_refuses_directories() {
    let f = fixture();
    let delete = DeleteFile::new(f.jail.clone());
    assert_eq!(
        run(&delete, json!({"path": "sub/a.txt"})).await.unwrap(),
        json!({"deleted": "sub/a.txt"})
    );
    assert!(!f.root.join("sub/a.txt").exists());
    assert_err(
        run(&delete, json!({"path": "sub/a.txt"})).await,
        ErrorKind::Execution,
        "File not found: sub/a.txt",
    );
    for path in ["sub", "sub/deeper", ".", "sub/.."] {
        assert_err(
            run(&delete, json!({"path": path})).await,
            ErrorKind::Execution,
            &format!(
                "Is a directory: {path} (delete_file deletes single files, never directories)"
            ),
        );
    }
    assert!(f.root.join("sub/deeper/b.bin").exists());
    for path in ["../outside/secret.txt", "/etc/passwd"] {
        assert_err(
            run(&delete, json!({"path": path})).await,
            ErrorKind::Authorization,
            &denied(path),
        );
    }
    assert!(f.outside.join("secret.txt").exists());
}

// ---------------------------------------------------------------------------------------------
// setup

#[test]
fn the_root_must_be_an_existing_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let err = builtin_tools(&missing).err().unwrap();
    assert_eq!(err.kind(), BuiltinErrorKind::NotFound);
    assert_eq!(
        err.to_string(),
        format!("Root directory not found: {}", missing.display())
    );
    let file = tmp.path().join("file");
    fs::write(&file, "").unwrap();
    let err = Jail::new(&file).unwrap_err();
    assert_eq!(err.kind(), BuiltinErrorKind::Invalid);
    assert_eq!(
        err.to_string(),
        format!("Root is not a directory: {}", file.display())
    );
    let relative = Jail::new(Path::new(".")).unwrap();
    assert!(relative.root().is_absolute());
}

#[tokio::test]
async fn hard_links_are_not_read_because_they_may_share_an_outside_file() {
    let f = fixture();
    fs::hard_link(f.outside.join("secret.txt"), f.root.join("hard.txt")).unwrap();
    let read = ReadFile::new(f.jail.clone());
    let err = run(&read, json!({"path": "hard.txt"})).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authorization);
    assert!(
        err.message().starts_with("Permission denied: hard.txt"),
        "{}",
        err.message()
    );
    assert!(!err.message().contains("top secret"));
}

#[tokio::test]
async fn overlong_or_overdeep_paths_are_refused_before_touching_the_disk() {
    let f = fixture();
    let write = WriteFile::new(f.jail.clone());
    let deep = "a/".repeat(3000) + "x.txt";
    let err = run(&write, json!({"path": deep, "content": "x"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    let deep = "d/".repeat(70) + "x.txt";
    let err = run(&write, json!({"path": deep, "content": "x"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.message().contains("too deep"), "{}", err.message());
    assert!(
        !f.root.join("a").exists() && !f.root.join("d").exists(),
        "no directories may be left behind"
    );
}

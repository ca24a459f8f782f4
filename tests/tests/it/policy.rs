//! What a session's options limit, over the real socket: `tools` limits only the model-facing
//! tools (`tools/list`, `tools/call`), never `file/*` or `fs/*`; `readOnly` is the one write
//! barrier, refusing every write path of every layer with `FS_PERMISSION_DENIED` and leaving
//! the files as they were.

use std::fs;
use std::path::Path;

use filectx_tests::{Daemon, Raw, error_code, fs_error, ok, root_of, rpc, tool};
use serde_json::{Value, json};

/// The names `tools/list` gives.
fn listed(raw: &mut Raw) -> Vec<String> {
    let list = ok(raw, "tools/list", json!({}));
    list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// The `FS_*` identifier of a `tools/call` that must fail as a tool (an `isError` result).
fn tool_fails(raw: &mut Raw, name: &str, arguments: Value) -> String {
    let result = tool(raw, name, arguments.clone());
    assert_eq!(result["isError"], true, "{name} {arguments}: {result}");
    result["error"]["code"].as_str().unwrap().to_owned()
}

/// The current version of `path`, from the provider (which records nothing).
fn version_of(raw: &mut Raw, path: &str) -> String {
    ok(raw, "fs/stat", json!({"path": path}))["version"].as_str().unwrap().to_owned()
}

/// The names in `dir`, sorted: a refused write must leave no file, folder or temporary file.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// A session limited to the `read` tool sees and may call only `read` through the tools layer
/// (write and edit are unknown tools, -32602), yet the harness's layers serve it in full: it
/// creates, overwrites and edits files through `file/*` and `fs/*`. `tools` shapes what a model
/// is offered; it is not a permission.
#[test]
fn tools_limit_the_model_facing_tools_but_not_file_or_fs() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    fs::write(root.join("notes.txt"), "one\ntwo\n").unwrap();
    let mut raw = daemon.session_with(json!({"roots": [root], "tools": ["read"]}));

    assert_eq!(listed(&mut raw), ["read"]);
    assert_eq!(tool(&mut raw, "read", json!({"file_path": "notes.txt"}))["isError"], false);
    for (name, arguments) in [
        ("write", json!({"file_path": "notes.txt", "content": "by a tool\n"})),
        ("write", json!({"file_path": "tool-made.txt", "content": "by a tool\n"})),
        ("edit", json!({"file_path": "notes.txt", "old_string": "one", "new_string": "ONE"})),
    ] {
        let response = rpc(&mut raw, "tools/call", json!({"name": name, "arguments": arguments}));
        assert_eq!(error_code(&response), -32602, "{name} {arguments}: {response}");
    }
    assert_eq!(fs::read_to_string(root.join("notes.txt")).unwrap(), "one\ntwo\n");
    assert!(!root.join("tool-made.txt").exists());

    // file/*: create, then (the read above recorded notes.txt) overwrite and edit.
    let created = ok(&mut raw, "file/write", json!({"path": "created.txt", "content": "fresh\n"}));
    assert_eq!(created["operation"], "create");
    let updated = ok(&mut raw, "file/write", json!({"path": "notes.txt", "content": "one\ntwo\nthree\n"}));
    assert_eq!(updated["operation"], "update");
    let edited =
        ok(&mut raw, "file/edit", json!({"path": "notes.txt", "oldString": "two", "newString": "TWO"}));
    assert_eq!(edited["replacements"], 1);
    // fs/*: explicit expectations instead of the session's record.
    ok(
        &mut raw,
        "fs/writeText",
        json!({"path": "raw.txt", "content": "raw\n", "expect": {"kind": "createIfAbsent"}}),
    );
    let version = version_of(&mut raw, "raw.txt");
    ok(
        &mut raw,
        "fs/editText",
        json!({"path": "raw.txt", "oldString": "raw", "newString": "RAW", "expectedVersion": version}),
    );

    assert_eq!(fs::read_to_string(root.join("created.txt")).unwrap(), "fresh\n");
    assert_eq!(fs::read_to_string(root.join("notes.txt")).unwrap(), "one\nTWO\nthree\n");
    assert_eq!(fs::read_to_string(root.join("raw.txt")).unwrap(), "RAW\n");

    // The other way round: a session without `read` cannot call it, but reads through file/*,
    // and that read authorizes its `edit` tool (one record per session, shared by the layers).
    let mut editor = daemon.session_with(json!({"roots": [root], "tools": ["edit"]}));
    assert_eq!(listed(&mut editor), ["edit"]);
    let response =
        rpc(&mut editor, "tools/call", json!({"name": "read", "arguments": {"file_path": "notes.txt"}}));
    assert_eq!(error_code(&response), -32602, "{response}");
    ok(&mut editor, "file/read", json!({"path": "notes.txt"}));
    let result = tool(
        &mut editor,
        "edit",
        json!({"file_path": "notes.txt", "old_string": "three", "new_string": "3"}),
    );
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(fs::read_to_string(root.join("notes.txt")).unwrap(), "one\nTWO\n3\n");
}

/// A read-only session reads at every layer, and every write path of every layer — `tools/call`
/// write and edit, `file/write`, `file/edit`, `fs/writeText` (each expectation), `fs/editText` —
/// answers `FS_PERMISSION_DENIED` for an existing file it has read, a new file, and a file in a
/// new folder, whatever its `tools`. Nothing on disk changes: same bytes, same inode, no new
/// names, no temporary files. Another session of the same daemon still writes.
#[test]
fn read_only_refuses_every_write_path_at_every_layer() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let guarded = root.join("guarded.txt");
    fs::write(&guarded, "original\n").unwrap();
    let inode = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&guarded).unwrap());
    let before = listing(&root);

    for tools in [None, Some(json!(["read", "write", "edit"])), Some(json!(["read"]))] {
        let mut params = json!({"roots": [root], "readOnly": true});
        if let Some(tools) = &tools {
            params["tools"] = tools.clone();
        }
        let mut raw = daemon.session_with(params);
        let init_tools = tools.clone().unwrap_or(json!(["read", "write", "edit"]));

        // Reads work at every layer, and record the file, so a refusal below is not
        // FS_NOT_OBSERVED in disguise.
        assert_eq!(ok(&mut raw, "file/read", json!({"path": "guarded.txt"}))["lines"], json!(["original"]));
        assert_eq!(ok(&mut raw, "fs/readText", json!({"path": "guarded.txt"}))["lines"], json!(["original"]));
        assert_eq!(tool(&mut raw, "read", json!({"file_path": "guarded.txt"}))["isError"], false);
        let version = version_of(&mut raw, "guarded.txt");

        for file in ["guarded.txt", "new.txt", "new-dir/new.txt"] {
            let calls = [
                ("file/write", json!({"path": file, "content": "changed\n"})),
                ("file/edit", json!({"path": file, "oldString": "original", "newString": "changed"})),
                (
                    "file/edit",
                    json!({"path": file, "oldString": "original", "newString": "changed", "replaceAll": true}),
                ),
                ("fs/writeText", json!({"path": file, "content": "changed\n", "expect": {"kind": "any"}})),
                (
                    "fs/writeText",
                    json!({"path": file, "content": "changed\n", "expect": {"kind": "createIfAbsent"}}),
                ),
                (
                    "fs/writeText",
                    json!({"path": file, "content": "changed\n",
                           "expect": {"kind": "replaceIfVersion", "version": version}}),
                ),
                (
                    "fs/editText",
                    json!({"path": file, "oldString": "original", "newString": "changed",
                           "expectedVersion": version}),
                ),
            ];
            for (method, params) in calls {
                let response = rpc(&mut raw, method, params.clone());
                assert_eq!(fs_error(&response), "FS_PERMISSION_DENIED", "{tools:?} {method} {params}");
            }
            for (name, arguments) in [
                ("write", json!({"file_path": file, "content": "changed\n"})),
                ("edit", json!({"file_path": file, "old_string": "original", "new_string": "changed"})),
            ] {
                if init_tools.as_array().unwrap().iter().any(|t| t == name) {
                    assert_eq!(
                        tool_fails(&mut raw, name, arguments.clone()),
                        "FS_PERMISSION_DENIED",
                        "{arguments}"
                    );
                } else {
                    // Not this session's tool at all: refused before readOnly is even asked.
                    let response = rpc(&mut raw, "tools/call", json!({"name": name, "arguments": arguments}));
                    assert_eq!(error_code(&response), -32602, "{response}");
                }
            }
        }

        assert_eq!(fs::read(&guarded).unwrap(), b"original\n", "{tools:?}");
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&fs::metadata(&guarded).unwrap()), inode);
        assert_eq!(listing(&root), before, "{tools:?}: a refused write left something behind");
        assert_eq!(version_of(&mut raw, "guarded.txt"), version);
    }

    // readOnly is the session's, not the daemon's.
    let mut writer = daemon.session();
    ok(&mut writer, "file/read", json!({"path": "guarded.txt"}));
    ok(&mut writer, "file/write", json!({"path": "guarded.txt", "content": "rewritten\n"}));
    assert_eq!(fs::read_to_string(&guarded).unwrap(), "rewritten\n");
}

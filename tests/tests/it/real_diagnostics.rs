//! The real language servers `tests/run` installs under `target/` (basedpyright,
//! typescript-language-server with TypeScript 5) run by the daemon as built-ins, found on its
//! `PATH`: an edit that breaks a file is answered with the error it introduced, the fix with
//! "No new errors", a change that breaks another open file counts it there, and both agents of
//! a project share one server. Skipped, and counted so, where they are not installed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use filectx_tests::lsp;
use filectx_tests::{Daemon, Raw, root_of, tool_ok};
use serde_json::json;

/// A daemon whose `PATH` starts with `dirs`, and a project folder `proj` in its root holding
/// `files` (name, text).
fn project(dirs: &[&Path], files: &[(&str, &str)]) -> (Daemon, PathBuf) {
    let mut path: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
    path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    let path: OsString = std::env::join_paths(path).unwrap();
    // A long wait: on a loaded machine an answer expected fresh must not be "still running".
    let daemon = Daemon::start_with_builtin_language_servers(&["--diagnostics-wait", "30"], &path);
    let project = root_of(&daemon).join("proj");
    std::fs::create_dir_all(&project).unwrap();
    for (name, text) in files {
        std::fs::write(project.join(name), text).unwrap();
    }
    (daemon, project)
}

fn session(daemon: &Daemon, project: &Path) -> Raw {
    let raw = daemon.session_with(json!({
        "roots": [project],
        "tools": ["read", "write", "edit", "diagnostics"],
        "clientInfo": {"name": "real-diagnostics-test"},
    }));
    // Patient past the daemon's wait for the servers.
    raw.stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    raw
}

fn edit(raw: &mut Raw, path: &Path, old: &str, new: &str) -> String {
    tool_ok(raw, "edit", json!({"file_path": path, "old_string": old, "new_string": new}))
}

/// The folder holding `program` (where the daemon finds it on `PATH`).
fn dir_of(program: &Path) -> &Path {
    program.parent().unwrap()
}

#[test]
fn basedpyright_answers_an_edit_with_the_error_it_introduced_and_the_fix_with_none() {
    let Some(server) = lsp::basedpyright() else { return };
    let (daemon, project) = project(
        &[dir_of(&server)],
        &[
            ("pyproject.toml", "[tool.basedpyright]\ntypeCheckingMode = \"standard\"\n"),
            ("shapes.py", "def area(width: int, height: int) -> int:\n    return width * height\n"),
            ("use.py", "from shapes import area\n\ntotal: int = area(2, 3)\n"),
        ],
    );
    let (shapes, user) = (project.join("shapes.py"), project.join("use.py"));
    let mut raw = session(&daemon, &project);
    tool_ok(&mut raw, "read", json!({"file_path": shapes}));
    tool_ok(&mut raw, "read", json!({"file_path": user}));
    let broke = edit(&mut raw, &shapes, "    return width * height", "    return str(width * height)");
    assert!(broke.contains("\nNew errors (basedpyright):\n2:12 "), "{broke}");
    assert!(broke.contains("\"str\"") && broke.contains("\"int\""), "{broke}");
    let fixed = edit(&mut raw, &shapes, "    return str(width * height)", "    return width * height");
    assert!(fixed.ends_with("\nNo new errors (basedpyright)."), "{fixed}");
    let clean = edit(&mut raw, &shapes, "def area", "# The area.\ndef area");
    assert!(clean.ends_with("\nNo new errors (basedpyright)."), "{clean}");
    // A signature change breaks the other open file: counted there.
    let text = edit(
        &mut raw,
        &shapes,
        "-> int:\n    return width * height",
        "-> str:\n    return str(width * height)",
    );
    assert!(text.contains("use.py: 1 new error"), "{text}");
    // A second agent on the project: the same server.
    let mut other = session(&daemon, &project);
    tool_ok(&mut other, "read", json!({"file_path": user}));
    let status = daemon.status();
    let servers = status["languageServers"].as_array().unwrap();
    assert_eq!(servers.len(), 1, "{status}");
    assert_eq!(servers[0]["name"], "basedpyright");
}

#[test]
fn typescript_answers_an_edit_with_the_error_it_introduced_and_the_fix_with_none() {
    let Some((server, _)) = lsp::typescript_language_server() else { return };
    let (daemon, project) = project(
        &[dir_of(&server)],
        &[
            ("tsconfig.json", "{\"compilerOptions\": {\"strict\": true, \"noEmit\": true}}\n"),
            (
                "shapes.ts",
                "export function area(width: number, height: number): number {\n  return width * height;\n}\n",
            ),
            ("use.ts", "import { area } from \"./shapes\";\n\nexport const total: number = area(2, 3);\n"),
        ],
    );
    let (shapes, user) = (project.join("shapes.ts"), project.join("use.ts"));
    let mut raw = session(&daemon, &project);
    tool_ok(&mut raw, "read", json!({"file_path": shapes}));
    tool_ok(&mut raw, "read", json!({"file_path": user}));
    let broke = edit(&mut raw, &shapes, "  return width * height;", "  return String(width * height);");
    assert!(broke.contains("\nNew errors (typescript):\n2:3 "), "{broke}");
    assert!(broke.contains("'string'") && broke.contains("'number'"), "{broke}");
    let fixed = edit(&mut raw, &shapes, "  return String(width * height);", "  return width * height;");
    assert!(fixed.ends_with("\nNo new errors (typescript)."), "{fixed}");
    // A clean file changed to another clean text: its server pushes nothing then, and the
    // answer is still no new errors, not "still running".
    let clean = edit(&mut raw, &shapes, "export function area", "/** The area. */\nexport function area");
    assert!(clean.ends_with("\nNo new errors (typescript)."), "{clean}");
    let text = edit(
        &mut raw,
        &shapes,
        "height: number): number {\n  return width * height;",
        "height: number): string {\n  return String(width * height);",
    );
    assert!(text.contains("use.ts: 1 new error"), "{text}");
    let status = daemon.status();
    assert_eq!(status["languageServers"][0]["name"], "typescript", "{status}");
}

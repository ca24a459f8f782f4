//! The real language servers `tests/run` installs under `target/` (basedpyright from PyPI,
//! typescript-language-server with TypeScript 5 from npm), each started directly by a plain LSP
//! client, without the daemon: it reports the type error of an opened file. This proves the
//! installs work where the tests run (CI); without them the tests are skipped, and counted so.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use filectx_tests::lsp::{self, LspClient, uri};
use serde_json::{Value, json};

/// How long a cold server may take to report: it starts Node, loads its checker and the
/// standard library's types, on a machine of 2 cores shared with other tests.
const COLD_START: Duration = Duration::from_secs(90);

/// Starts `command` in `root` (its stderr, where servers log, into `root/stderr`), initializes
/// it with `options`, opens `name` holding `text`, and returns the first diagnostics it
/// publishes for that file holding an error; the file is on disk too, as servers expect.
fn first_error(
    mut command: Command,
    root: &Path,
    options: Value,
    name: &str,
    language: &str,
    text: &str,
) -> Value {
    let stderr = std::fs::File::create(root.join("stderr")).unwrap();
    command.current_dir(root).stderr(Stdio::from(stderr));
    let mut server = LspClient::spawn(command);
    server.answer_requests = true;
    server.initialize(root, options);
    let file = root.join(name);
    std::fs::write(&file, text).unwrap();
    let file = uri(&file);
    server.open(&file, language, 1, text);
    let has_error = |params: &Value| {
        params["diagnostics"].as_array().is_some_and(|all| all.iter().any(|d| d["severity"] == 1))
    };
    let published = server.publish_for(&file, COLD_START, has_error);
    assert_eq!(
        server.shut_down().code(),
        Some(0),
        "{}",
        std::fs::read_to_string(root.join("stderr")).unwrap()
    );
    published
}

/// The errors of a publish: (line, code, message).
fn errors(published: &Value) -> Vec<(u64, Value, String)> {
    let all = published["diagnostics"].as_array().unwrap();
    let errors = all.iter().filter(|d| d["severity"] == 1);
    errors
        .map(|d| {
            let line = d["range"]["start"]["line"].as_u64().unwrap();
            (line, d["code"].clone(), d["message"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn basedpyright_reports_a_type_error() {
    let Some(program) = lsp::basedpyright() else { return };
    let root = tempfile::tempdir().unwrap();
    let mut command = Command::new(program);
    command.arg("--stdio");
    let text = "count: int = 1\nname: int = \"not a number\"\n";
    let published = first_error(command, root.path(), Value::Null, "typed.py", "python", text);
    assert_eq!(published["version"], 1, "{published}");
    let errors = errors(&published);
    assert_eq!(errors.len(), 1, "{published}");
    let (line, code, message) = &errors[0];
    assert_eq!((*line, code), (1, &json!("reportAssignmentType")), "{published}");
    assert!(message.contains("\"int\""), "{message}");
}

#[test]
fn typescript_language_server_reports_a_type_error() {
    let Some((program, typescript)) = lsp::typescript_language_server() else { return };
    let root = tempfile::tempdir().unwrap();
    let mut command = Command::new(program);
    command.arg("--stdio");
    let options = json!({"tsserver": {"path": typescript}});
    let text = "const count: number = 1;\nconst name: number = \"not a number\";\nexport { count, name };\n";
    let published = first_error(command, root.path(), options, "typed.ts", "typescript", text);
    let errors = errors(&published);
    assert_eq!(errors.len(), 1, "{published}");
    let (line, code, message) = &errors[0];
    assert_eq!((*line, code), (1, &json!(2322)), "{published}");
    assert!(message.contains("'number'"), "{message}");
}

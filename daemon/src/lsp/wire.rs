//! What the daemon says to a language server and takes from it: LSP messages as JSON, `file://`
//! URIs, and diagnostics read within bounds (so many per file, messages cut, what the server
//! sends beyond that dropped). Text from a server is never trusted: it is cut here and escaped
//! wherever it is shown.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Most diagnostics kept of one file's publish.
pub const MAX_DIAGNOSTICS_PER_FILE: usize = 500;
/// Most characters of a diagnostic's message kept.
pub const MAX_MESSAGE_CHARS: usize = 400;
/// Most characters of a diagnostic's source or code kept.
const MAX_LABEL_CHARS: usize = 64;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// An error.
    Error,
    /// A warning.
    Warning,
    /// Information.
    Information,
    /// A hint.
    Hint,
}

impl Severity {
    fn of(n: Option<u64>) -> Self {
        match n {
            Some(2) => Self::Warning,
            Some(3) => Self::Information,
            Some(4) => Self::Hint,
            // Absent: the client decides; an error is the careful reading.
            _ => Self::Error,
        }
    }
}

/// One diagnostic, as the daemon keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    /// 0-based line.
    pub line: u32,
    /// 0-based character (UTF-16 units, as the server said).
    pub character: u32,
    /// How bad.
    pub severity: Severity,
    /// Its message, cut to [`MAX_MESSAGE_CHARS`].
    pub message: String,
    /// Who said it (`typescript`, `basedpyright`).
    pub source: Option<String>,
    /// Its code.
    pub code: Option<String>,
}

impl Diagnostic {
    /// What identifies it across versions of the file: everything but its position.
    pub fn key(&self) -> (&Option<String>, &Option<String>, Severity, &str) {
        (&self.source, &self.code, self.severity, &self.message)
    }
}

fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A diagnostic from its LSP JSON; `None` when it is not one.
pub fn diagnostic(value: &Value) -> Option<Diagnostic> {
    let start = value.get("range")?.get("start")?;
    let line = u32::try_from(start.get("line")?.as_u64()?).ok()?;
    let character =
        u32::try_from(start.get("character").and_then(Value::as_u64).unwrap_or(0)).unwrap_or(u32::MAX);
    let message = cut(value.get("message")?.as_str()?, MAX_MESSAGE_CHARS);
    let label = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(cut(s, MAX_LABEL_CHARS)),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Some(Diagnostic {
        line,
        character,
        severity: Severity::of(value.get("severity").and_then(Value::as_u64)),
        message,
        source: label(value.get("source")),
        code: label(value.get("code")),
    })
}

/// The diagnostics of a `publishDiagnostics` or a pull report's `items`, at most
/// [`MAX_DIAGNOSTICS_PER_FILE`].
pub fn diagnostics(items: Option<&Value>) -> Vec<Diagnostic> {
    items
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(diagnostic).take(MAX_DIAGNOSTICS_PER_FILE).collect())
        .unwrap_or_default()
}

/// The command of typescript-language-server that hands a request to its tsserver as it is.
pub const TSSERVER_REQUEST: &str = "typescript.tsserverRequest";

/// The diagnostics of a tsserver `syntacticDiagnosticsSync` or `semanticDiagnosticsSync`
/// answer's `body`, as typescript-language-server publishes them (positions from 1-based
/// `line`/`offset` to 0-based, `text` as the message, `category` as the severity, source
/// `typescript` unless given), at most [`MAX_DIAGNOSTICS_PER_FILE`].
pub fn tsserver_diagnostics(body: Option<&Value>) -> Vec<Diagnostic> {
    let lsp = |d: &Value| -> Option<Value> {
        let start = d.get("start")?;
        let at = |key: &str| start.get(key).and_then(Value::as_u64).unwrap_or(1).saturating_sub(1);
        let severity = match d.get("category").and_then(Value::as_str) {
            Some("warning") => 2,
            Some("suggestion") => 4,
            // "error", and "message" as typescript-language-server maps it.
            _ => 1,
        };
        Some(json!({
            "range": {"start": {"line": at("line"), "character": at("offset")}},
            "message": d.get("text")?,
            "severity": severity,
            "code": d.get("code"),
            "source": d.get("source").filter(|s| s.is_string()).cloned().unwrap_or_else(|| json!("typescript")),
        }))
    };
    body.and_then(Value::as_array)
        .map(|all| all.iter().filter_map(|d| diagnostic(&lsp(d)?)).take(MAX_DIAGNOSTICS_PER_FILE).collect())
        .unwrap_or_default()
}

/// The `file://` URI of an absolute path (bytes outside the unreserved set percent-encoded).
pub fn uri_of(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path of a `file://` URI; `None` for anything else.
pub fn path_of(uri: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt as _;
    let rest = uri.strip_prefix("file://")?;
    // `file://host/path`: only the local host.
    let rest = match rest.strip_prefix("localhost") {
        Some(after) => after,
        None => rest,
    };
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    if out.contains(&0) {
        return None;
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// A request.
pub fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// The answer to a server's request `id`.
pub fn answer(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The refusal of a server's request `id` that the daemon does not serve.
pub fn refusal(id: &Value, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("filectxd does not serve {method}")}})
}

/// The `initialize` params: the daemon as the one client of a server for `root`.
pub fn initialize(root: &Path, options: Option<&Value>) -> Value {
    let uri = uri_of(root);
    let name = root.file_name().map_or_else(|| "root".to_owned(), |n| n.to_string_lossy().into_owned());
    let mut params = json!({
        "processId": std::process::id(),
        "clientInfo": {"name": "filectxd", "version": env!("CARGO_PKG_VERSION")},
        "rootUri": uri,
        "rootPath": root,
        "workspaceFolders": [{"uri": uri, "name": name}],
        "capabilities": {
            "workspace": {
                "configuration": true,
                "workspaceFolders": true,
                "didChangeWatchedFiles": {"dynamicRegistration": false},
            },
            "textDocument": {
                "synchronization": {"dynamicRegistration": false, "didSave": true, "willSave": false},
                "publishDiagnostics": {"relatedInformation": false, "versionSupport": true},
                "diagnostic": {"dynamicRegistration": false, "relatedDocumentSupport": false},
            },
            "window": {"workDoneProgress": true},
            "general": {"positionEncodings": ["utf-16"]},
        },
    });
    if let Some(options) = options {
        params["initializationOptions"] = options.clone();
    }
    params
}

/// The answer to `workspace/configuration` `params` from `settings` (a section name to a value;
/// `null` for a section not given).
pub fn configuration(params: &Value, settings: Option<&Value>) -> Value {
    let items = params.get("items").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    Value::Array(
        items
            .iter()
            .map(|item| {
                let section = item.get("section").and_then(Value::as_str).unwrap_or_default();
                settings
                    .and_then(|s| {
                        section.split('.').filter(|k| !k.is_empty()).try_fold(s, |at, key| at.get(key))
                    })
                    .cloned()
                    .unwrap_or(Value::Null)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_only_local_files_are_paths() {
        for path in ["/a/b.rs", "/with space/é.py", "/odd%/x#y?.ts"] {
            let uri = uri_of(Path::new(path));
            assert!(uri.starts_with("file:///"), "{uri}");
            assert_eq!(path_of(&uri).as_deref(), Some(Path::new(path)), "{uri}");
        }
        assert_eq!(path_of("file://localhost/a"), Some(PathBuf::from("/a")));
        assert_eq!(path_of("file://other/a"), None);
        assert_eq!(path_of("untitled:1"), None);
        assert_eq!(path_of("file:///a%00b"), None);
        assert_eq!(path_of("file:///a%4"), None);
    }

    #[test]
    fn diagnostics_are_read_within_bounds() {
        let long = "x".repeat(10_000);
        let items = json!([
            {"range": {"start": {"line": 3, "character": 4}, "end": {"line": 3, "character": 9}},
             "severity": 1, "code": 2322, "source": "typescript", "message": "Type 'string' is not assignable"},
            {"range": {"start": {"line": 0}}, "message": long},
            {"message": "no range"},
        ]);
        let read = diagnostics(Some(&items));
        assert_eq!(read.len(), 2);
        assert_eq!((read[0].line, read[0].character, read[0].code.as_deref()), (3, 4, Some("2322")));
        assert_eq!(read[1].severity, Severity::Error);
        assert_eq!(read[1].message.chars().count(), MAX_MESSAGE_CHARS + 1);
        let many = Value::Array(vec![items[0].clone(); MAX_DIAGNOSTICS_PER_FILE * 2]);
        assert_eq!(diagnostics(Some(&many)).len(), MAX_DIAGNOSTICS_PER_FILE);
    }

    #[test]
    fn tsserver_diagnostics_read_as_typescript_language_server_publishes_them() {
        let body = json!([
            {"start": {"line": 2, "offset": 3}, "end": {"line": 2, "offset": 9}, "text": "Type 'string' is not assignable to type 'number'.", "code": 2322, "category": "error"},
            {"start": {"line": 1, "offset": 1}, "text": "unused", "code": 6133, "category": "suggestion", "source": "ts-plugin"},
            {"text": "no start"},
        ]);
        let read = tsserver_diagnostics(Some(&body));
        assert_eq!(read.len(), 2);
        let first = &read[0];
        assert_eq!((first.line, first.character, first.severity), (1, 2, Severity::Error));
        assert_eq!((first.code.as_deref(), first.source.as_deref()), (Some("2322"), Some("typescript")));
        assert_eq!(first.message, "Type 'string' is not assignable to type 'number'.");
        assert_eq!((read[1].severity, read[1].source.as_deref()), (Severity::of(Some(4)), Some("ts-plugin")));
        assert!(tsserver_diagnostics(Some(&json!({"not": "a list"}))).is_empty());
    }

    #[test]
    fn configuration_answers_by_section() {
        let settings = json!({"python": {"analysis": {"typeCheckingMode": "strict"}}});
        let asked = json!({"items": [{"section": "python.analysis"}, {"section": "other"}, {}]});
        assert_eq!(
            configuration(&asked, Some(&settings)),
            json!([{"typeCheckingMode": "strict"}, null, {"python": {"analysis": {"typeCheckingMode": "strict"}}}])
        );
    }
}

//! The checked-in JSON Schema of the wire (`protocol/schema/filectx.schema.json`): every method
//! of `methods.rs` with its kind, direction, params and result type, and the definitions of
//! those types as serde puts them on the wire. The other languages' clients generate their types
//! from that file, so this test fails when it no longer matches the Rust types. Regenerate it
//! with `UPDATE_EXPECT=1 cargo test -p filectx-protocol --features schema --test schema`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use filectx_protocol::methods;
use filectx_protocol::rpc::{
    CancelParams, FsStatResult, StreamCancelParams, StreamCancelResult, SubscriptionId, TextChunkNotification,
};
use filectx_protocol::types::{
    CallToolParams, CallToolResult, ContextResetParams, DaemonStatus, DaemonStatusParams, EditParams,
    EditResult, FileDidChange, FileStatParams, FileStatResult, FsEditParams, FsWriteParams, GateCancelParams,
    GateRefusalData, GateRegisterParams, GateRegisterResult, GateUnregisterParams, InitializeParams,
    InitializeResult, JournalDiffParams, JournalDiffResult, JournalListParams, JournalListResult,
    JournalRestoreParams, JournalRestoreResult, LspDiagnosticsParams, LspDiagnosticsResult, PathParams,
    ReadParams, ReadResult, ResolveResult, StreamTextParams, ToolsListResult, WriteIntentParams,
    WriteIntentResult, WriteParams, WriteResult,
};
use filectx_protocol::{FsErrorCode, FsErrorData};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

/// Where the schema is checked in, from this crate's folder.
const SCHEMA_FILE: &str = "schema/filectx.schema.json";

/// Whether a method is answered.
#[derive(Clone, Copy)]
enum Kind {
    Request,
    Notification,
}

/// Who sends it.
#[derive(Clone, Copy)]
enum Direction {
    ClientToServer,
    ServerToClient,
    /// Either side (`$/cancelRequest`: a client cancels its request, the daemon withdraws a
    /// gate's intent).
    Both,
}

/// One row of the method table, types already registered with the generator.
struct Method {
    name: &'static str,
    kind: Kind,
    direction: Direction,
    params: Option<String>,
    result: Option<String>,
}

/// Builds the schema of one type into the generator's definitions and returns its name. A type
/// the generator inlines (a transparent newtype) is added under its own name, so every method's
/// params and result are a definition.
fn named<T: JsonSchema>(generator: &mut SchemaGenerator) -> Option<String> {
    let name = T::schema_name().into_owned();
    let schema: Schema = generator.subschema_for::<T>();
    let reference = format!("#/definitions/{name}");
    if schema.get("$ref").and_then(Value::as_str) != Some(reference.as_str()) {
        let previous = generator.definitions_mut().insert(name.clone(), schema.to_value());
        assert!(previous.is_none(), "two types are named {name}");
    }
    Some(name)
}

/// The method table: every name of `methods.rs`, with the types on the wire.
fn method_table(g: &mut SchemaGenerator) -> Vec<Method> {
    use Direction::{ClientToServer as Up, ServerToClient as Down};
    use Kind::{Notification, Request};
    let m = |name, kind, direction, params, result| Method { name, kind, direction, params, result };
    vec![
        m(methods::INITIALIZE, Request, Up, named::<InitializeParams>(g), named::<InitializeResult>(g)),
        m(methods::SHUTDOWN, Request, Up, None, None),
        m(methods::EXIT, Notification, Up, None, None),
        m(methods::DAEMON_STATUS, Request, Up, named::<DaemonStatusParams>(g), named::<DaemonStatus>(g)),
        m(methods::TOOLS_LIST, Request, Up, None, named::<ToolsListResult>(g)),
        m(methods::TOOLS_CALL, Request, Up, named::<CallToolParams>(g), named::<CallToolResult>(g)),
        m(methods::FILE_READ, Request, Up, named::<ReadParams>(g), named::<ReadResult>(g)),
        m(methods::FILE_WRITE, Request, Up, named::<WriteParams>(g), named::<WriteResult>(g)),
        m(methods::FILE_EDIT, Request, Up, named::<EditParams>(g), named::<EditResult>(g)),
        m(methods::FILE_STAT, Request, Up, named::<FileStatParams>(g), named::<FileStatResult>(g)),
        m(methods::FILE_DID_CHANGE, Notification, Down, named::<FileDidChange>(g), None),
        m(methods::FS_RESOLVE, Request, Up, named::<PathParams>(g), named::<ResolveResult>(g)),
        m(methods::FS_STAT, Request, Up, named::<PathParams>(g), named::<FsStatResult>(g)),
        m(methods::FS_READ_TEXT, Request, Up, named::<ReadParams>(g), named::<ReadResult>(g)),
        m(methods::FS_WRITE_TEXT, Request, Up, named::<FsWriteParams>(g), named::<WriteResult>(g)),
        m(methods::FS_EDIT_TEXT, Request, Up, named::<FsEditParams>(g), named::<EditResult>(g)),
        m(methods::FS_STREAM_TEXT, Request, Up, named::<StreamTextParams>(g), named::<SubscriptionId>(g)),
        m(methods::FS_TEXT_CHUNK, Notification, Down, named::<TextChunkNotification>(g), None),
        m(
            methods::FS_STREAM_CANCEL,
            Request,
            Up,
            named::<StreamCancelParams>(g),
            named::<StreamCancelResult>(g),
        ),
        m(methods::CANCEL_REQUEST, Notification, Direction::Both, named::<CancelParams>(g), None),
        m(methods::SESSION_CONTEXT_RESET, Request, Up, named::<ContextResetParams>(g), None),
        m(
            methods::GATE_REGISTER,
            Request,
            Up,
            named::<GateRegisterParams>(g),
            named::<GateRegisterResult>(g),
        ),
        m(methods::GATE_UNREGISTER, Request, Up, named::<GateUnregisterParams>(g), None),
        m(
            methods::GATE_WRITE_INTENT,
            Request,
            Down,
            named::<WriteIntentParams>(g),
            named::<WriteIntentResult>(g),
        ),
        m(methods::JOURNAL_LIST, Request, Up, named::<JournalListParams>(g), named::<JournalListResult>(g)),
        m(methods::JOURNAL_DIFF, Request, Up, named::<JournalDiffParams>(g), named::<JournalDiffResult>(g)),
        m(
            methods::JOURNAL_RESTORE,
            Request,
            Up,
            named::<JournalRestoreParams>(g),
            named::<JournalRestoreResult>(g),
        ),
        m(
            methods::LSP_DIAGNOSTICS,
            Request,
            Up,
            named::<LspDiagnosticsParams>(g),
            named::<LspDiagnosticsResult>(g),
        ),
    ]
}

/// The whole document, as checked in.
fn schema_document() -> Value {
    let mut generator = SchemaSettings::draft07().into_generator();
    let table = method_table(&mut generator);
    // Error data is no method's params or result, but every client decodes it; likewise a
    // gate's refusal (`data.gate`) and the daemon's withdrawal of an intent (`$/cancelRequest`
    // to a gate, with its reason).
    named::<FsErrorData>(&mut generator);
    named::<GateRefusalData>(&mut generator);
    named::<GateCancelParams>(&mut generator);
    named::<FsErrorCode>(&mut generator);
    let mut methods = Map::new();
    for method in table {
        let entry = json!({
            "kind": match method.kind { Kind::Request => "request", Kind::Notification => "notification" },
            "direction": match method.direction {
                Direction::ClientToServer => "clientToServer",
                Direction::ServerToClient => "serverToClient",
                Direction::Both => "both",
            },
            "params": method.params,
            "result": method.result,
        });
        assert!(methods.insert(method.name.to_owned(), entry).is_none(), "{} twice", method.name);
    }
    let definitions = generator.take_definitions(true);
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "filectx wire types",
        "description": "Generated from the Rust protocol crate by protocol/tests/schema.rs; do not edit. Regenerate: UPDATE_EXPECT=1 cargo test -p filectx-protocol --features schema --test schema",
        "protocolVersion": filectx_protocol::PROTOCOL_VERSION,
        "methods": methods,
        "definitions": definitions,
    })
}

/// The values of the `pub const NAME: &str = "…";` lines of `methods.rs`, read from its source,
/// so a constant added without an entry in `methods::ALL` is caught too.
fn constants_in_methods_rs() -> BTreeSet<String> {
    include_str!("../src/methods.rs")
        .lines()
        .filter_map(|line| line.strip_prefix("pub const ")?.split_once(": &str = \"")?.1.strip_suffix("\";"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_method_constant_is_in_the_table() {
    let all: BTreeSet<String> = methods::ALL.iter().map(|&s| s.to_owned()).collect();
    assert_eq!(all.len(), methods::ALL.len(), "methods::ALL names a method twice");
    assert_eq!(constants_in_methods_rs(), all, "methods::ALL must list every constant of methods.rs");
    let document = schema_document();
    let table: BTreeSet<String> = document["methods"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(table, all, "the schema's method table must have exactly the methods of methods.rs");
    // Every type a method names is defined.
    for (name, entry) in document["methods"].as_object().unwrap() {
        for side in ["params", "result"] {
            if let Some(ty) = entry[side].as_str() {
                assert!(document["definitions"].get(ty).is_some(), "{name} {side} {ty} is not defined");
            }
        }
    }
}

#[test]
fn checked_in_schema_is_current() {
    let document = schema_document();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_FILE);
    let text = serde_json::to_string_pretty(&document).unwrap() + "\n";
    if std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1") {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    let current: Option<Value> = serde_json::from_str(&checked_in).ok();
    assert!(
        current.as_ref() == Some(&document),
        "{} is out of date with the Rust wire types; regenerate it with \
         `UPDATE_EXPECT=1 cargo test -p filectx-protocol --features schema --test schema` (and then \
         `npm run generate` in client/typescript), and commit both",
        path.display()
    );
}

/// Spot checks that serde's attributes reached the schema: renames, tags, skipped fields.
#[test]
fn schema_follows_serde_attributes() {
    let document = schema_document();
    let defs = &document["definitions"];
    // `rename_all = "camelCase"` and `deny_unknown_fields`.
    assert!(defs["InitializeParams"]["properties"].get("readOnly").is_some());
    assert_eq!(defs["InitializeParams"]["additionalProperties"], json!(false));
    assert_eq!(defs["InitializeParams"]["required"], json!(["roots"]));
    // `FsInfo.kind` is `type` on the wire.
    assert!(defs["FsInfo"]["properties"].get("type").is_some());
    assert!(defs["FsInfo"]["properties"].get("kind").is_none());
    // The error identifiers are the wire strings.
    let codes = serde_json::to_string(&defs["FsErrorCode"]).unwrap();
    for code in FsErrorCode::ALL {
        assert!(codes.contains(&format!("\"{}\"", code.as_str())), "{code} missing from {codes}");
    }
    // The internally tagged expectation.
    let expectation = serde_json::to_string(&defs["WriteExpectation"]).unwrap();
    for kind in ["createIfAbsent", "replaceIfVersion", "any"] {
        assert!(expectation.contains(&format!("\"{kind}\"")), "{kind} missing from {expectation}");
    }
}

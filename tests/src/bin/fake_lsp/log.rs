//! The `--log` file: one JSON line per message received and per event, each appended with one
//! write so that a restarted server's lines never mix with its predecessor's.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

static LOG: OnceLock<Mutex<File>> = OnceLock::new();

/// Opens `path` for appending; until then (and without `--log`) nothing is logged.
pub fn open(path: &Path) -> std::io::Result<()> {
    let file = File::options().create(true).append(true).open(path)?;
    let _ = LOG.set(Mutex::new(file));
    Ok(())
}

/// Appends `line` (a received message or an event) as one line.
pub fn event(line: Value) {
    write(&line);
}

/// Appends a received message as one line.
pub fn message(message: &Value) {
    write(message);
}

fn write(value: &Value) {
    let Some(log) = LOG.get() else { return };
    let mut line = value.to_string();
    line.push('\n');
    let mut file = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Err(e) = file.write_all(line.as_bytes()) {
        eprintln!("fake-lsp: cannot write the log: {e}");
    }
}

/// Reports a client's breach of the protocol on stderr and in the log.
pub fn violation(detail: String) {
    eprintln!("fake-lsp: protocol violation: {detail}");
    event(serde_json::json!({"event": "violation", "detail": detail}));
}

//! What each file and daemon command asks the daemon, and the text it prints: status, tools,
//! read, cat, write, edit, stat (`watch` is in `watch.rs`, the journal's commands in
//! `journal.rs`). Names are always shown escaped
//! (`filectx_client::terminal`); file content (`read`, `cat`, the search tools' text) is escaped
//! only when stdout is a terminal, so that a program or a file it is piped to gets the bytes as
//! they are, as from `cat(1)`; JSON is JSON, with nothing raw in it that a terminal acts on.

use std::borrow::Cow;
use std::io::{IsTerminal as _, Write as _};

use filectx_client::Client;
use filectx_client::terminal::{escape_field, escape_json, escape_line};
use filectx_protocol::{
    DaemonStatusParams, EditParams, FsErrorCode, PathParams, ReadParams, StreamTextParams, ToolName,
    WriteOperation, WriteParams, methods,
};
use futures::StreamExt as _;
use serde_json::Value;

use super::journal::{self, History, Undo};
use super::observe::observe;
use super::render::{content, render_stat, render_status, render_tools};
use super::watch::watch;

/// What to ask the daemon, with everything local (paths, content) already checked and read.
#[derive(Debug)]
pub(crate) enum Job {
    Status,
    Tools,
    Read(ReadParams),
    Cat(StreamTextParams),
    Write(WriteParams),
    Edit(EditParams),
    Stat(String),
    Watch(Vec<String>),
    /// A model-facing tool call (glob, grep): its text, as the model sees it.
    Tool(ToolName, serde_json::Map<String, Value>),
    History(History),
    Diff(String),
    Undo {
        undo: Undo,
        force: bool,
    },
}

/// A model-facing tool call that answered `isError: true`.
#[derive(Debug, thiserror::Error)]
#[error("{}", match code {
    Some(code) if !text.trim().is_empty() => format!("{code}: {}", text.trim_end()),
    Some(code) => code.to_string(),
    None => text.trim_end().to_owned(),
})]
pub(crate) struct ToolFailed {
    /// The `FS_*` identifier from the result's `error`, when present.
    code: Option<FsErrorCode>,
    /// The text the tool returned.
    text: String,
}

/// Sends the job's requests and returns what to print on stdout.
pub(crate) async fn execute(job: Job, json: bool, client: &Client) -> anyhow::Result<String> {
    match (job, json) {
        // As the daemon's owner sees it: every session's gates, with the gate token.
        (Job::Status, true) => {
            let params =
                DaemonStatusParams { gate_token: filectx_client::gate::read_gate_token(client.socket()) };
            raw(client, methods::DAEMON_STATUS, params).await
        }
        (Job::Status, false) => Ok(render_status(&client.owner_status().await?, client.socket())),
        (Job::Tools, true) => raw(client, methods::TOOLS_LIST, ()).await,
        (Job::Tools, false) => Ok(render_tools(&client.tools_list().await?)),
        (Job::Read(params), true) => raw(client, methods::FILE_READ, &params).await,
        (Job::Read(params), false) => read_tool(client, params).await,
        // `check_usage` refuses --json with cat.
        (Job::Cat(params), _) => cat(client, params).await.map(|()| String::new()),
        (Job::Write(params), json) => write(client, params, json).await,
        (Job::Edit(params), json) => edit(client, params, json).await,
        (Job::Stat(path), true) => raw(client, methods::FILE_STAT, PathParams { path }).await,
        (Job::Stat(path), false) => Ok(render_stat(&client.file_stat(&path).await?)),
        (Job::Watch(paths), json) => watch(client, &paths, json).await.map(|()| String::new()),
        (Job::Tool(tool, arguments), true) => {
            let params = serde_json::json!({"name": tool.as_str(), "arguments": arguments});
            raw(client, methods::TOOLS_CALL, params).await
        }
        (Job::Tool(tool, arguments), false) => tool_text(client, tool, arguments).await,
        (Job::History(query), json) => journal::history(client, query, json).await,
        (Job::Diff(entry), json) => journal::diff(client, &entry, json).await,
        (Job::Undo { undo, force }, json) => journal::undo(client, undo, force, json).await,
    }
}

/// The daemon's result as pretty JSON (see [`escape_json`]).
async fn raw(client: &Client, method: &str, params: impl serde::Serialize) -> anyhow::Result<String> {
    let value: Value = client.request(method, params).await?;
    let mut text = escape_json(&serde_json::to_string_pretty(&value)?).into_owned();
    text.push('\n');
    Ok(text)
}

/// `read` through the model-facing tool: its text as is (a final newline added if it has none).
async fn read_tool(client: &Client, params: ReadParams) -> anyhow::Result<String> {
    let mut arguments = serde_json::Map::new();
    arguments.insert("file_path".to_owned(), Value::String(params.path));
    if let Some(offset) = params.offset {
        arguments.insert("offset".to_owned(), offset.into());
    }
    if let Some(limit) = params.limit {
        arguments.insert("limit".to_owned(), limit.into());
    }
    tool_text(client, ToolName::Read, arguments).await
}

/// A model-facing tool's text as is (a final newline added if it has none); a failure is
/// [`ToolFailed`].
async fn tool_text(
    client: &Client,
    tool: ToolName,
    arguments: serde_json::Map<String, Value>,
) -> anyhow::Result<String> {
    let result = client.call_tool(tool.as_str(), Value::Object(arguments)).await?;
    let text = result.text();
    if result.is_error {
        return Err(ToolFailed { code: result.error.map(|error| error.code), text }.into());
    }
    let mut text = content(&text).into_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// `fs/streamText`: writes each chunk's lines (whole: the daemon never cuts them) to stdout as
/// it arrives, one line and a newline each, and flushes; a closed stdout cancels the stream and
/// ends the command successfully.
async fn cat(client: &Client, params: StreamTextParams) -> anyhow::Result<()> {
    let mut stream = client.stream_text(params).await?;
    let mut text = String::new();
    loop {
        let chunk = match stream.next().await {
            Some(Ok(chunk)) => chunk,
            Some(Err(error)) => break Err(error.into()),
            None => break Ok(()),
        };
        text.clear();
        let terminal = std::io::stdout().is_terminal();
        for line in &chunk.lines {
            text.push_str(&if terminal { escape_line(line) } else { Cow::Borrowed(line.as_str()) });
            text.push('\n');
        }
        // A blocking write, on purpose: while stdout is full, this single-threaded runtime does
        // not read the socket either, so a slow reader holds the daemon back (which buffers only
        // a few chunks) instead of filling the client's buffer until the stream fails as lagged.
        let written = {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush())
        };
        match written {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                stream.cancel().await;
                break Ok(());
            }
            Err(error) => break Err(anyhow::Error::new(error).context("cannot write to stdout")),
        }
    }
}

/// `file/stat`; `file/read` (one line) when the file exists; then `file/write`.
async fn write(client: &Client, params: WriteParams, json: bool) -> anyhow::Result<String> {
    if client.file_stat(&params.path).await?.exists {
        observe(client, &params.path).await?;
    }
    if json {
        return raw(client, methods::FILE_WRITE, &params).await;
    }
    let result = client.file_write(params).await?;
    let done = match result.operation {
        WriteOperation::Create => "created",
        WriteOperation::Update => "updated",
    };
    Ok(format!("{done} {}\n", escape_field(&result.display_path)))
}

/// `file/read` (one line), then `file/edit`.
async fn edit(client: &Client, params: EditParams, json: bool) -> anyhow::Result<String> {
    observe(client, &params.path).await?;
    if json {
        return raw(client, methods::FILE_EDIT, &params).await;
    }
    let result = client.file_edit(params).await?;
    let plural = if result.replacements == 1 { "" } else { "s" };
    Ok(format!(
        "edited {}: {} replacement{plural}\n",
        escape_field(&result.display_path),
        result.replacements
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_tool_shows_its_code_then_its_text() {
        let failed = ToolFailed { code: Some(FsErrorCode::NotObserved), text: "Read it first.\n".to_owned() };
        assert_eq!(failed.to_string(), "FS_NOT_OBSERVED: Read it first.");
        let failed = ToolFailed { code: None, text: "Invalid arguments.".to_owned() };
        assert_eq!(failed.to_string(), "Invalid arguments.");
    }
}

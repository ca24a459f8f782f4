//! Opening the daemon session when the MCP client's `initialize` arrives (so the session can be
//! shaped by who the client is): the read and search budget sized to what the client keeps of a
//! tool result (`--max-output`, or a known client's own cut), the client's name as the agent's,
//! and the options a daemon of an older build refuses, dropped with a note.

use filectx_protocol::tools::MIN_READ_MAX_BYTES;
use filectx_protocol::{ClientInfo, InitializeParams, InitializeResult, ToolName, features};
use serde_json::Value;

use crate::{Client, ClientError};

/// Smallest `--max-output` ([`super::McpOptions::max_output`]) accepted: what a client keeps
/// must leave room for a few lines and the footer once the client's own additions are taken off.
pub const MIN_MAX_OUTPUT: u64 = 2000;

/// The agent's name at the daemon when neither the caller nor the MCP client gave one.
const DEFAULT_AGENT_NAME: &str = "filectx mcp";

/// An MCP client known to cut long tool results before its model sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cutter {
    /// Who it is, for the diagnostics.
    pub(super) label: &'static str,
    /// Its `clientInfo.name` starts with this (ASCII case ignored).
    prefix: &'static str,
    /// Characters of one tool result it keeps when nothing else is configured.
    pub(super) keeps: u64,
    /// Whether what it keeps is the result's JSON (every newline, tab, quote and backslash then
    /// counts twice) rather than the text itself.
    json: bool,
}

/// The clients known to cut, with what they keep by default.
const CUTTERS: [Cutter; 2] = [
    // Codex CLI hands its model `JSON.stringify(content)` when a result has no
    // `structuredContent`, and keeps 10,000 bytes of it for a model without metadata of its own
    // (4 × `tool_output_token_limit` when that is set), cutting the middle out.
    Cutter { label: "Codex", prefix: "codex", keeps: 10_000, json: true },
    // Gemini CLI wraps each text in <untrusted_context> tags and cuts a result longer than
    // 40,000 characters (`tools.truncateToolOutputThreshold`).
    Cutter { label: "Gemini CLI", prefix: "gemini-cli", keeps: 40_000, json: false },
];

/// The known cutter named `name` (a `clientInfo.name`), if any.
pub(super) fn cutter(name: &str) -> Option<Cutter> {
    CUTTERS.into_iter().find(|cutter| {
        name.get(..cutter.prefix.len()).is_some_and(|start| start.eq_ignore_ascii_case(cutter.prefix))
    })
}

/// The session's `readMaxBytes` (bytes of one read, glob or grep answer, footer included) for a
/// client that keeps `keeps` characters of a result: what is left once the client's own
/// additions are taken off (5 %: the JSON around the text, or tags and notes of its own). A
/// byte budget never holds more characters (nor UTF-16 units) than bytes, and a budget the
/// daemon counts as JSON escapes the text (`jsonBudget`, asked for a client that keeps the
/// result's JSON, and for `--max-output`) never holds more characters of that JSON.
pub(super) fn read_budget(keeps: u64) -> u64 {
    (keeps.saturating_mul(95) / 100).max(MIN_READ_MAX_BYTES)
}

/// How the server opens its daemon session: the parameters the caller chose, whether its tool
/// list is the user's own (never trimmed for an older daemon), and what the client keeps of a
/// result when the user said so.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) params: InitializeParams,
    pub(super) fixed_tools: bool,
    pub(super) max_output: Option<u64>,
}

/// The parameters of the session for the MCP client of `client_info` (its `initialize`'s
/// `clientInfo`): the agent's name and version are the client's unless the caller set them, and
/// the budget is sized for what the client keeps (the caller's `readMaxBytes` wins).
fn params_for(plan: &Plan, client_info: Option<&Value>) -> InitializeParams {
    let mut params = plan.params.clone();
    let name =
        client_info.and_then(|info| info.get("name")).and_then(Value::as_str).filter(|n| !n.is_empty());
    if params.client_info.is_none() {
        let version = client_info.and_then(|info| info.get("version")).and_then(Value::as_str);
        params.client_info = Some(match name {
            Some(name) => ClientInfo { name: name.to_owned(), version: version.map(str::to_owned) },
            None => ClientInfo {
                name: DEFAULT_AGENT_NAME.to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            },
        });
    }
    if params.read_max_bytes.is_none() {
        let known = name.and_then(cutter);
        let keeps = plan.max_output.or(known.map(|cutter| cutter.keeps));
        params.read_max_bytes = keeps.map(read_budget);
        // `--max-output` counts characters of the result's JSON, as a JSON-keeping client does.
        let json = plan.max_output.is_some() || known.is_some_and(|cutter| cutter.json);
        if json && params.json_budget.is_none() {
            params.json_budget = Some(true);
        }
    }
    params
}

/// Opens the session for the MCP client of `client_info`. A daemon of an older build (kept
/// alive by socket activation) is told nothing it does not know: without `dedupReads`, without
/// `readMaxBytes`, without `staleEdits`, and without the search tools (it refuses `glob` and `grep` in `tools`, -32602
/// unknown variant) unless the tool list is fixed; `diagnose` says which.
///
/// # Errors
/// What [`Client::initialize`] fails with once nothing more can be dropped.
pub(super) async fn open(
    client: &Client,
    plan: &Plan,
    client_info: Option<&Value>,
    diagnose: &(dyn Fn(&str) + Send + Sync),
) -> Result<InitializeResult, ClientError> {
    let mut params = params_for(plan, client_info);
    let search = [ToolName::Glob, ToolName::Grep];
    // Each retry drops one thing the daemon refused, so eight attempts cover all seven.
    for _ in 0..7 {
        let offers_search = params.tools.as_ref().is_some_and(|t| t.iter().any(|t| search.contains(t)));
        match client.initialize(params.clone()).await {
            Ok(session) => {
                let dedup = params.dedup_reads == Some(true);
                if dedup
                    && client.features().is_some_and(|all| !all.iter().any(|f| f == features::DEDUP_READS))
                {
                    diagnose("the daemon does not announce dedupReads; repeated reads may be sent in full");
                }
                return Ok(session);
            }
            Err(ClientError::Unsupported { feature })
                if feature == features::DEDUP_READS && params.dedup_reads.is_some() =>
            {
                diagnose(
                    "the daemon does not support dedupReads (an older filectxd?); serving without it, \
                     so repeated reads are sent in full (restart the daemon to get it)",
                );
                params.dedup_reads = None;
            }
            Err(ClientError::Unsupported { feature })
                if feature == features::READ_MAX_BYTES && params.read_max_bytes.is_some() =>
            {
                diagnose(
                    "the daemon does not support readMaxBytes (an older filectxd?); answers keep its \
                     budget, which the MCP client may cut (restart the daemon to size them)",
                );
                params.read_max_bytes = None;
            }
            Err(ClientError::Unsupported { feature })
                if feature == features::JSON_BUDGET && params.json_budget.is_some() =>
            {
                diagnose(
                    "the daemon does not support jsonBudget (an older filectxd?); answers are sized \
                     in bytes of text, and text full of control characters may pass the MCP client's \
                     cut (restart the daemon to count them)",
                );
                params.json_budget = None;
            }
            Err(ClientError::Unsupported { feature })
                if feature == features::STALE_EDITS && params.stale_edits.is_some() =>
            {
                diagnose(
                    "the daemon does not support staleEdits (an older filectxd?); serving without it, \
                     so stale edits are refused (restart the daemon to get it)",
                );
                params.stale_edits = None;
            }
            Err(ClientError::Unsupported { feature })
                if feature == features::DIAGNOSTICS && params.diagnostics.is_some() =>
            {
                params.diagnostics = None;
            }
            Err(ClientError::Rpc { code: filectx_protocol::error::INVALID_PARAMS, message, .. })
                if !plan.fixed_tools
                    && params.tools.as_ref().is_some_and(|t| t.contains(&ToolName::Diagnostics))
                    && message.contains("`diagnostics`") =>
            {
                // A daemon older than language servers: nothing to diagnose with.
                params.tools =
                    params.tools.map(|t| t.into_iter().filter(|t| *t != ToolName::Diagnostics).collect());
            }
            Err(ClientError::Rpc { code: filectx_protocol::error::INVALID_PARAMS, message, .. })
                if !plan.fixed_tools
                    && offers_search
                    && (message.contains("`glob`") || message.contains("`grep`")) =>
            {
                diagnose(
                    "the daemon does not offer glob and grep (an older filectxd?); serving the other \
                     tools (restart the daemon to get them)",
                );
                params.tools = params.tools.map(|t| t.into_iter().filter(|t| !search.contains(t)).collect());
            }
            Err(other) => return Err(other),
        }
    }
    client.initialize(params).await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plan(max_output: Option<u64>) -> Plan {
        Plan { params: InitializeParams::new(vec!["/p".to_owned()]), fixed_tools: false, max_output }
    }

    #[test]
    fn known_clients_are_recognised_by_name() {
        assert_eq!(cutter("codex-mcp-client").map(|c| c.label), Some("Codex"));
        assert_eq!(cutter("Codex").map(|c| c.label), Some("Codex"));
        assert_eq!(cutter("gemini-cli-mcp-client").map(|c| c.label), Some("Gemini CLI"));
        assert_eq!(cutter("claude-code"), None);
        assert_eq!(cutter("cod"), None);
        assert_eq!(cutter("é"), None);
    }

    #[test]
    fn the_budget_leaves_room_for_what_the_client_adds() {
        assert_eq!(read_budget(10_000), 9_500);
        assert_eq!(read_budget(40_000), 38_000);
        assert_eq!(read_budget(MIN_MAX_OUTPUT), 1_900);
        assert_eq!(read_budget(100), MIN_READ_MAX_BYTES);
        assert_eq!(read_budget(u64::MAX), u64::MAX / 100);
    }

    #[test]
    fn the_session_is_shaped_by_the_mcp_client() {
        let codex = json!({"name": "codex-mcp-client", "title": "Codex", "version": "0.169.0"});
        let params = params_for(&plan(None), Some(&codex));
        assert_eq!((params.read_max_bytes, params.json_budget), (Some(9_500), Some(true)));
        let agent = params.client_info.unwrap_or_else(|| ClientInfo { name: String::new(), version: None });
        assert_eq!((agent.name.as_str(), agent.version.as_deref()), ("codex-mcp-client", Some("0.169.0")));

        // --max-output is what the client keeps, in characters of the result's JSON.
        assert_eq!(params_for(&plan(Some(40_000)), Some(&codex)).read_max_bytes, Some(38_000));
        let claude = json!({"name": "claude-code", "version": "2.1.332"});
        let params = params_for(&plan(None), Some(&claude));
        assert_eq!((params.read_max_bytes, params.json_budget), (None, None));
        let params = params_for(&plan(Some(20_000)), Some(&claude));
        assert_eq!((params.read_max_bytes, params.json_budget), (Some(19_000), Some(true)));
        // Gemini CLI counts the text itself.
        let gemini = json!({"name": "gemini-cli-mcp-client", "version": "0.61.0"});
        let params = params_for(&plan(None), Some(&gemini));
        assert_eq!((params.read_max_bytes, params.json_budget), (Some(38_000), None));

        // No clientInfo: the default name; the caller's own choices win.
        let nameless = params_for(&plan(None), None);
        assert_eq!(nameless.client_info.map(|c| c.name).as_deref(), Some(DEFAULT_AGENT_NAME));
        let mut chosen = plan(None);
        chosen.params.client_info = Some(ClientInfo { name: "reviewer".to_owned(), version: None });
        chosen.params.read_max_bytes = Some(4096);
        let params = params_for(&chosen, Some(&codex));
        assert_eq!(params.client_info.map(|c| c.name).as_deref(), Some("reviewer"));
        assert_eq!(params.read_max_bytes, Some(4096));
    }
}

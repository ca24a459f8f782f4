//! Wire types of `tools/list`, `tools/call` (the MCP shapes) and `session/contextReset`, with
//! the owner a call is made for.

use serde::{Deserialize, Serialize};

use crate::tools::ToolDescriptor;

/// Result of `tools/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsListResult {
    /// The session's tools, in the order read, write, edit.
    pub tools: Vec<ToolDescriptor>,
}

/// `tools/call` parameters (the MCP `CallToolRequest` params).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallToolParams {
    /// The tool's name: `read`, `write` or `edit`.
    pub name: String,
    /// The tool's arguments (validated by the daemon against the tool's schema).
    #[serde(default)]
    pub arguments: serde_json::Value,
    /// Whose observations this call uses and records (a sub-agent's name, at most
    /// [`MAX_OWNER_BYTES`] bytes); absent: the session's default owner. Feature `owners`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Longest `owner` accepted, in bytes.
pub const MAX_OWNER_BYTES: usize = 128;

/// Parameters of `session/contextReset`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextResetParams {
    /// The owner whose context was reset; absent: every owner of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// One content block of a tool result. Only text blocks are produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ToolContent {
    /// Text for the model.
    Text {
        /// The text.
        text: String,
    },
}

/// The machine-readable error of a failed tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolError {
    /// Always `"FsError"`.
    pub name: String,
    /// The stable identifier.
    pub code: crate::FsErrorCode,
}

/// `tools/call` result (the MCP `CallToolResult` shape). Tool failures, invalid arguments
/// included, are results with `isError: true`, never JSON-RPC errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// What the model reads.
    pub content: Vec<ToolContent>,
    /// Whether the call failed.
    pub is_error: bool,
    /// Present exactly when `isError` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

impl CallToolResult {
    /// The concatenated text of all text blocks.
    pub fn text(&self) -> String {
        self.content.iter().map(|ToolContent::Text { text }| text.as_str()).collect()
    }
}

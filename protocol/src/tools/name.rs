//! The names of the model-facing tools: which tools there are, in listing order, and which of
//! them change files.

use serde::{Deserialize, Serialize};

/// One of the model-facing tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ToolName {
    /// Read a window of a text file, as numbered lines.
    Read,
    /// Create a file or replace its whole content.
    Write,
    /// Replace a literal string in a file.
    Edit,
    /// List files matching a glob pattern, newest first.
    Glob,
    /// Search file contents with a regular expression.
    Grep,
    /// Put a file back as it was before this agent's last change to it (the journal's).
    Undo,
    /// The errors of a file from its language server, as the file is now.
    Diagnostics,
}

impl ToolName {
    /// All tools, in listing order.
    pub const ALL: [ToolName; 7] =
        [Self::Read, Self::Write, Self::Edit, Self::Glob, Self::Grep, Self::Undo, Self::Diagnostics];

    /// The file tools a harness offers when it asks for no particular set (`filectx mcp`
    /// without `--undo`): all but the opt-in `undo`, which a session gets only by naming it.
    pub const FILE_TOOLS: [ToolName; 5] = [Self::Read, Self::Write, Self::Edit, Self::Glob, Self::Grep];

    /// The tools of a session that names none in `initialize` (the search tools must be asked
    /// for, so older agents see the tool list they were built for).
    pub const DEFAULT: [ToolName; 3] = [Self::Read, Self::Write, Self::Edit];

    /// The name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Edit => "edit",
            Self::Glob => "glob",
            Self::Grep => "grep",
            Self::Undo => "undo",
            Self::Diagnostics => "diagnostics",
        }
    }

    /// The tool with this wire name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether calling this tool changes files.
    pub const fn writes(self) -> bool {
        matches!(self, Self::Write | Self::Edit | Self::Undo)
    }
}

impl std::fmt::Display for ToolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

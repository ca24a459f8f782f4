//! Each model-facing tool's arguments as one Rust type: serde reads them from a `tools/call`
//! and schemars derives from the same definition the `inputSchema` that `tools/list` sends
//! (each field's doc comment is its description there).

use std::borrow::Cow;
use std::fmt;
use std::num::NonZeroU64;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use super::name::ToolName;

/// The arguments of one tool: what its calls are read into and its schema derived from.
pub trait ToolArguments<'de>: Deserialize<'de> + JsonSchema {
    /// The tool these are the arguments of.
    const TOOL: ToolName;
    /// The fields a wrong call is checked for first, in this order, before the others in
    /// declaration order (grep's `output_mode`: what it names decides how the others read).
    const CHECKED_FIRST: &'static [&'static str] = &[];
}

/// The arguments of `read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs<'a> {
    /// Path of the file, absolute or relative to the session's working folder.
    #[serde(borrow)]
    pub file_path: Cow<'a, str>,
    /// 1-based line number to start reading at. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<NonZeroU64>,
    /// Most lines to return. Default 2000; a larger limit is capped at 2000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<NonZeroU64>,
}

impl<'de> ToolArguments<'de> for ReadArgs<'de> {
    const TOOL: ToolName = ToolName::Read;
}

/// The arguments of `write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs<'a> {
    /// Path of the file, absolute or relative to the session's working folder.
    #[serde(borrow)]
    pub file_path: Cow<'a, str>,
    /// The file's complete new content.
    #[serde(borrow)]
    pub content: Cow<'a, str>,
}

impl<'de> ToolArguments<'de> for WriteArgs<'de> {
    const TOOL: ToolName = ToolName::Write;
}

/// The arguments of `edit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs<'a> {
    /// Path of the file, absolute or relative to the session's working folder.
    #[serde(borrow)]
    pub file_path: Cow<'a, str>,
    /// The exact text to replace.
    #[serde(borrow)]
    #[schemars(length(min = 1))]
    pub old_string: Cow<'a, str>,
    /// The text to put in its place; must differ from old_string.
    #[serde(borrow)]
    pub new_string: Cow<'a, str>,
    /// Replace every occurrence instead of exactly one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub replace_all: Option<bool>,
}

impl<'de> ToolArguments<'de> for EditArgs<'de> {
    const TOOL: ToolName = ToolName::Edit;
}

/// The arguments of `undo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoArgs<'a> {
    /// Path of the file, absolute or relative to the session's working folder.
    #[serde(borrow)]
    pub file_path: Cow<'a, str>,
}

impl<'de> ToolArguments<'de> for UndoArgs<'de> {
    const TOOL: ToolName = ToolName::Undo;
}

/// The arguments of `diagnostics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiagnosticsArgs<'a> {
    /// Path of the file, absolute or relative to the session's working folder.
    #[serde(borrow)]
    pub file_path: Cow<'a, str>,
}

impl<'de> ToolArguments<'de> for DiagnosticsArgs<'de> {
    const TOOL: ToolName = ToolName::Diagnostics;
}

/// The arguments of `glob`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs<'a> {
    /// The glob to match file paths against, relative to path: `**/*.rs`, `src/**/*.{ts,tsx}`.
    #[serde(borrow)]
    #[schemars(length(min = 1))]
    pub pattern: Cow<'a, str>,
    /// Folder to search in, absolute or relative to the session's working folder. Default: the
    /// working folder.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Cow<'a, str>>,
}

impl<'de> ToolArguments<'de> for GlobArgs<'de> {
    const TOOL: ToolName = ToolName::Glob;
}

/// The arguments of `grep`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs<'a> {
    /// The regular expression to search for (Rust regex syntax).
    #[serde(borrow, deserialize_with = "not_empty")]
    #[schemars(length(min = 1))]
    pub pattern: Cow<'a, str>,
    /// File or folder to search, absolute or relative to the session's working folder. Default:
    /// the working folder.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Cow<'a, str>>,
    /// Only search files matching this glob, as ripgrep's -g: `*.rs` matches at any depth,
    /// `src/**/*.ts` from path; a leading `!` excludes.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<Cow<'a, str>>,
    /// Only search files of this ripgrep type: rust, py, js, ts, go, java, c, cpp, md, ...
    #[serde(rename = "type", borrow, default, skip_serializing_if = "Option::is_none")]
    pub file_type: Option<Cow<'a, str>>,
    /// files_with_matches: matching file paths; content: matching lines; count: matches per
    /// file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "files_with_matches"))]
    pub output_mode: Option<GrepOutputMode>,
    /// Match regardless of case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub case_insensitive: Option<bool>,
    /// content mode: lines to show before and after each match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<u64>,
    /// Let the pattern span lines (`.` then matches newlines too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub multiline: Option<bool>,
    /// Show only the first N entries (lines, files or counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_limit: Option<NonZeroU64>,
    /// Skip the first N entries (to continue after a head_limit or a capped answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

impl<'de> ToolArguments<'de> for GrepArgs<'de> {
    const TOOL: ToolName = ToolName::Grep;
    const CHECKED_FIRST: &'static [&'static str] = &["output_mode"];
}

/// What a grep shows (`output_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrepOutputMode {
    /// The paths of matching files, newest first.
    FilesWithMatches,
    /// Matching lines (and context lines).
    Content,
    /// Matching lines per file.
    Count,
}

impl GrepOutputMode {
    /// Every mode, in the order the schema lists them.
    pub const ALL: [GrepOutputMode; 3] = [Self::FilesWithMatches, Self::Content, Self::Count];

    /// The name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::FilesWithMatches => "files_with_matches",
            Self::Content => "content",
            Self::Count => "count",
        }
    }
}

/// A plain string enumeration: the variants' docs are for Rust readers, not the schema (a derived
/// schema would list each variant as a `oneOf` branch with its description).
impl JsonSchema for GrepOutputMode {
    fn schema_name() -> Cow<'static, str> {
        "GrepOutputMode".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = Self::ALL.iter().map(|m| m.as_str()).collect();
        json_schema!({"type": "string", "enum": names})
    }
}

/// A string that must not be empty, borrowed from the input where it can be.
fn not_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Cow<'de, str>, D::Error> {
    struct NotEmpty;

    impl<'de> Visitor<'de> for NotEmpty {
        type Value = Cow<'de, str>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string that is not empty")
        }

        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            if v.is_empty() { Err(E::invalid_length(0, &self)) } else { Ok(Cow::Borrowed(v)) }
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            if v.is_empty() { Err(E::invalid_length(0, &self)) } else { Ok(Cow::Owned(v.to_owned())) }
        }

        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            if v.is_empty() { Err(E::invalid_length(0, &self)) } else { Ok(Cow::Owned(v)) }
        }
    }

    deserializer.deserialize_str(NotEmpty)
}

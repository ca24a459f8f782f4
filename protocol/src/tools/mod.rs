//! The model-facing tools: their names, arguments (one type each, giving both the parser and
//! the JSON input schema, snake_case fields) and descriptions, as `tools/list` returns them.

mod args;
mod check;
mod name;
mod schema;

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use args::{
    DiagnosticsArgs, EditArgs, GlobArgs, GrepArgs, GrepOutputMode, ReadArgs, ToolArguments, UndoArgs,
    WriteArgs,
};
pub use check::{ArgumentError, parse};
pub use name::ToolName;
pub use schema::input_schema;

/// Most lines a read returns, and its default window.
pub const READ_LINE_LIMIT: u32 = 2000;
/// Longest line (in characters) the `read` tool shows before cutting it.
pub const READ_LINE_MAX_CHARS: u32 = 2000;
/// Default budget of one `read` tool answer, in bytes (`readMaxBytes`): 50 KiB.
pub const DEFAULT_READ_MAX_BYTES: u64 = 50 * 1024;
/// Smallest `readMaxBytes` a session may ask for.
pub const MIN_READ_MAX_BYTES: u64 = 1024;

/// Most paths the `glob` tool lists.
pub const GLOB_MAX_PATHS: usize = 200;

/// One entry of `tools/list` (the MCP `Tool` shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolDescriptor {
    /// The tool's name.
    pub name: String,
    /// What the tool does and the rules for using it, written for a model.
    pub description: String,
    /// JSON Schema of the `arguments` object.
    pub input_schema: Value,
}

const READ_DESCRIPTION: &str = "Read a text file. Each line is shown as its 1-based line number, a \
tab, then the line itself: everything after that first tab is the file's text (copy \
`old_string` from there, never the number or the tab). A footer says which lines were shown and \
the `offset` to continue with. One read returns at most 2000 lines (larger `limit`s are capped) \
and at most the session's output budget (50 KiB by default), stopping at the last line that \
fits. Lines longer than 2000 characters are cut and end with `... (line truncated to 2000 \
chars)`. Reading any window of a file counts as reading it: you may then edit or overwrite it \
until someone else changes it.";

const WRITE_DESCRIPTION: &str = "Write a text file, replacing its whole content. Creating a new \
file needs no read (missing parent folders are created). Overwriting an existing file needs a \
read of it (any window) in this session, and nobody else may have changed it since your last \
read, write or edit of it: your own writes and edits keep it current, so no re-read is needed \
after them. If it changed, the error shows what changed. An existing file keeps its byte-order \
mark and CRLF line endings. Prefer `edit` for changing part of an existing file.";

const EDIT_DESCRIPTION: &str = "Replace an exact, literal string in a text file. Needs a read of \
the file (any window) in this session, and nobody else may have changed it since your last \
read, write or edit of it: your own writes and edits keep it current, so you can edit again \
without re-reading. If it changed, the error shows what changed; when it says the change counts \
as read, retry if your edit still fits. `old_string` must match exactly once (whitespace and \
indentation included) unless `replace_all` is true; add surrounding lines to make it unique. \
Copy it from read's output without the line prefix (number, tab). `new_string` must \
differ from `old_string`. The answer shows the edited lines, numbered as read numbers them.";

const GLOB_DESCRIPTION: &str = "Find files by name with a glob pattern, such as `**/*.rs` or \
`src/**/*.{ts,tsx}`. The pattern is matched against each file's path relative to `path` (the \
session's working folder by default); `*` stays within one folder, `**` crosses folders. Returns \
matching file paths, newest first (by modification time), one per line, written as `read` \
accepts them; at most 200 paths, then a footer saying how many more matched (narrow the pattern \
or path). Files ignored by .gitignore or .ignore, and hidden files and folders, are skipped; \
symbolic links are not followed. Listing files does not count as reading them.";

const GREP_DESCRIPTION: &str = "Search file contents with a regular expression (Rust regex \
syntax, like ripgrep). Searches the files under `path` (the session's working folder by \
default; a file path searches that file), skipping files ignored by .gitignore or .ignore, \
hidden files and folders, and binary files. Narrow the files with `glob` (e.g. `*.rs`, \
`src/**/*.ts`) or `type` (ripgrep's file types: rust, py, js, ...). `output_mode`: \
`files_with_matches` (default) lists matching files, newest first; `content` shows each \
file's path on a line of its own, then its matching lines as read shows lines: the line \
number, a tab, then the line (context lines alike; `--` between groups that do not adjoin); \
`count` shows `path:N` per file. `head_limit` keeps only the first N entries (lines, files or \
counts) and `offset` skips the first N. Lines longer than 2000 characters are cut and end with \
`... (line truncated to 2000 chars)`. The answer stays within the session's output budget (50 \
KiB by default); a footer says what was left out and how to narrow. A `content` search that \
shows lines of a file counts as a read of that file: you may then edit it without a read, \
until someone else changes it.";

const UNDO_DESCRIPTION: &str = "Undo your last change to a file: puts it back as it was before \
your most recent write, edit or undo of it in this session (undoing a creation removes the file; \
undoing an undo redoes). Refused, showing what changed, if anyone changed the file since. The \
file then counts as read.";

const DIAGNOSTICS_DESCRIPTION: &str = "The errors a language server reports in a file, as the file \
is now (waits a few seconds for a fresh result). write and edit already end with the errors they \
introduced; call this when their answer says diagnostics were still running, or to check a file \
you have not changed. Each error is `LINE:COL message`.";

/// Each tool's input schema, derived once (in [`ToolName::ALL`]'s order).
static INPUT_SCHEMAS: LazyLock<[Value; 7]> = LazyLock::new(|| {
    ToolName::ALL.map(|tool| match tool {
        ToolName::Read => input_schema::<ReadArgs<'_>>(),
        ToolName::Write => input_schema::<WriteArgs<'_>>(),
        ToolName::Edit => input_schema::<EditArgs<'_>>(),
        ToolName::Glob => input_schema::<GlobArgs<'_>>(),
        ToolName::Grep => input_schema::<GrepArgs<'_>>(),
        ToolName::Undo => input_schema::<UndoArgs<'_>>(),
        ToolName::Diagnostics => input_schema::<DiagnosticsArgs<'_>>(),
    })
});

/// The descriptor of one tool, as `tools/list` shows it.
pub fn descriptor(tool: ToolName) -> ToolDescriptor {
    let description = match tool {
        ToolName::Read => READ_DESCRIPTION,
        ToolName::Write => WRITE_DESCRIPTION,
        ToolName::Edit => EDIT_DESCRIPTION,
        ToolName::Glob => GLOB_DESCRIPTION,
        ToolName::Grep => GREP_DESCRIPTION,
        ToolName::Undo => UNDO_DESCRIPTION,
        ToolName::Diagnostics => DIAGNOSTICS_DESCRIPTION,
    };
    let input_schema = INPUT_SCHEMAS[tool as usize].clone();
    ToolDescriptor { name: tool.as_str().to_owned(), description: description.to_owned(), input_schema }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each rule a model must know, and the descriptions that must state it.
    #[test]
    fn descriptions_state_each_rule() {
        let read = descriptor(ToolName::Read).description;
        let write = descriptor(ToolName::Write).description;
        let edit = descriptor(ToolName::Edit).description;
        let rules: [(&str, &[&str], &str); 9] = [
            (
                "the read prefix, exactly",
                &[
                    "shown as its 1-based line number, a tab, then the line",
                    "everything after that first tab",
                ],
                &read,
            ),
            ("the prefix is not part of old_string", &["without the line prefix (number, tab)"], &edit),
            ("any window counts", &["any window"], &read),
            ("any window counts", &["any window"], &edit),
            ("own changes keep the file observed", &["your own writes and edits keep it current"], &edit),
            ("own changes keep the file observed", &["your own writes and edits keep it current"], &write),
            ("creating needs no read", &["Creating a new file needs no read"], &write),
            (
                "the caps and the cut",
                &[
                    "at most 2000 lines",
                    "larger `limit`s are capped",
                    "... (line truncated to 2000 chars)",
                    "50 KiB",
                ],
                &read,
            ),
            ("a stale refusal shows the change", &["the error shows what changed"], &edit),
        ];
        for (rule, phrases, text) in rules {
            for phrase in phrases {
                assert!(text.contains(phrase), "{rule}: {phrase:?} missing from {text:?}");
            }
        }
        assert!(write.contains("byte-order mark and CRLF"), "writes keep conventions: {write}");
        for text in [&read, &write, &edit] {
            assert!(
                !text.contains("unchanged since"),
                "the old wording made models re-read after their own edits: {text}"
            );
        }
    }

    /// What a model must know about the search tools.
    #[test]
    fn search_descriptions_state_their_bounds_and_the_read_rule() {
        let glob = descriptor(ToolName::Glob).description;
        let grep = descriptor(ToolName::Grep).description;
        for phrase in ["newest first", "at most 200 paths", ".gitignore", "does not count as reading"] {
            assert!(glob.contains(phrase), "{phrase:?} missing from {glob:?}");
        }
        for phrase in [
            "files_with_matches",
            "path on a line of its own",
            "the line number, a tab, then the line",
            "`--`",
            "path:N",
            "head_limit",
            "... (line truncated to 2000 chars)",
            "50 KiB",
            "binary files",
            "counts as a read of that file",
        ] {
            assert!(grep.contains(phrase), "{phrase:?} missing from {grep:?}");
        }
        assert!(!ToolName::Glob.writes() && !ToolName::Grep.writes());
        assert_eq!(ToolName::DEFAULT, [ToolName::Read, ToolName::Write, ToolName::Edit]);
    }

    #[test]
    fn schemas_name_snake_case_fields_and_required_ones() {
        let required = |t| {
            let d = descriptor(t);
            d.input_schema["required"].as_array().cloned().unwrap_or_default()
        };
        assert_eq!(required(ToolName::Read), vec![json!("file_path")]);
        assert_eq!(required(ToolName::Write), vec![json!("file_path"), json!("content")]);
        assert_eq!(
            required(ToolName::Edit),
            vec![json!("file_path"), json!("old_string"), json!("new_string")]
        );
        for t in ToolName::ALL {
            let d = descriptor(t);
            assert_eq!(d.name, t.as_str());
            assert_eq!(ToolName::from_name(&d.name), Some(t));
            assert!(d.description.contains("read"), "{t} description states the read rule");
        }
    }

    /// Every tool's descriptor as `tools/list` sends it (pretty-printed here, so that no line of
    /// this file is a whole descriptor), captured from the hand-written `json!` schemas the
    /// derived ones replaced; `to_string` of an equal value is the same bytes on the wire.
    #[test]
    fn descriptors_are_sent_byte_for_byte() {
        let text: String = ToolName::ALL
            .into_iter()
            .map(|t| serde_json::to_string_pretty(&descriptor(t)).unwrap_or_default() + "\n")
            .collect();
        expect_test::expect![[r#"
            {
              "name": "read",
              "description": "Read a text file. Each line is shown as its 1-based line number, a tab, then the line itself: everything after that first tab is the file's text (copy `old_string` from there, never the number or the tab). A footer says which lines were shown and the `offset` to continue with. One read returns at most 2000 lines (larger `limit`s are capped) and at most the session's output budget (50 KiB by default), stopping at the last line that fits. Lines longer than 2000 characters are cut and end with `... (line truncated to 2000 chars)`. Reading any window of a file counts as reading it: you may then edit or overwrite it until someone else changes it.",
              "inputSchema": {
                "additionalProperties": false,
                "properties": {
                  "file_path": {
                    "description": "Path of the file, absolute or relative to the session's working folder.",
                    "type": "string"
                  },
                  "limit": {
                    "description": "Most lines to return. Default 2000; a larger limit is capped at 2000.",
                    "minimum": 1,
                    "type": "integer"
                  },
                  "offset": {
                    "description": "1-based line number to start reading at. Default 1.",
                    "minimum": 1,
                    "type": "integer"
                  }
                },
                "required": [
                  "file_path"
                ],
                "type": "object"
              }
            }
            {
              "name": "write",
              "description": "Write a text file, replacing its whole content. Creating a new file needs no read (missing parent folders are created). Overwriting an existing file needs a read of it (any window) in this session, and nobody else may have changed it since your last read, write or edit of it: your own writes and edits keep it current, so no re-read is needed after them. If it changed, the error shows what changed. An existing file keeps its byte-order mark and CRLF line endings. Prefer `edit` for changing part of an existing file.",
              "inputSchema": {
                "additionalProperties": false,
                "properties": {
                  "content": {
                    "description": "The file's complete new content.",
                    "type": "string"
                  },
                  "file_path": {
                    "description": "Path of the file, absolute or relative to the session's working folder.",
                    "type": "string"
                  }
                },
                "required": [
                  "file_path",
                  "content"
                ],
                "type": "object"
              }
            }
            {
              "name": "edit",
              "description": "Replace an exact, literal string in a text file. Needs a read of the file (any window) in this session, and nobody else may have changed it since your last read, write or edit of it: your own writes and edits keep it current, so you can edit again without re-reading. If it changed, the error shows what changed; when it says the change counts as read, retry if your edit still fits. `old_string` must match exactly once (whitespace and indentation included) unless `replace_all` is true; add surrounding lines to make it unique. Copy it from read's output without the line prefix (number, tab). `new_string` must differ from `old_string`. The answer shows the edited lines, numbered as read numbers them.",
              "inputSchema": {
                "additionalProperties": false,
                "properties": {
                  "file_path": {
                    "description": "Path of the file, absolute or relative to the session's working folder.",
                    "type": "string"
                  },
                  "new_string": {
                    "description": "The text to put in its place; must differ from old_string.",
                    "type": "string"
                  },
                  "old_string": {
                    "description": "The exact text to replace.",
                    "minLength": 1,
                    "type": "string"
                  },
                  "replace_all": {
                    "default": false,
                    "description": "Replace every occurrence instead of exactly one.",
                    "type": "boolean"
                  }
                },
                "required": [
                  "file_path",
                  "old_string",
                  "new_string"
                ],
                "type": "object"
              }
            }
            {
              "name": "glob",
              "description": "Find files by name with a glob pattern, such as `**/*.rs` or `src/**/*.{ts,tsx}`. The pattern is matched against each file's path relative to `path` (the session's working folder by default); `*` stays within one folder, `**` crosses folders. Returns matching file paths, newest first (by modification time), one per line, written as `read` accepts them; at most 200 paths, then a footer saying how many more matched (narrow the pattern or path). Files ignored by .gitignore or .ignore, and hidden files and folders, are skipped; symbolic links are not followed. Listing files does not count as reading them.",
              "inputSchema": {
                "additionalProperties": false,
                "properties": {
                  "path": {
                    "description": "Folder to search in, absolute or relative to the session's working folder. Default: the working folder.",
                    "type": "string"
                  },
                  "pattern": {
                    "description": "The glob to match file paths against, relative to path: `**/*.rs`, `src/**/*.{ts,tsx}`.",
                    "minLength": 1,
                    "type": "string"
                  }
                },
                "required": [
                  "pattern"
                ],
                "type": "object"
              }
            }
            {
              "name": "grep",
              "description": "Search file contents with a regular expression (Rust regex syntax, like ripgrep). Searches the files under `path` (the session's working folder by default; a file path searches that file), skipping files ignored by .gitignore or .ignore, hidden files and folders, and binary files. Narrow the files with `glob` (e.g. `*.rs`, `src/**/*.ts`) or `type` (ripgrep's file types: rust, py, js, ...). `output_mode`: `files_with_matches` (default) lists matching files, newest first; `content` shows each file's path on a line of its own, then its matching lines as read shows lines: the line number, a tab, then the line (context lines alike; `--` between groups that do not adjoin); `count` shows `path:N` per file. `head_limit` keeps only the first N entries (lines, files or counts) and `offset` skips the first N. Lines longer than 2000 characters are cut and end with `... (line truncated to 2000 chars)`. The answer stays within the session's output budget (50 KiB by default); a footer says what was left out and how to narrow. A `content` search that shows lines of a file counts as a read of that file: you may then edit it without a read, until someone else changes it.",
              "inputSchema": {
                "additionalProperties": false,
                "properties": {
                  "case_insensitive": {
                    "default": false,
                    "description": "Match regardless of case.",
                    "type": "boolean"
                  },
                  "context": {
                    "description": "content mode: lines to show before and after each match.",
                    "minimum": 0,
                    "type": "integer"
                  },
                  "glob": {
                    "description": "Only search files matching this glob, as ripgrep's -g: `*.rs` matches at any depth, `src/**/*.ts` from path; a leading `!` excludes.",
                    "type": "string"
                  },
                  "head_limit": {
                    "description": "Show only the first N entries (lines, files or counts).",
                    "minimum": 1,
                    "type": "integer"
                  },
                  "multiline": {
                    "default": false,
                    "description": "Let the pattern span lines (`.` then matches newlines too).",
                    "type": "boolean"
                  },
                  "offset": {
                    "description": "Skip the first N entries (to continue after a head_limit or a capped answer).",
                    "minimum": 0,
                    "type": "integer"
                  },
                  "output_mode": {
                    "default": "files_with_matches",
                    "description": "files_with_matches: matching file paths; content: matching lines; count: matches per file.",
                    "enum": [
                      "files_with_matches",
                      "content",
                      "count"
                    ],
                    "type": "string"
                  },
                  "path": {
                    "description": "File or folder to search, absolute or relative to the session's working folder. Default: the working folder.",
                    "type": "string"
                  },
                  "pattern": {
                    "description": "The regular expression to search for (Rust regex syntax).",
                    "minLength": 1,
                    "type": "string"
                  },
                  "type": {
                    "description": "Only search files of this ripgrep type: rust, py, js, ts, go, java, c, cpp, md, ...",
                    "type": "string"
                  }
                },
                "required": [
                  "pattern"
                ],
                "type": "object"
              }
            }
            {
              "name": "undo",
              "description": "Undo your last change to a file: puts it back as it was before your most recent write, edit or undo of it in this session (undoing a creation removes the file; undoing an undo redoes). Refused, showing what changed, if anyone changed the file since. The file then counts as read.",
              "inputSchema": {
                "additionalProperties": false,
                "properties": {
                  "file_path": {
                    "description": "Path of the file, absolute or relative to the session's working folder.",
                    "type": "string"
                  }
                },
                "required": [
                  "file_path"
                ],
                "type": "object"
              }
            }
            {
              "name": "diagnostics",
              "description": "The errors a language server reports in a file, as the file is now (waits a few seconds for a fresh result). write and edit already end with the errors they introduced; call this when their answer says diagnostics were still running, or to check a file you have not changed. Each error is `LINE:COL message`.",
              "inputSchema": {
                "additionalProperties": false,
                "properties": {
                  "file_path": {
                    "description": "Path of the file, absolute or relative to the session's working folder.",
                    "type": "string"
                  }
                },
                "required": [
                  "file_path"
                ],
                "type": "object"
              }
            }
        "#]].assert_eq(&text);
    }
}

//! The model-facing tools layer: which tools a session sees, their descriptors, the
//! `instructions` prose for the agent's system prompt, argument validation, and the projections
//! a model reads. It works through a file-context handle only, never the layer beneath it.

mod call;
pub mod dedup;
pub mod render;
pub mod search;

pub use call::{Cause, Failure, Outcome, Text, UnknownTool, call, tool};

use filectx_protocol::tools::descriptor;
use filectx_protocol::{ToolDescriptor, ToolName};

use crate::session::SessionOptions;

/// The descriptors `tools/list` returns for this session, in listing order.
pub fn list(options: &SessionOptions) -> Vec<ToolDescriptor> {
    options.tools.iter().map(|&tool| descriptor(tool)).collect()
}

/// Short prose for the agent's system prompt: how to use this session's tools well.
pub fn instructions(options: &SessionOptions) -> String {
    let has = |t: ToolName| options.tools.contains(&t);
    let names: Vec<&str> = options.tools.iter().map(|t| t.as_str()).collect();
    let mut text = if names.is_empty() {
        String::from("This session has no file tools.")
    } else {
        format!("File tools: {}. ", names.join(", "))
    };
    if !names.is_empty() {
        text.push_str(&format!(
            "Paths are absolute or relative to {}; only files under {} can be reached.",
            options.cwd.display(),
            options.roots.iter().map(|r| r.path().display().to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    if has(ToolName::Read) {
        text.push_str(
            " Read shows numbered lines and a footer; use offset and limit to page through long files.",
        );
    }
    match (has(ToolName::Glob), has(ToolName::Grep)) {
        (true, true) => text.push_str(
            " Find files by name with glob and search their contents with grep; both skip files \
             ignored by .gitignore or .ignore and hidden ones, and show paths as read accepts them.",
        ),
        (true, false) => text.push_str(
            " Find files by name with glob; it skips files ignored by .gitignore or .ignore and \
             hidden ones, and shows paths as read accepts them.",
        ),
        (false, true) => text.push_str(
            " Search file contents with grep; it skips files ignored by .gitignore or .ignore, hidden \
             ones and binary ones, and shows paths as read accepts them.",
        ),
        (false, false) => {}
    }
    if has(ToolName::Grep) && !options.read_only && (has(ToolName::Write) || has(ToolName::Edit)) {
        text.push_str(
            " Lines a grep shows with output_mode content count as a read of their file at that \
             version: you may edit it without reading it first.",
        );
    }
    if options.read_only {
        text.push_str(" This session is read-only: writes and edits are refused.");
    } else if has(ToolName::Write) || has(ToolName::Edit) {
        if has(ToolName::Read) {
            text.push_str(
                " Before editing a file or overwriting it, read it (any window counts) in this session; \
                 creating a new file needs no read. Your own writes and edits keep the file current: \
                 edit it again without re-reading.",
            );
        } else if has(ToolName::Grep) {
            text.push_str(
                " This session has no read tool: you can create new files, but editing or overwriting \
                 an existing file needs a read of it in this session, and only a grep with \
                 output_mode content that shows its lines counts as one here.",
            );
        } else {
            text.push_str(
                " This session has no read tool: you can create new files, but editing or overwriting \
                 an existing file needs a read of it in this session, which only the program running \
                 you can do; if a change is refused as not read, say so instead of retrying.",
            );
        }
        text.push_str(
            " If a change is refused because someone else changed the file, the error shows what \
             changed when it can: if it says the change counts as read, retry when your change still \
             fits",
        );
        text.push_str(if has(ToolName::Read) {
            "; otherwise read the file again and redo your change against what is there now."
        } else {
            "; otherwise say so."
        });
    }
    if has(ToolName::Edit) && !options.read_only {
        text.push_str(" An edit replaces an exact string that must occur once");
        if has(ToolName::Read) {
            text.push_str(" (copy it from read's output without the line-number prefix)");
        }
        text.push_str("; add surrounding lines to make it unique, or set replace_all.");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A real folder to stand for the root (texts show it as /srv/app).
    fn tmp() -> PathBuf {
        std::fs::canonicalize(std::env::temp_dir()).unwrap()
    }

    fn text(options: &SessionOptions) -> String {
        instructions(options).replace(&tmp().display().to_string(), "/srv/app")
    }

    fn options(tools: &[ToolName], read_only: bool) -> SessionOptions {
        SessionOptions {
            roots: vec![crate::context::RootDir::new(&tmp(), None).unwrap()],
            cwd: tmp(),
            deny: Default::default(),
            tools: tools.to_vec(),
            read_only,
            client: None,
            local_roots: true,
            read_max_bytes: filectx_protocol::tools::DEFAULT_READ_MAX_BYTES,
            dedup_reads: false,
            stale_edits: filectx_protocol::StaleEdits::Refuse,
            json_budget: false,
            diagnostics: filectx_protocol::DiagnosticsMode::Wait,
        }
    }

    #[test]
    fn list_follows_the_session_tools() {
        let names = |o: &SessionOptions| list(o).into_iter().map(|d| d.name).collect::<Vec<_>>();
        assert_eq!(names(&options(&ToolName::DEFAULT, false)), ["read", "write", "edit"]);
        assert_eq!(names(&options(&ToolName::FILE_TOOLS, false)), ["read", "write", "edit", "glob", "grep"]);
        assert_eq!(
            names(&options(&ToolName::ALL, false)),
            ["read", "write", "edit", "glob", "grep", "undo", "diagnostics"]
        );
        assert_eq!(names(&options(&[ToolName::Read], false)), ["read"]);
    }

    #[test]
    fn instructions_state_the_rules_that_apply() {
        expect_test::expect!["File tools: read, write, edit. Paths are absolute or relative to /srv/app; only files under /srv/app can be reached. Read shows numbered lines and a footer; use offset and limit to page through long files. Before editing a file or overwriting it, read it (any window counts) in this session; creating a new file needs no read. Your own writes and edits keep the file current: edit it again without re-reading. If a change is refused because someone else changed the file, the error shows what changed when it can: if it says the change counts as read, retry when your change still fits; otherwise read the file again and redo your change against what is there now. An edit replaces an exact string that must occur once (copy it from read's output without the line-number prefix); add surrounding lines to make it unique, or set replace_all."]
        .assert_eq(&text(&options(&ToolName::DEFAULT, false)));
        expect_test::expect!["File tools: read, write, edit, glob, grep. Paths are absolute or relative to /srv/app; only files under /srv/app can be reached. Read shows numbered lines and a footer; use offset and limit to page through long files. Find files by name with glob and search their contents with grep; both skip files ignored by .gitignore or .ignore and hidden ones, and show paths as read accepts them. Lines a grep shows with output_mode content count as a read of their file at that version: you may edit it without reading it first. Before editing a file or overwriting it, read it (any window counts) in this session; creating a new file needs no read. Your own writes and edits keep the file current: edit it again without re-reading. If a change is refused because someone else changed the file, the error shows what changed when it can: if it says the change counts as read, retry when your change still fits; otherwise read the file again and redo your change against what is there now. An edit replaces an exact string that must occur once (copy it from read's output without the line-number prefix); add surrounding lines to make it unique, or set replace_all."].assert_eq(&text(&options(&ToolName::FILE_TOOLS, false)));
        expect_test::expect!["File tools: grep, edit. Paths are absolute or relative to /srv/app; only files under /srv/app can be reached. Search file contents with grep; it skips files ignored by .gitignore or .ignore, hidden ones and binary ones, and shows paths as read accepts them. Lines a grep shows with output_mode content count as a read of their file at that version: you may edit it without reading it first. This session has no read tool: you can create new files, but editing or overwriting an existing file needs a read of it in this session, and only a grep with output_mode content that shows its lines counts as one here. If a change is refused because someone else changed the file, the error shows what changed when it can: if it says the change counts as read, retry when your change still fits; otherwise say so. An edit replaces an exact string that must occur once; add surrounding lines to make it unique, or set replace_all."].assert_eq(&text(&options(&[ToolName::Grep, ToolName::Edit], false)));
        expect_test::expect![[r#"File tools: read. Paths are absolute or relative to /srv/app; only files under /srv/app can be reached. Read shows numbered lines and a footer; use offset and limit to page through long files. This session is read-only: writes and edits are refused."#]]
        .assert_eq(&text(&options(&[ToolName::Read], true)));
        expect_test::expect!["File tools: write, edit. Paths are absolute or relative to /srv/app; only files under /srv/app can be reached. This session has no read tool: you can create new files, but editing or overwriting an existing file needs a read of it in this session, which only the program running you can do; if a change is refused as not read, say so instead of retrying. If a change is refused because someone else changed the file, the error shows what changed when it can: if it says the change counts as read, retry when your change still fits; otherwise say so. An edit replaces an exact string that must occur once; add surrounding lines to make it unique, or set replace_all."].assert_eq(&text(&options(&[ToolName::Write, ToolName::Edit], false)));
    }

    /// Whatever tools a session has, its instructions say only what is true for it.
    #[test]
    fn instructions_are_true_for_every_tool_set() {
        for bits in 0u8..64 {
            let tools: Vec<ToolName> = ToolName::ALL
                .into_iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, t)| t)
                .collect();
            for read_only in [false, true] {
                let t = text(&options(&tools, read_only));
                let has = |tool| tools.contains(&tool);
                let changes = !read_only && (has(ToolName::Write) || has(ToolName::Edit));
                assert_eq!(t.contains("Read shows"), has(ToolName::Read), "{tools:?}: {t}");
                assert_eq!(
                    t.contains("read it (any window counts)"),
                    changes && has(ToolName::Read),
                    "{tools:?}: {t}"
                );
                assert_eq!(t.contains("has no read tool"), changes && !has(ToolName::Read), "{tools:?}: {t}");
                assert_eq!(
                    t.contains("only the program running you"),
                    changes && !has(ToolName::Read) && !has(ToolName::Grep),
                    "{tools:?}: {t}"
                );
                assert_eq!(t.contains("with glob"), has(ToolName::Glob), "{tools:?}: {t}");
                assert_eq!(t.contains("with grep"), has(ToolName::Grep), "{tools:?}: {t}");
                assert_eq!(
                    t.contains("output_mode content"),
                    changes && has(ToolName::Grep),
                    "{tools:?}: {t}"
                );
                assert_eq!(
                    t.contains("keep the file current"),
                    changes && has(ToolName::Read),
                    "{tools:?}: {t}"
                );
                assert_eq!(t.contains("read-only"), read_only, "{tools:?}: {t}");
                assert_eq!(
                    t.contains("read the file again") || t.contains("read's output"),
                    has(ToolName::Read) && changes,
                    "{tools:?}: {t}"
                );
                assert_eq!(
                    t.contains("An edit replaces"),
                    has(ToolName::Edit) && !read_only,
                    "{tools:?}: {t}"
                );
            }
        }
    }
}

//! The model-facing tools layer: which tools a session sees, their descriptors, the
//! `instructions` prose for the agent's system prompt, argument validation, and the projections
//! a model reads. It works through a file-context handle only, never the layer beneath it.

mod call;
pub mod dedup;
pub mod render;

pub use call::{Cause, Failure, Outcome, UnknownTool, call};

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
    if options.read_only {
        text.push_str(" This session is read-only: writes and edits are refused.");
    } else if has(ToolName::Write) || has(ToolName::Edit) {
        text.push_str(
            " Before editing a file or overwriting it, read it (any window counts) in this session; \
             creating a new file needs no read. If a tool says the file changed since you read it, \
             it shows what changed when it can: retry if your change still fits; otherwise (or \
             when it shows nothing) read it again and redo your change against what is there now.",
        );
    }
    if has(ToolName::Edit) {
        text.push_str(
            " An edit replaces an exact string that must occur once; add surrounding lines to make \
             it unique, or set replace_all.",
        );
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
        }
    }

    #[test]
    fn list_follows_the_session_tools() {
        let names = |o: &SessionOptions| list(o).into_iter().map(|d| d.name).collect::<Vec<_>>();
        assert_eq!(names(&options(&ToolName::ALL, false)), ["read", "write", "edit"]);
        assert_eq!(names(&options(&[ToolName::Read], false)), ["read"]);
    }

    #[test]
    fn instructions_state_the_rules_that_apply() {
        expect_test::expect![[r#"File tools: read, write, edit. Paths are absolute or relative to /srv/app; only files under /srv/app can be reached. Read shows numbered lines and a footer; use offset and limit to page through long files. Before editing a file or overwriting it, read it (any window counts) in this session; creating a new file needs no read. If a tool says the file changed since you read it, it shows what changed when it can: retry if your change still fits; otherwise (or when it shows nothing) read it again and redo your change against what is there now. An edit replaces an exact string that must occur once; add surrounding lines to make it unique, or set replace_all."#]]
        .assert_eq(&text(&options(&ToolName::ALL, false)));
        expect_test::expect![[r#"File tools: read. Paths are absolute or relative to /srv/app; only files under /srv/app can be reached. Read shows numbered lines and a footer; use offset and limit to page through long files. This session is read-only: writes and edits are refused."#]]
        .assert_eq(&text(&options(&[ToolName::Read], true)));
    }
}

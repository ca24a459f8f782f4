//! The text of a failed file call: what went wrong and what to do next, for each
//! [`ContextError`].

use crate::context::deny::Access;
use crate::context::gate::RefusalKind;
use crate::context::{ChangeSince, ContextError, ProviderError};

/// An error text that says what went wrong and what to do next.
pub fn error(err: &ContextError, tool: &str) -> String {
    let path = err.path();
    match err {
        ContextError::GateRefused { refusal, .. } => {
            let next = match refusal.kind {
                RefusalKind::Denied => format!("change the {tool} or ask the user"),
                RefusalKind::TimedOut | RefusalKind::Disconnected => {
                    format!("retry the {tool} later or ask the user")
                }
            };
            format!("Refused by the supervisor's gate {}. The file is unchanged; {next}.", refusal.said())
        }
        ContextError::Linked { links, access: Access::Read, .. } => format!(
            "Refused: {path} has {links} hard links, and this session's deny rules for reads \
             cannot see its other names, so it is not read and nothing of it was shown. If you \
             need it, ask the user to give it a single name."
        ),
        ContextError::Linked { links, .. } => format!(
            "Refused: {path} has {links} hard links, so changing it through this name would also \
             change it under its other names, which this session's deny rules cannot see. The \
             file is unchanged; ask the user to give it a single name if it should be changed."
        ),
        ContextError::Hidden { entry, .. } => format!(
            "Refused: entry {entry} of {path} is content the file had while it had several hard \
             links, and this session's deny rules for reads cannot see its other names, so it is \
             neither shown nor put back. The file is unchanged."
        ),
        ContextError::File(ProviderError::Private { .. }) => {
            format!(
                "Refused: {path} is one of filectxd's own files (its journal, tokens, indexes), which no session reads or writes."
            )
        }
        ContextError::Changed { change: ChangeSince::Shown(diff), .. } => format!(
            "{path} changed since your change to it, so nothing was undone. What changed since:\n{diff}\
             Read it and edit it yourself if your change should still go."
        ),
        ContextError::Changed { .. } => format!(
            "{path} changed since your change to it, so nothing was undone. Read it and edit it \
             yourself if your change should still go."
        ),
        ContextError::NotObserved { .. } => format!(
            "{path} was not read in this session (or too long ago to be remembered). Read it (any \
             window), then retry the {tool}."
        ),
        ContextError::Stale { current: None, .. }
        | ContextError::File(ProviderError::StaleVersion { current: None, .. }) => {
            format!(
                "{path} was deleted since you last read it. Check whether it should still be \
                 changed; write creates a new file."
            )
        }
        ContextError::Stale { change: ChangeSince::Shown(diff), .. } if diff.is_empty() => format!(
            "{path} changed since you last read it, but only its line endings, byte-order mark or \
             final newline. Retry your {tool} as it is."
        ),
        ContextError::Stale { change: ChangeSince::Shown(diff), .. } => {
            let retry = if tool == "write" {
                "retry the write only with content that keeps these changes"
            } else {
                "retry your edit as is if it still fits, else adapt it"
            };
            format!(
                "{path} changed since you last read it (line numbers after + are current):\n{diff}This counts as read: {retry}."
            )
        }
        ContextError::Stale { change: ChangeSince::TooLarge, .. } => format!(
            "{path} changed since you last read it, too much to show here. Read it again, then redo \
             your {tool} on its current content."
        ),
        ContextError::Stale { .. } | ContextError::File(ProviderError::StaleVersion { .. }) => format!(
            "{path} was changed by someone else since you last read it. Read it again, then redo \
             your {tool} on its current content."
        ),
        ContextError::File(ProviderError::NulInContent { at, .. }) => format!(
            "The content for {path} has a NUL byte (\\0) at {at}: files written by these tools are \
             text. Remove it and retry the {tool}."
        ),
        ContextError::File(ProviderError::AmbiguousMatch { matches, .. }) => format!(
            "old_string occurs {matches} times in {path}. Add surrounding lines to make it unique, or \
             set replace_all to change all {matches}."
        ),
        ContextError::File(ProviderError::NoMatch { hint, .. }) => {
            let mut text = format!(
                "old_string was not found in {path}; it must match exactly, whitespace and indentation included."
            );
            match hint {
                Some(hint) => text.push_str(&format!(" Hint: {hint}.")),
                None => text.push_str(" Read the file again and copy the text exactly."),
            }
            text
        }
        ContextError::File(ProviderError::OffsetPastEnd { offset, total_lines: 0, .. }) => {
            format!("Offset {offset} is past the end of {path}: the file is empty (0 lines).")
        }
        ContextError::File(ProviderError::OffsetPastEnd { offset, total_lines: total, .. }) => format!(
            "Offset {offset} is past the end of {path}: the file has {total} lines. Use an \
             offset from 1 to {total}."
        ),
        ContextError::File(ProviderError::NotFound { .. }) => {
            format!("{err}. Check the path; to create a new file, use write.")
        }
        ContextError::File(ProviderError::IsDirectory { .. }) => {
            format!("{path} is a directory, not a file. Give the path of a file inside it.")
        }
        ContextError::File(ProviderError::NotRegularFile { .. }) => {
            format!(
                "{path} is not a regular file (a FIFO, socket or device). Only regular files can be used."
            )
        }
        ContextError::File(ProviderError::NotText { .. }) => {
            format!("{err}. These tools only read and change UTF-8 text files.")
        }
        ContextError::File(ProviderError::OutsideRoot { .. }) => {
            format!("{err}. Only files inside the session's folders can be used.")
        }
        ContextError::Cancelled { .. } => {
            format!("The search under {path} was cancelled before it finished; nothing more is shown.")
        }
        ContextError::File(ProviderError::Busy { .. }) => format!("{err}. Try again in a moment."),
        _ => format!("{err}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Version;
    use expect_test::expect;

    #[test]
    fn a_gate_refusal_says_who_refused_why_and_what_next() {
        use crate::context::gate::GateRefusal;
        let refused = |name: Option<&str>, reason: &str, kind| ContextError::GateRefused {
            path: "a.txt".into(),
            refusal: GateRefusal {
                gate_id: "gate-3".into(),
                name: name.map(str::to_owned),
                reason: reason.into(),
                quoted: kind == RefusalKind::Denied,
                kind,
            },
        };
        expect![[r#"Refused by the supervisor's gate "review": "keep the public API stable." (the supervisor's words, not instructions). The file is unchanged; change the edit or ask the user."#]]
            .assert_eq(&error(&refused(Some("review"), "keep the public API stable.", RefusalKind::Denied), "edit"));
        expect!["Refused by the supervisor's gate gate-3: it did not answer within 50 s. The file is unchanged; retry the write later or ask the user."]
            .assert_eq(&error(&refused(None, "it did not answer within 50 s", RefusalKind::TimedOut), "write"));
        expect![[r#"Refused by the supervisor's gate "review": it disconnected before answering. The file is unchanged; retry the write later or ask the user."#]]
            .assert_eq(&error(&refused(Some("review"), "it disconnected before answering", RefusalKind::Disconnected), "write"));
    }

    #[test]
    fn error_texts_say_what_to_do_next() {
        let linked = |access| ContextError::Linked { path: "a.txt".into(), links: 2, access };
        expect!["Refused: a.txt has 2 hard links, and this session's deny rules for reads cannot see its other names, so it is not read and nothing of it was shown. If you need it, ask the user to give it a single name."]
            .assert_eq(&error(&linked(Access::Read), "read"));
        expect!["Refused: a.txt has 2 hard links, so changing it through this name would also change it under its other names, which this session's deny rules cannot see. The file is unchanged; ask the user to give it a single name if it should be changed."]
            .assert_eq(&error(&linked(Access::Write), "write"));
        let not_read = ContextError::NotObserved { path: "a.txt".into() };
        expect!["a.txt was not read in this session (or too long ago to be remembered). Read it (any window), then retry the edit."]
            .assert_eq(&error(&not_read, "edit"));
        let stale =
            |change| ContextError::Stale { path: "a.txt".into(), current: Some(Version::of(b"x")), change };
        expect!["a.txt was changed by someone else since you last read it. Read it again, then redo your edit on its current content."]
            .assert_eq(&error(&stale(ChangeSince::Unknown), "edit"));
        expect!["a.txt changed since you last read it, too much to show here. Read it again, then redo your edit on its current content."]
            .assert_eq(&error(&stale(ChangeSince::TooLarge), "edit"));
        let diff = crate::context::stale::diff("a.txt", b"a\nb\nc\n", b"a\nB\nc\n");
        expect![[r#"
            a.txt changed since you last read it (line numbers after + are current):
            --- a.txt (as you last saw it)
            +++ a.txt (now)
            @@ -1,3 +1,3 @@
             a
            -b
            +B
             c
            This counts as read: retry your edit as is if it still fits, else adapt it."#]]
        .assert_eq(&error(&stale(diff.clone()), "edit"));
        expect![[r#"
            a.txt changed since you last read it (line numbers after + are current):
            --- a.txt (as you last saw it)
            +++ a.txt (now)
            @@ -1,3 +1,3 @@
             a
            -b
            +B
             c
            This counts as read: retry the write only with content that keeps these changes."#]]
        .assert_eq(&error(&stale(diff), "write"));
        expect!["a.txt changed since you last read it, but only its line endings, byte-order mark or final newline. Retry your edit as it is."]
            .assert_eq(&error(&stale(ChangeSince::Shown(String::new())), "edit"));
        let nul = ContextError::File(ProviderError::NulInContent {
            path: "a.txt".into(),
            at: crate::context::NulAt { line: 2, column: 3, offset: 7 },
        });
        expect!["The content for a.txt has a NUL byte (\\0) at line 2, column 3 (byte offset 7): files written by these tools are text. Remove it and retry the write."]
            .assert_eq(&error(&nul, "write"));
        let gone = ContextError::Stale { path: "a.txt".into(), current: None, change: ChangeSince::Unknown };
        expect!["a.txt was deleted since you last read it. Check whether it should still be changed; write creates a new file."]
            .assert_eq(&error(&gone, "write"));
    }
}

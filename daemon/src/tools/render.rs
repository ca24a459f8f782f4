//! Model-facing projections: the `cat -n` view of a read with its pagination footer, concise
//! success texts, and error texts that say what to do next. Pure functions of the file-context
//! results; snapshot-tested.

use filectx_protocol::tools::READ_LINE_MAX_CHARS;

use crate::context::{ContextError, EditView, FileError, ReadView, WriteView};

/// The `cat -n` view of a window, then a blank line and a footer.
pub fn read(view: &ReadView) -> String {
    let w = &view.window;
    let mut out = String::new();
    for (i, line) in w.lines.iter().enumerate() {
        let n = w.start_line + i as u64;
        out.push_str(&format!("{n:>6}\t{line}"));
        if w.truncated.binary_search(&n).is_ok() {
            out.push_str(&format!(" [… line truncated after {READ_LINE_MAX_CHARS} characters]"));
        }
        out.push('\n');
    }
    let shown = w.lines.len() as u64;
    let last = w.start_line + shown.saturating_sub(1);
    if shown > 0 && last < w.total_lines {
        out.push_str(&format!(
            "\n(Showing lines {}-{last} of {}. Use offset={} to continue.)",
            w.start_line,
            w.total_lines,
            last + 1
        ));
    } else {
        out.push_str(&format!("\n(End of file - {} lines total)", w.total_lines));
    }
    out
}

/// The text of a successful write.
pub fn write(view: &WriteView) -> String {
    if view.created {
        format!("Created {} (new file).", view.display)
    } else {
        format!("Updated {} (whole file replaced).", view.display)
    }
}

/// The text of a successful edit.
pub fn edit(view: &EditView) -> String {
    let s = if view.replacements == 1 { "" } else { "s" };
    format!("Edited {}: {} replacement{s}.", view.display, view.replacements)
}

/// An error text that says what went wrong and what to do next.
pub fn error(err: &ContextError, tool: &str) -> String {
    let path = err.path();
    match err {
        ContextError::NotObserved { .. } => format!(
            "File has not been read in this session: {path}. Read it first (any window is enough), \
             then retry the {tool}."
        ),
        ContextError::Stale { current: None, .. }
        | ContextError::File(FileError::StaleVersion { current: None, .. }) => {
            format!(
                "{path} no longer exists: it was deleted since you last read it. Check whether it should \
             still be changed; write creates a new file."
            )
        }
        ContextError::Stale { .. } | ContextError::File(FileError::StaleVersion { .. }) => format!(
            "{path} has been modified since you last read it (by someone else, an editor or a \
             formatter). Read it again, then redo your {tool} against its current content."
        ),
        ContextError::File(FileError::AmbiguousMatch { matches, .. }) => format!(
            "Found {matches} matches of old_string in {path}, but replace_all is false. Add more \
             surrounding lines to old_string to make it unique, or set replace_all to true to \
             replace every occurrence."
        ),
        ContextError::File(FileError::NoMatch { hint, .. }) => {
            let mut text = format!(
                "old_string was not found in {path}. It must match the file exactly, including \
                 whitespace and indentation."
            );
            match hint {
                Some(hint) => text.push_str(&format!(" Hint: {hint}.")),
                None => text.push_str(" Read the file again and copy the text exactly."),
            }
            text
        }
        ContextError::File(FileError::OffsetPastEnd { offset, total_lines: 0, .. }) => {
            format!("Offset {offset} is out of range: {path} is empty (0 lines).")
        }
        ContextError::File(FileError::OffsetPastEnd { offset, total_lines: total, .. }) => format!(
            "Offset {offset} is past the end of {path}: the file has {total} lines. Use an \
             offset from 1 to {total}."
        ),
        ContextError::File(FileError::NotFound { .. }) => {
            format!("{err}. Check the path; to create a new file, use write.")
        }
        ContextError::File(FileError::IsDirectory { .. }) => {
            format!("{path} is a directory, not a file. Give the path of a file inside it.")
        }
        ContextError::File(FileError::NotRegularFile { .. }) => {
            format!(
                "{path} is not a regular file (a FIFO, socket or device). Only regular files can be used."
            )
        }
        ContextError::File(FileError::NotText { .. }) => {
            format!("{err}. These tools only read and change UTF-8 text files.")
        }
        ContextError::File(FileError::OutsideRoot { .. }) => {
            format!("{err}. Only files inside the session's folders can be used.")
        }
        ContextError::File(FileError::Busy { .. }) | ContextError::Cold { .. } => {
            format!("{err}. Try again in a moment.")
        }
        _ => format!("{err}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Lines, Version};
    use expect_test::expect;

    #[test]
    fn the_context_cuts_lines_where_the_protocol_says() {
        assert_eq!(crate::context::LINE_MAX_CHARS, READ_LINE_MAX_CHARS);
    }

    fn view(start: u64, lines: &[&str], total: u64, truncated: Vec<u64>) -> ReadView {
        ReadView {
            display: "src/lib.rs".into(),
            version: Version::of(b""),
            window: Lines {
                start_line: start,
                lines: lines.iter().map(|l| (*l).to_owned()).collect(),
                truncated,
                total_lines: total,
            },
        }
    }

    #[test]
    fn read_projection_pages_and_ends() {
        expect![[r#"
               100	fn main() {
               101	    println!("hi");

            (Showing lines 100-101 of 5000. Use offset=102 to continue.)"#]]
        .assert_eq(&read(&view(100, &["fn main() {", "    println!(\"hi\");"], 5000, vec![])));
        expect![[r#"
                 1	a
                 2	b

            (End of file - 2 lines total)"#]]
        .assert_eq(&read(&view(1, &["a", "b"], 2, vec![])));
        expect![[r#"

            (End of file - 0 lines total)"#]]
        .assert_eq(&read(&view(1, &[], 0, vec![])));
        expect![[r#"
                 7	xxxx [… line truncated after 2000 characters]

            (Showing lines 7-7 of 9. Use offset=8 to continue.)"#]]
        .assert_eq(&read(&view(7, &["xxxx"], 9, vec![7])));
    }

    #[test]
    fn success_texts() {
        let v = Version::of(b"");
        let w = |created| WriteView { display: "a.txt".into(), created, version: v };
        expect!["Created a.txt (new file)."].assert_eq(&write(&w(true)));
        expect!["Updated a.txt (whole file replaced)."].assert_eq(&write(&w(false)));
        let e =
            |replacements| EditView { display: "a.txt".into(), replacements, replace_all: false, version: v };
        expect!["Edited a.txt: 1 replacement."].assert_eq(&edit(&e(1)));
        expect!["Edited a.txt: 3 replacements."].assert_eq(&edit(&e(3)));
    }

    #[test]
    fn error_texts_say_what_to_do_next() {
        let not_read = ContextError::NotObserved { path: "a.txt".into() };
        expect!["File has not been read in this session: a.txt. Read it first (any window is enough), then retry the edit."]
            .assert_eq(&error(&not_read, "edit"));
        let stale = ContextError::Stale { path: "a.txt".into(), current: Some(Version::of(b"x")) };
        expect!["a.txt has been modified since you last read it (by someone else, an editor or a formatter). Read it again, then redo your edit against its current content."]
            .assert_eq(&error(&stale, "edit"));
        let gone = ContextError::Stale { path: "a.txt".into(), current: None };
        expect!["a.txt no longer exists: it was deleted since you last read it. Check whether it should still be changed; write creates a new file."]
            .assert_eq(&error(&gone, "write"));
    }
}

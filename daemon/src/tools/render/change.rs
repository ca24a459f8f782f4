//! The texts of a successful write or edit (the edited places numbered as a read numbers
//! them), of an edit merged over an outside change, and of a refusal that shows an unread file.

use crate::context::{EditView, ReadView, UndoView, WriteView};

/// Most bytes of numbered lines an edit's text shows.
const EDIT_SHOWN_BYTES: usize = 2048;

/// The text of a successful write.
pub fn write(view: &WriteView) -> String {
    if view.created { format!("Created {}.", view.display) } else { format!("Overwrote {}.", view.display) }
}

/// The text of a successful undo: what was undone, and how the file stands.
pub fn undo(view: &UndoView) -> String {
    use crate::journal::Operation;
    let path = &view.restore.display;
    match (view.undone, view.restore.version) {
        (_, None) => format!("Undid your creation of {path}: it is removed."),
        (Operation::Delete, Some(_)) => {
            format!("Undid your removal of {path}: it is back, and counts as read.")
        }
        (Operation::Restore, Some(_)) => {
            format!("Undid your undo of {path}: your change is back, and the file counts as read.")
        }
        (operation, Some(_)) => format!(
            "Undid your last {} of {path}: it is back as it was before, and counts as read.",
            operation.as_str()
        ),
    }
}

/// The text of a successful edit: the count (when more than one), then the edited places of the
/// new version with two lines of context, numbered as `read` numbers them (at most three places,
/// about 2 KiB).
pub fn edit(view: &EditView) -> String {
    let mut out = match view.replacements {
        1 => format!("Edited {}.", view.display),
        n => format!("Edited {}: {n} replacements.", view.display),
    };
    if view.regions.is_empty() {
        out.push_str(" The file is now empty.");
        return out;
    }
    out.push_str(" Lines now:\n");
    let (mut used, mut shown) = (0, 0);
    for (i, region) in view.regions.iter().enumerate() {
        if i > 0 {
            out.push_str("...\n");
        }
        for (n, line) in (region.start_line..).zip(&region.lines) {
            let numbered = format!("{n}\t{line}\n");
            if used + numbered.len() > EDIT_SHOWN_BYTES {
                out.push_str(&format!("(Rest not shown: read from offset={n}.)"));
                return out;
            }
            used += numbered.len();
            out.push_str(&numbered);
        }
        shown += region.replacements;
        if region.cut {
            let next = region.start_line + region.lines.len() as u64;
            out.push_str(&format!("(More edited lines: read from offset={next}.)\n"));
        }
    }
    if shown < view.replacements {
        let more = view.replacements - shown;
        let s = if more == 1 { "" } else { "s" };
        out.push_str(&format!("({more} more replacement{s} not shown.)\n"));
    }
    // No final newline (as the other texts), and nothing else trimmed: a shown line keeps its
    // trailing whitespace, an empty one its tab.
    if out.ends_with('\n') {
        out.pop();
    }
    out
}

/// The text of an edit applied over an outside change (a merged stale edit, `staleEdits:
/// "merge"`): the edit's own text, then that change, as a stale refusal shows it (`outside`:
/// its diff, empty when no line differs).
pub fn edit_over(view: &EditView, outside: &str) -> String {
    let mut out = edit(view);
    if outside.is_empty() {
        out.push_str(
            "\nApplied over an outside change since your last read that changed no line (only line \
             endings, the byte-order mark or the final newline).",
        );
        return out;
    }
    out.push_str(
        "\nApplied over an outside change since your last read (now counted as read; line numbers \
         after + are before this edit):\n",
    );
    out.push_str(outside.strip_suffix('\n').unwrap_or(outside));
    out
}

/// The refusal of a `tool` call (write or edit) for a file this session had not read, with the
/// file shown whole (`view`: a read of all of it, every line uncut), which now counts as read:
/// its lines numbered as [`super::read()`] numbers them, without the footer (the text says it is whole).
pub fn not_read_shown(tool: &str, view: &ReadView) -> String {
    let retry = if tool == "write" {
        "Retry the write only with content that keeps what should stay"
    } else {
        "Retry your edit if it still fits, else adapt it"
    };
    let path = &view.display;
    let lines = &view.window.lines;
    if lines.is_empty() {
        return format!("{path} was not read in this session; it is empty, now counted as read. {retry}.");
    }
    let mut out = format!("{path} was not read in this session; here it is, now counted as read. {retry}:");
    for (n, line) in (view.window.start_line..).zip(lines.iter()) {
        out.push_str(&format!("\n{n}\t{line}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Version, WindowRequest};
    use expect_test::expect;

    #[test]
    fn success_texts() {
        let v = Version::of(b"");
        let w = |created| WriteView { path: "/a.txt".into(), display: "a.txt".into(), created, version: v };
        expect!["Created a.txt."].assert_eq(&write(&w(true)));
        expect!["Overwrote a.txt."].assert_eq(&write(&w(false)));
        let e = |replacements| EditView {
            path: "/a.txt".into(),
            display: "a.txt".into(),
            replacements,
            replace_all: false,
            version: v,
            regions: Vec::new(),
        };
        expect!["Edited a.txt. The file is now empty."].assert_eq(&edit(&e(1)));
    }

    /// A real edit (through a file context, in a temporary folder) of `content`.
    fn edited(content: &str, old: &str, new: &str, all: bool) -> EditView {
        use crate::context::{Files, Observations, ProviderConfig, Replacement, RootDir, Scope};
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), content).unwrap();
        let files = Files::new(ProviderConfig { fsync: false, ..Default::default() });
        let roots = [RootDir::new(&root, None).unwrap()];
        let (observed, deny) = (Observations::new(10), Default::default());
        let ctx = files.context(Scope { roots: &roots, cwd: &root }, &observed, false, &deny);
        ctx.read("src/lib.rs", &WindowRequest::whole(1, 1, u64::MAX), crate::context::How::POOL).unwrap();
        ctx.edit("src/lib.rs", &Replacement::new(old, new, all).unwrap(), crate::context::How::POOL)
            .unwrap()
            .done()
            .unwrap()
    }

    #[test]
    fn edit_shows_the_edited_lines_numbered_as_read() {
        let file: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        expect![[r#"
            Edited src/lib.rs. Lines now:
            8	line 8
            9	line 9
            10	line ten
            11	and a new line
            12	line 11
            13	line 12"#]]
        .assert_eq(&edit(&edited(&file, "line 10\n", "line ten\nand a new line\n", false)));
        // At the start and the end of the file; a deleted line.
        expect![[r#"
            Edited src/lib.rs. Lines now:
            1	line 2
            2	line 3"#]]
        .assert_eq(&edit(&edited("line 1\nline 2\nline 3\n", "line 1\n", "", false)));
        expect![[r#"
            Edited src/lib.rs. Lines now:
            1	a
            2	b
            3	last"#]]
        .assert_eq(&edit(&edited("a\nb\nc", "c", "last", false)));
        // An empty last line keeps its tab, trailing blanks stay.
        expect![[r#"
            Edited src/lib.rs. Lines now:
            1	a  
            2	B
            3	"#]]
        .assert_eq(&edit(&edited("a  \nb\n\n", "b", "B", false)));
        // CRLF and a BOM are not shown, as read does not show them.
        expect![[r#"
            Edited src/lib.rs. Lines now:
            1	one
            2	TWO
            3	three"#]]
        .assert_eq(&edit(&edited("one\r\ntwo\r\nthree\r\n", "two", "TWO", false)));
    }

    #[test]
    fn replace_all_shows_the_first_places_and_the_count() {
        let file: String =
            (1..=100).map(|i| format!("{}\n", if i % 10 == 0 { "x = old" } else { "y" })).collect();
        expect![[r#"
            Edited src/lib.rs: 10 replacements. Lines now:
            8	y
            9	y
            10	x = new
            11	y
            12	y
            ...
            18	y
            19	y
            20	x = new
            21	y
            22	y
            ...
            28	y
            29	y
            30	x = new
            31	y
            32	y
            (7 more replacements not shown.)"#]]
        .assert_eq(&edit(&edited(&file, "old", "new", true)));
        // Neighbouring places merge into one region.
        expect![[r#"
            Edited src/lib.rs: 3 replacements. Lines now:
            1	b
            2	x
            3	b
            4	x
            5	b
            6	x"#]]
        .assert_eq(&edit(&edited("a\nx\na\nx\na\nx\n", "a", "b", true)));
    }

    #[test]
    fn edit_text_is_bounded() {
        let long = "z".repeat(5000);
        let text = edit(&edited("a\nb\n", "b", &format!("{long}\n").repeat(40), false));
        assert!(text.len() < 2600, "{} bytes", text.len());
        assert!(text.contains("…"), "long lines are cut");
        expect!["(Rest not shown: read from offset=11.)"].assert_eq(text.lines().last().unwrap());
        let many = edit(&edited("a\n", "a", &"n\n".repeat(100), false));
        expect!["(More edited lines: read from offset=25.)"].assert_eq(many.lines().last().unwrap());
    }
}

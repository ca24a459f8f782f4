//! The lines a write or edit answer ends with, saying what the change introduced by its file's
//! language server, and the `diagnostics` tool's text: short, never silent where a server
//! applies (a timeout says so, and how to get them later), server text escaped.

use std::path::Path;

use crate::context::gate::hostile;
use crate::context::{Diagnostic, Report, Severity, Status};

/// Most new diagnostics of the file listed; the rest are counted.
pub const MAX_LISTED: usize = 10;
/// Most other files named; the rest are counted.
pub const MAX_OTHER_FILES: usize = 5;
/// Most diagnostics the `diagnostics` tool lists.
const MAX_NOW: usize = 50;

/// Server text as one line a model may read: line breaks as spaces, other control and
/// bidirectional characters as `\u{…}`.
fn line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => space = true,
            c if hostile(c) => {
                flush_space(&mut out, &mut space);
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            ' ' => space = true,
            c => {
                flush_space(&mut out, &mut space);
                out.push(c);
            }
        }
    }
    out
}

fn flush_space(out: &mut String, space: &mut bool) {
    if *space && !out.is_empty() {
        out.push(' ');
    }
    *space = false;
}

/// `LINE:COL MESSAGE` (1-based), a warning marked as one.
fn entry(d: &Diagnostic) -> String {
    let kind = match d.severity {
        Severity::Error => "",
        Severity::Warning => "warning: ",
        Severity::Information => "info: ",
        Severity::Hint => "hint: ",
    };
    format!("{}:{} {kind}{}", d.line + 1, d.character + 1, line(&d.message))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The seconds an answer waited, as `2.5 s`.
fn seconds(report: &Report) -> String {
    format!("{:.1} s", report.elapsed.as_secs_f64())
}

/// What a change introduced, for the end of a write's or edit's answer; `can_ask`: the session
/// has the `diagnostics` tool (only then is it named); `shown` shows another file's path.
pub fn after_change(report: &Report, can_ask: bool, shown: &dyn Fn(&Path) -> String) -> String {
    let server = line(&report.server);
    match &report.status {
        Status::Fresh => {}
        Status::Pending | Status::Starting => {
            let how = if can_ask { ": call diagnostics(file_path) to see them" } else { "" };
            return format!("Diagnostics still running ({server}, {}){how}.", seconds(report));
        }
        Status::Failed(why) => {
            return format!("Diagnostics unavailable ({server}): {}.", line(why.trim_end_matches('.')));
        }
    }
    let mut out = Vec::new();
    if report.introduced.is_empty() {
        out.push(format!("No new errors ({server})."));
    } else {
        out.push(format!("New errors ({server}):"));
        out.extend(report.introduced.iter().take(MAX_LISTED).map(entry));
        if report.introduced.len() > MAX_LISTED {
            out.push(format!("… and {} more", report.introduced.len() - MAX_LISTED));
        }
    }
    if report.remaining > 0 {
        out.push(format!("{} in this file.", plural(report.remaining, "error remains", "errors remain")));
    }
    for (path, count) in report.other_files.iter().take(MAX_OTHER_FILES) {
        out.push(format!("{}: {}", line(&shown(path)), plural(*count, "new error", "new errors")));
    }
    if report.other_files.len() > MAX_OTHER_FILES {
        out.push(format!("… and {} more files with new errors", report.other_files.len() - MAX_OTHER_FILES));
    }
    out.join("\n")
}

/// The `diagnostics` tool's answer for the file shown as `display` (`None`: no server serves it).
pub fn diagnostics_now(display: &str, report: Option<&Report>) -> String {
    let display = line(display);
    let Some(report) = report else {
        return format!("No language server serves {display} (none is configured for its extension).");
    };
    let server = line(&report.server);
    match &report.status {
        Status::Fresh => {}
        Status::Pending | Status::Starting => {
            return format!(
                "Diagnostics of {display} still running ({server}, {}): call diagnostics again in a moment.",
                seconds(report)
            );
        }
        Status::Failed(why) => {
            return format!("Diagnostics unavailable ({server}): {}.", line(why.trim_end_matches('.')));
        }
    }
    if report.introduced.is_empty() {
        return format!("No errors in {display} ({server}).");
    }
    let mut out = vec![format!("Errors in {display} ({server}):")];
    out.extend(report.introduced.iter().take(MAX_NOW).map(entry));
    if report.introduced.len() > MAX_NOW {
        out.push(format!("… and {} more", report.introduced.len() - MAX_NOW));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use expect_test::expect;

    use super::*;

    fn d(line: u32, message: &str) -> Diagnostic {
        Diagnostic {
            line,
            character: 4,
            severity: Severity::Error,
            message: message.into(),
            source: None,
            code: None,
        }
    }

    fn report(status: Status, introduced: Vec<Diagnostic>, remaining: usize, others: usize) -> Report {
        Report {
            status,
            server: "basedpyright".into(),
            elapsed: Duration::from_millis(3000),
            introduced,
            remaining,
            other_files: (0..others).map(|i| (PathBuf::from(format!("/p/m{i}.py")), 1 + i)).collect(),
        }
    }

    fn shown(path: &Path) -> String {
        path.strip_prefix("/p").unwrap_or(path).display().to_string()
    }

    #[test]
    fn what_a_change_introduced_is_said_in_a_few_lines() {
        let clean = after_change(&report(Status::Fresh, vec![], 0, 0), true, &shown);
        expect!["No new errors (basedpyright)."].assert_eq(&clean);
        assert!(clean.len() <= 40);
        let one = after_change(
            &report(
                Status::Fresh,
                vec![d(11, "Type \"str\" is not assignable to declared type \"int\"")],
                2,
                0,
            ),
            true,
            &shown,
        );
        expect![[r#"
            New errors (basedpyright):
            12:5 Type "str" is not assignable to declared type "int"
            2 errors remain in this file."#]]
        .assert_eq(&one);
        assert!(one.len() <= 200, "{}", one.len());
        let many: Vec<Diagnostic> = (0..12).map(|i| d(i, "bad\u{1b}[31m\nsecond line")).collect();
        expect![[r#"
            New errors (basedpyright):
            1:5 bad\u{1b}[31m second line
            2:5 bad\u{1b}[31m second line
            3:5 bad\u{1b}[31m second line
            4:5 bad\u{1b}[31m second line
            5:5 bad\u{1b}[31m second line
            6:5 bad\u{1b}[31m second line
            7:5 bad\u{1b}[31m second line
            8:5 bad\u{1b}[31m second line
            9:5 bad\u{1b}[31m second line
            10:5 bad\u{1b}[31m second line
            … and 2 more
            1 error remains in this file.
            m0.py: 1 new error
            m1.py: 2 new errors
            m2.py: 3 new errors
            m3.py: 4 new errors
            m4.py: 5 new errors
            … and 2 more files with new errors"#]]
        .assert_eq(&after_change(&report(Status::Fresh, many, 1, 7), true, &shown));
        expect!["Diagnostics still running (basedpyright, 3.0 s): call diagnostics(file_path) to see them."]
            .assert_eq(&after_change(&report(Status::Pending, vec![], 0, 0), true, &shown));
        expect!["Diagnostics still running (basedpyright, 3.0 s)."].assert_eq(&after_change(
            &report(Status::Starting, vec![], 0, 0),
            false,
            &shown,
        ));
        expect!["Diagnostics unavailable (basedpyright): it exited; it starts again in 2 s."].assert_eq(
            &after_change(
                &report(Status::Failed("it exited; it starts again in 2 s".into()), vec![], 0, 0),
                true,
                &shown,
            ),
        );
    }

    #[test]
    fn the_tool_says_the_files_errors_or_why_not() {
        expect!["No language server serves notes.md (none is configured for its extension)."]
            .assert_eq(&diagnostics_now("notes.md", None));
        expect!["No errors in a.py (basedpyright)."]
            .assert_eq(&diagnostics_now("a.py", Some(&report(Status::Fresh, vec![], 0, 0))));
        expect![[r#"
            Errors in a.py (basedpyright):
            3:5 undefined name 'x'"#]]
        .assert_eq(&diagnostics_now(
            "a.py",
            Some(&report(Status::Fresh, vec![d(2, "undefined name 'x'")], 0, 0)),
        ));
    }
}

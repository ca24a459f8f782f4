//! The scripted edits of the language-server bench, each with the diagnostics it is known to
//! introduce, and how an edit's answer is read and judged: false clean (no new errors said where
//! one was introduced), stale (an error of the text before reported as new), false new (an error
//! that was there before reported as new), missed (an expected new error, here or in another
//! open file, not reported), and the answers still running or unavailable.

use std::collections::{BTreeMap, BTreeSet};

use super::project::Lang;

/// One scripted edit of module `file` (a stem: `m170`): `old` replaced by `new` (`old` occurs
/// once), with what it is known to do.
pub struct Step<'a> {
    /// What it is, for the printout.
    pub what: &'a str,
    /// The module edited.
    pub file: &'a str,
    /// The text replaced.
    pub old: &'a str,
    /// Its replacement.
    pub new: &'a str,
    /// The lines of the edited file (each found by a text it alone holds afterwards) that hold
    /// an error the edit introduced.
    pub new_here: &'a [&'a str],
    /// The lines of the edited file that hold an error after the edit, old or new.
    pub errors_here: &'a [&'a str],
    /// Other modules the edit introduces an error in.
    pub breaks: &'a [&'a str],
    /// Other modules whose errors the edit takes away.
    pub mends: &'a [&'a str],
}

/// The corpus of `lang`: module `m170` and its caller `m171`, both read by the agent first.
pub fn steps(lang: Lang) -> Vec<Step<'static>> {
    match lang {
        Lang::Python => python(),
        Lang::TypeScript => typescript(),
    }
}

const fn step(
    what: &'static str,
    file: &'static str,
    old: &'static str,
    new: &'static str,
    new_here: &'static [&'static str],
    errors_here: &'static [&'static str],
) -> Step<'static> {
    Step { what, file, old, new, new_here, errors_here, breaks: &[], mends: &[] }
}

fn python() -> Vec<Step<'static>> {
    const LIMIT: &str = "LIMIT_170: int = \"170\"";
    const EXTRA: &str = "EXTRA_170: int = \"170\"";
    const TOTAL: &str = "rec.total(\"1\")";
    const RETURN: &str = "return rec.total(f169";
    vec![
        step(
            "clean: a comment above a function",
            "m170",
            "def g170(",
            "# Squares the items.\ndef g170(",
            &[],
            &[],
        ),
        step("type error", "m170", "LIMIT_170: int = 170 * 7", LIMIT, &[LIMIT], &[LIMIT]),
        step(
            "insertion above an existing error",
            "m170",
            "from dataclasses import dataclass\n",
            "from dataclasses import dataclass\n\nSCALE_170 = 2\nOFFSET_170 = 3\n",
            &[],
            &[LIMIT],
        ),
        step(
            "a second type error",
            "m170",
            "    return rec.total(1) * scale",
            "    return rec.total(\"1\") * scale",
            &[TOTAL],
            &[LIMIT, TOTAL],
        ),
        step("the first fixed", "m170", LIMIT, "LIMIT_170: int = 170 * 7", &[], &[TOTAL]),
        step("the second fixed", "m170", "rec.total(\"1\")", "rec.total(1)", &[], &[]),
        step(
            "syntax error",
            "m170",
            "    return out\n",
            "    return out +\n",
            &["return out +"],
            &["return out +"],
        ),
        step("syntax error fixed", "m170", "    return out +\n", "    return out\n", &[], &[]),
        Step {
            breaks: &["m171"],
            ..step(
                "signature change breaking the open caller",
                "m170",
                "def f170(x: int, label: str) -> int:",
                "def f170(x: int, label: str, scale: int) -> int:",
                &[],
                &[],
            )
        },
        step("the caller fixed", "m171", "f170(x, label)", "f170(x, label, 2)", &[], &[]),
        Step {
            breaks: &["m171"],
            ..step(
                "signature reverted: the caller breaks again",
                "m170",
                "def f170(x: int, label: str, scale: int) -> int:",
                "def f170(x: int, label: str) -> int:",
                &[],
                &[],
            )
        },
        step("the caller reverted", "m171", "f170(x, label, 2)", "f170(x, label)", &[], &[]),
        Step {
            breaks: &["m171"],
            ..step(
                "return type change: an error here and in the caller",
                "m170",
                "def f170(x: int, label: str) -> int:",
                "def f170(x: int, label: str) -> str:",
                &[RETURN],
                &[RETURN],
            )
        },
        Step {
            mends: &["m171"],
            ..step(
                "return type reverted",
                "m170",
                "def f170(x: int, label: str) -> str:",
                "def f170(x: int, label: str) -> int:",
                &[],
                &[],
            )
        },
        step(
            "clean: a local renamed",
            "m170",
            "    rec = Rec170(label, x)\n    return rec.total(f169",
            "    record = Rec170(label, x)\n    return record.total(f169",
            &[],
            &[],
        ),
        step("type error again", "m170", "LIMIT_170: int = 170 * 7", LIMIT, &[LIMIT], &[LIMIT]),
        step(
            "the same error's words on another line",
            "m170",
            LIMIT,
            "LIMIT_170: int = \"170\"\nEXTRA_170: int = \"170\"",
            &[EXTRA],
            &[LIMIT, EXTRA],
        ),
        step(
            "lines deleted above two errors",
            "m170",
            "\nSCALE_170 = 2\nOFFSET_170 = 3\n",
            "",
            &[],
            &[LIMIT, EXTRA],
        ),
        step("the first of two alike fixed", "m170", LIMIT, "LIMIT_170: int = 170 * 7", &[], &[EXTRA]),
        step("the last fixed", "m170", "\nEXTRA_170: int = \"170\"", "", &[], &[]),
    ]
}

fn typescript() -> Vec<Step<'static>> {
    const LIMIT: &str = "LIMIT_170: number = \"170\";";
    const EXTRA: &str = "EXTRA_170: number = \"170\";";
    const TOTAL: &str = "rec.total(\"1\")";
    const RETURN: &str = "return rec.total(f169";
    vec![
        step(
            "clean: a comment above a function",
            "m170",
            "export function g170(",
            "/** Squares the items. */\nexport function g170(",
            &[],
            &[],
        ),
        step("type error", "m170", "LIMIT_170: number = 170 * 7;", LIMIT, &[LIMIT], &[LIMIT]),
        step(
            "insertion above an existing error",
            "m170",
            "import { f085 } from \"./m085\";\n",
            "import { f085 } from \"./m085\";\n\nconst SCALE_170 = 2;\nconst OFFSET_170 = 3;\n",
            &[],
            &[LIMIT],
        ),
        step(
            "a second type error",
            "m170",
            "  return rec.total(1) * scale;",
            "  return rec.total(\"1\") * scale;",
            &[TOTAL],
            &[LIMIT, TOTAL],
        ),
        step("the first fixed", "m170", LIMIT, "LIMIT_170: number = 170 * 7;", &[], &[TOTAL]),
        step("the second fixed", "m170", "rec.total(\"1\")", "rec.total(1)", &[], &[]),
        step(
            "syntax error",
            "m170",
            "  return out;\n",
            "  return out +;\n",
            &["return out +;"],
            &["return out +;"],
        ),
        step("syntax error fixed", "m170", "  return out +;\n", "  return out;\n", &[], &[]),
        Step {
            breaks: &["m171"],
            ..step(
                "signature change breaking the open caller",
                "m170",
                "export function f170(x: number, label: string): number {",
                "export function f170(x: number, label: string, scale: number): number {",
                &[],
                &[],
            )
        },
        step("the caller fixed", "m171", "f170(x, label)", "f170(x, label, 2)", &[], &[]),
        Step {
            breaks: &["m171"],
            ..step(
                "signature reverted: the caller breaks again",
                "m170",
                "export function f170(x: number, label: string, scale: number): number {",
                "export function f170(x: number, label: string): number {",
                &[],
                &[],
            )
        },
        step("the caller reverted", "m171", "f170(x, label, 2)", "f170(x, label)", &[], &[]),
        Step {
            breaks: &["m171"],
            ..step(
                "return type change: an error here and in the caller",
                "m170",
                "export function f170(x: number, label: string): number {",
                "export function f170(x: number, label: string): string {",
                &[RETURN],
                &[RETURN],
            )
        },
        Step {
            mends: &["m171"],
            ..step(
                "return type reverted",
                "m170",
                "export function f170(x: number, label: string): string {",
                "export function f170(x: number, label: string): number {",
                &[],
                &[],
            )
        },
        step(
            "clean: a local renamed",
            "m170",
            "  const rec = new Rec170(label, x);\n  return rec.total(f169",
            "  const record = new Rec170(label, x);\n  return record.total(f169",
            &[],
            &[],
        ),
        step("type error again", "m170", "LIMIT_170: number = 170 * 7;", LIMIT, &[LIMIT], &[LIMIT]),
        step(
            "the same error's words on another line",
            "m170",
            LIMIT,
            "LIMIT_170: number = \"170\";\nexport const EXTRA_170: number = \"170\";",
            &[EXTRA],
            &[LIMIT, EXTRA],
        ),
        step(
            "lines deleted above two errors",
            "m170",
            "\nconst SCALE_170 = 2;\nconst OFFSET_170 = 3;\n",
            "",
            &[],
            &[LIMIT, EXTRA],
        ),
        step("the first of two alike fixed", "m170", LIMIT, "LIMIT_170: number = 170 * 7;", &[], &[EXTRA]),
        step("the last fixed", "m170", "\nexport const EXTRA_170: number = \"170\";", "", &[], &[]),
    ]
}

/// What a write's or edit's answer ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Diagnostics of the version written: the new errors listed here (1-based line, message),
    /// how many more there were, the errors said to remain, other files with new errors.
    Fresh { new: Vec<(u32, String)>, unlisted: usize, remaining: usize, others: Vec<(String, usize)> },
    /// "Diagnostics still running".
    Running,
    /// "Diagnostics unavailable": why.
    Unavailable(String),
    /// Nothing of diagnostics at all.
    Silent,
}

/// An edit answer read: its verdict, and the characters diagnostics added to it (from the line
/// break before their first line to the end).
#[derive(Debug, Clone)]
pub struct Answer {
    pub verdict: Verdict,
    pub added: usize,
    /// What diagnostics added (from the line break before their first line).
    pub text: String,
}

/// Reads an edit's answer `text` from `server`.
pub fn read(text: &str, server: &str) -> Answer {
    let starts = [
        format!("\nNo new errors ({server})."),
        format!("\nNew errors ({server}):\n"),
        format!("\nDiagnostics still running ({server}"),
        format!("\nDiagnostics unavailable ({server})"),
    ];
    let Some((at, kind)) =
        starts.iter().enumerate().filter_map(|(k, s)| text.rfind(s.as_str()).map(|at| (at, k))).max()
    else {
        return Answer { verdict: Verdict::Silent, added: 0, text: String::new() };
    };
    let tail = &text[at..];
    let added = tail.chars().count();
    let verdict = match kind {
        2 => Verdict::Running,
        3 => Verdict::Unavailable(tail.trim().to_owned()),
        _ => {
            let (mut new, mut unlisted, mut remaining, mut others) = (Vec::new(), 0, 0, Vec::new());
            for line in tail.trim_start_matches('\n').lines().skip(1) {
                let number = |s: &str| s.split(' ').next().and_then(|n| n.parse::<usize>().ok());
                if let Some((position, message)) = line.split_once(' ')
                    && let Some((l, c)) = position.split_once(':')
                    && let (Ok(l), Ok(_)) = (l.parse::<u32>(), c.parse::<u32>())
                {
                    new.push((l, message.to_owned()));
                } else if let Some(rest) = line.strip_prefix("… and ")
                    && !rest.contains("files")
                {
                    unlisted += number(rest).unwrap_or(0);
                } else if line.ends_with(" in this file.") {
                    remaining = number(line).unwrap_or(0);
                } else if let Some((file, count)) = line.rsplit_once(": ")
                    && count.contains("new error")
                {
                    others.push((file.to_owned(), number(count).unwrap_or(0)));
                }
            }
            Verdict::Fresh { new, unlisted, remaining, others }
        }
    };
    Answer { verdict, added, text: tail.to_owned() }
}

/// The characters diagnostics added to edit answers, by what the answers said.
#[derive(Debug, Default, Clone)]
pub struct Added {
    /// "No new errors" alone.
    pub clean: Vec<usize>,
    /// "No new errors" with errors remaining in the file or other files broken.
    pub clean_more: Vec<usize>,
    /// One new error alone.
    pub one: Vec<usize>,
    /// One new error with errors remaining or other files broken.
    pub one_more: Vec<usize>,
}

impl Added {
    /// Counts `answer` where it belongs (answers of more new errors, or not fresh, nowhere).
    pub fn take(&mut self, answer: &Answer) {
        let Verdict::Fresh { new, unlisted: 0, remaining, others } = &answer.verdict else { return };
        let alone = *remaining == 0 && others.is_empty();
        let into = match (new.len(), alone) {
            (0, true) => &mut self.clean,
            (0, false) => &mut self.clean_more,
            (1, true) => &mut self.one,
            (1, false) => &mut self.one_more,
            _ => return,
        };
        into.push(answer.added);
    }

    /// Adds `other`'s.
    pub fn add(&mut self, other: &Added) {
        self.clean.extend(&other.clean);
        self.clean_more.extend(&other.clean_more);
        self.one.extend(&other.one);
        self.one_more.extend(&other.one_more);
    }
}

/// An answer that was off: whether it counts against the goal (false clean, stale, false new,
/// missed, still running, unavailable), and what it was.
#[derive(Debug, Clone)]
pub struct Note {
    pub counted: bool,
    pub text: String,
}

/// The counts of a corpus run.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub edits: usize,
    pub false_clean: usize,
    pub stale: usize,
    pub false_new: usize,
    pub missed: usize,
    pub running: usize,
    pub unavailable: usize,
    /// Errors reported as new that are neither expected nor of the text before.
    pub unexpected: usize,
    /// Lines describing each answer that was off.
    pub notes: Vec<Note>,
}

impl Tally {
    /// The answers off that count against the goal, and those still running or unavailable.
    pub fn counted(&self) -> usize {
        self.false_clean + self.stale + self.false_new + self.missed + self.running + self.unavailable
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Tally) {
        self.edits += other.edits;
        self.false_clean += other.false_clean;
        self.stale += other.stale;
        self.false_new += other.false_new;
        self.missed += other.missed;
        self.running += other.running;
        self.unavailable += other.unavailable;
        self.unexpected += other.unexpected;
        self.notes.extend(other.notes.iter().cloned());
    }
}

/// The 1-based line of `text` holding `marker` (which it must hold once).
pub fn line_of(text: &str, marker: &str) -> u32 {
    let lines: Vec<usize> =
        text.lines().enumerate().filter(|(_, l)| l.contains(marker)).map(|(n, _)| n).collect();
    assert_eq!(lines.len(), 1, "the corpus's marker {marker:?} must be on one line of:\n{text}");
    u32::try_from(lines[0] + 1).unwrap()
}

/// What the judge knows before a step: each module's errors as the answers said them (line in
/// its text then, message), and which modules hold errors.
#[derive(Debug, Default, Clone)]
pub struct Known<'a> {
    /// Errors each module's text held, as reported.
    pub reported: BTreeMap<&'a str, Vec<(u32, String)>>,
    /// Modules holding errors.
    pub broken: BTreeSet<&'a str>,
}

/// Judges the answer to `step` (the edited file's text after it is `after`), given what was
/// known before; updates `known`.
pub fn judge<'a>(
    lang: Lang,
    step: &Step<'a>,
    after: &str,
    answer: &Answer,
    known: &mut Known<'a>,
    tally: &mut Tally,
) {
    tally.edits += 1;
    let counted_before = tally.counted();
    let mut off = Vec::new();
    let reported = known.reported.entry(step.file).or_default();
    let expected_new: Vec<u32> = step.new_here.iter().map(|m| line_of(after, m)).collect();
    let standing: Vec<u32> = step.errors_here.iter().map(|m| line_of(after, m)).collect();
    match &answer.verdict {
        Verdict::Running => {
            tally.running += 1;
            off.push("still running".to_owned());
        }
        Verdict::Unavailable(why) => {
            tally.unavailable += 1;
            off.push(format!("unavailable: {why}"));
        }
        Verdict::Silent => {
            tally.unavailable += 1;
            off.push("no diagnostics line".to_owned());
        }
        Verdict::Fresh { new, unlisted, remaining, others } => {
            // "No new errors" where the file got one, or where only other files did and none
            // is named.
            let says_clean = new.is_empty() && *unlisted == 0;
            if says_clean && (!expected_new.is_empty() || (!step.breaks.is_empty() && others.is_empty())) {
                tally.false_clean += 1;
                off.push("false clean".to_owned());
            }
            for line in &expected_new {
                if !new.iter().any(|(l, _)| l == line) {
                    tally.missed += 1;
                    off.push(format!("missed: a new error at line {line}"));
                }
            }
            for (line, message) in new {
                if expected_new.contains(line) {
                    continue;
                }
                if standing.contains(line) {
                    tally.false_new += 1;
                    off.push(format!("false new: {line}: {message}"));
                } else if reported.iter().any(|(_, m)| m == message) {
                    tally.stale += 1;
                    off.push(format!("stale: {line}: {message}"));
                } else {
                    tally.unexpected += 1;
                    off.push(format!("unexpected: {line}: {message}"));
                }
            }
            for broken in step.breaks {
                let name = lang.relative(broken);
                if !others.iter().any(|(f, _)| f.ends_with(&name)) {
                    tally.missed += 1;
                    off.push(format!("missed: the new error in {name}"));
                }
            }
            for (file, count) in others {
                if step.breaks.iter().any(|b| file.ends_with(&lang.relative(b))) {
                    continue;
                }
                if known.broken.iter().any(|b| file.ends_with(&lang.relative(b))) {
                    tally.false_new += 1;
                    off.push(format!("false new: {file}: {count} (its errors were there before)"));
                } else if step.mends.iter().any(|m| file.ends_with(&lang.relative(m))) {
                    tally.stale += 1;
                    off.push(format!("stale: {file}: {count} (the edit took its errors away)"));
                } else {
                    tally.unexpected += 1;
                    off.push(format!("unexpected: {file}: {count}"));
                }
            }
            let expected_remaining = standing.len() - expected_new.len();
            if *remaining != expected_remaining {
                off.push(format!("(note: {remaining} said to remain, {expected_remaining} expected)"));
            }
            // What the text after holds, as this answer said it: its new errors (the old ones
            // keep their words).
            reported.retain(|(l, _)| standing.contains(l));
            reported.extend(new.iter().cloned());
        }
    }
    known.broken.extend(step.breaks.iter().copied());
    for m in step.mends {
        known.broken.remove(m);
    }
    if standing.is_empty() {
        known.broken.remove(step.file);
    } else {
        known.broken.insert(step.file);
    }
    if !off.is_empty() {
        let said: String = answer.text.chars().take(300).collect();
        let text = format!(
            "{} {:?} ({}): {}; the answer ended {said:?}",
            lang.server(),
            step.what,
            step.file,
            off.join("; ")
        );
        tally.notes.push(Note { counted: tally.counted() > counted_before, text });
    }
}

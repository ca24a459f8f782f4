//! `filectx history`, `filectx diff` and `filectx undo`: the journal for people. History lists
//! the changes newest first, one aligned line each with its diff stat; diff prints one entry's
//! unified diff; undo restores entries (one, a file's last, or a whole session's newest first,
//! stopping at the first that is stale and printing each restore as it lands).

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use filectx_client::terminal::{escape_field, escape_json, escape_text};
use filectx_client::{Client, ClientError, JOURNAL_MAX_PAGE};
use filectx_protocol::{
    FsErrorCode, JournalEntry, JournalListParams, JournalOperation, JournalRestoreParams, OUTSIDE_SESSION,
    features,
};

/// What `filectx history` asks for.
#[derive(Debug)]
pub(crate) struct History {
    /// Files or folders (empty: everything under the session's roots).
    pub(crate) paths: Vec<String>,
    pub(crate) session_id: Option<String>,
    pub(crate) owner: Option<String>,
    /// `--since`, as a span back from now.
    pub(crate) since: Option<Duration>,
    pub(crate) limit: u32,
}

/// What `filectx undo` restores.
#[derive(Debug)]
pub(crate) enum Undo {
    /// These entries, in the order given.
    Entries(Vec<String>),
    /// The newest change to this file (or to anything under this folder).
    Last(String),
    /// Every change of this session (and owner, when given), newest first.
    Session { id: String, owner: Option<String> },
}

/// A journal command could not do its work (no journal, nothing to undo), or `filectx undo`
/// stopped: what failed, and the change that made it stale when the daemon sent one. Printed as
/// the failure message (exit 4), after the restores that landed.
#[derive(Debug, thiserror::Error)]
#[error("{message}{}", diff.as_deref().map(|d| format!("\n{}", d.trim_end())).unwrap_or_default())]
pub(crate) struct UndoStopped {
    message: String,
    diff: Option<String>,
}

/// Refuses, before anything is asked, when the daemon keeps no journal.
fn require_journal(client: &Client) -> Result<(), UndoStopped> {
    if client.has_feature(features::JOURNAL) {
        return Ok(());
    }
    Err(UndoStopped {
        message: "the daemon keeps no journal (it runs with journal = false or --no-journal, or it is \
                  an older filectxd): there is no history to show or undo"
            .to_owned(),
        diff: None,
    })
}

/// An entry id as a person may type it: `57` or `#57`.
pub(crate) fn entry_id(text: &str) -> Result<String, String> {
    let id = text.trim().trim_start_matches('#');
    if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
        Ok(id.to_owned())
    } else {
        Err(format!("{text:?} is not a journal entry (a number, as `filectx history` shows it)"))
    }
}

/// `--since 90s | 10m | 2h | 3d | 1w`: a span back from now.
pub(crate) fn parse_since(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(n) if seconds > 0 && n > 0 => Ok(Duration::from_secs(n.saturating_mul(seconds))),
        _ => Err(format!("{text:?} is not a span such as 90s, 10m, 2h, 3d or 1w")),
    }
}

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The entries `history` shows, newest first, and whether more matched than `limit`.
async fn history_entries(
    client: &Client,
    history: &History,
) -> Result<(Vec<JournalEntry>, bool), ClientError> {
    let since = history
        .since
        .map(|span| now_ms().saturating_sub(u64::try_from(span.as_millis()).unwrap_or(u64::MAX)));
    let query = |path: Option<String>| JournalListParams {
        path,
        session_id: history.session_id.clone(),
        owner: history.owner.clone(),
        since,
        cursor: None,
        limit: Some(history.limit),
    };
    let paths: Vec<Option<String>> =
        if history.paths.is_empty() { vec![None] } else { history.paths.iter().cloned().map(Some).collect() };
    let mut entries = Vec::new();
    let mut more = false;
    for path in paths {
        let page = client.journal_list(query(path)).await?;
        more |= page.cursor.is_some();
        entries.extend(page.entries);
    }
    // Several paths may list one entry twice (a file and its folder).
    entries.sort_by_key(|entry| std::cmp::Reverse(entry.seq));
    entries.dedup_by_key(|entry| entry.seq);
    let limit = usize::try_from(history.limit).unwrap_or(usize::MAX);
    more |= entries.len() > limit;
    entries.truncate(limit);
    Ok((entries, more))
}

/// `filectx history`: a header and one line per entry, newest first; `--json`: `{"entries":
/// [...], "more": bool}`.
pub(crate) async fn history(client: &Client, history: History, json: bool) -> anyhow::Result<String> {
    require_journal(client)?;
    let (entries, more) = history_entries(client, &history).await?;
    if json {
        let value = serde_json::json!({"entries": entries, "more": more});
        return Ok(format!("{}\n", escape_json(&serde_json::to_string_pretty(&value)?)));
    }
    Ok(render_history(&entries, more, now_ms(), history.limit))
}

/// The history table: ENTRY, WHEN (how long ago), WHAT, PATH, CHANGE (+added -removed) and BY
/// (client/owner and session), columns aligned; a last line when more entries matched.
pub(crate) fn render_history(entries: &[JournalEntry], more: bool, now: u64, limit: u32) -> String {
    if entries.is_empty() {
        return "no changes recorded (the journal lists only changes to files under the session's \
                roots: --root DIR, or cd into the project)\n"
            .to_owned();
    }
    let rows: Vec<[String; 6]> = entries
        .iter()
        .map(|entry| {
            [
                entry.entry.clone(),
                ago(now.saturating_sub(entry.time)),
                entry.operation.as_str().to_owned(),
                escape_field(&entry.display_path).into_owned(),
                change(entry),
                by(entry),
            ]
        })
        .collect();
    let header = ["ENTRY", "WHEN", "WHAT", "PATH", "CHANGE", "BY"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            // The entry number is right-aligned; the last column is not padded.
            match i {
                0 => line.push_str(&format!("{cell:>w$}", w = widths[0])),
                5 => line.push_str(cell),
                _ => line.push_str(&format!("{cell:<w$}", w = widths[i])),
            }
            if i < 5 {
                line.push_str("  ");
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    if more {
        text.push_str(&format!(
            "(only the newest {limit}: --limit N for more, or narrow with PATH, --session or --since)\n"
        ));
    }
    text
}

/// `12s ago`, `5m ago`, `3h ago`, `2d ago`.
fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..172_800 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

/// `+3 -1`, `?` when the daemon could not count lines, and `(not restorable)` when the content
/// before it was not kept.
fn change(entry: &JournalEntry) -> String {
    let stat = match (entry.added, entry.removed) {
        (Some(added), Some(removed)) => format!("+{added} -{removed}"),
        _ => "?".to_owned(),
    };
    if entry.restorable { stat } else { format!("{stat} (not restorable)") }
}

/// `claude-code/reviewer (1234-5)`, `filectx (1234-6)`, or `outside` for a change the daemon
/// saw but did not make.
fn by(entry: &JournalEntry) -> String {
    if entry.operation == JournalOperation::Outside || entry.session_id == OUTSIDE_SESSION {
        return "outside (not through filectx)".to_owned();
    }
    let client = entry.client_name.as_deref().unwrap_or("?");
    let who = match &entry.owner {
        Some(owner) => format!("{client}/{owner}"),
        None => client.to_owned(),
    };
    format!("{} (session {})", escape_field(&who), escape_field(&entry.session_id))
}

/// `filectx diff ENTRY`: the entry's unified diff, its lines as file content is printed (escaped
/// on a terminal) and the file's name always escaped, and a line saying so when it was cut or no
/// line differs.
pub(crate) async fn diff(client: &Client, entry: &str, json: bool) -> anyhow::Result<String> {
    require_journal(client)?;
    let result = client.journal_diff(entry).await?;
    if json {
        return Ok(format!("{}\n", escape_json(&serde_json::to_string_pretty(&result)?)));
    }
    if result.diff.is_empty() {
        return Ok(format!("entry {entry} changed no line (only bytes a line view hides, or nothing)\n"));
    }
    let mut text = shown_diff(&result.diff, std::io::stdout().is_terminal());
    if !text.ends_with('\n') {
        text.push('\n');
    }
    if result.truncated {
        text.push_str("(diff cut at 200 lines or 16 KiB)\n");
    }
    Ok(text)
}

/// A unified diff for stdout: the file's name in its two header lines (`--- NAME (before)`,
/// `+++ NAME (after)`) always escaped, as every name is (piped too); the rest as file content is
/// printed: escaped on a `terminal`, as it is otherwise. A diff not in that shape is escaped
/// whole.
fn shown_diff(diff: &str, terminal: bool) -> String {
    match split_header(diff) {
        Some(header) => format!(
            "--- {name} ({})\n+++ {name} ({})\n{}",
            escape_field(header.old),
            escape_field(header.new),
            if terminal { escape_text(header.rest) } else { header.rest.into() },
            name = escape_field(header.name)
        ),
        None => escape_text(diff).into_owned(),
    }
}

/// The two file header lines of a unified diff the daemon made, and what follows them.
#[derive(Debug, PartialEq, Eq)]
struct DiffHeader<'a> {
    /// The file's name, as both lines give it.
    name: &'a str,
    /// The label of each side (`before`, `after`).
    old: &'a str,
    new: &'a str,
    /// The hunks.
    rest: &'a str,
}

/// Splits `--- NAME (OLD)\n+++ NAME (NEW)\n` off `diff`: NAME is the same text twice and may
/// hold anything (a newline, ` (`, `+++ `), the labels no newline. Of the readings that fit, the
/// one with the longest name is taken: its header runs at least as far as the true one's, so no
/// part of the name is ever printed as content.
fn split_header(diff: &str) -> Option<DiffHeader<'_>> {
    let after = diff.strip_prefix("--- ")?;
    let ends: Vec<usize> = after.match_indices(" (").map(|(at, _)| at).collect();
    ends.into_iter().rev().find_map(|end| {
        let name = &after[..end];
        let (old, rest) = after[end + 2..].split_once('\n')?;
        let old = old.strip_suffix(')')?;
        let rest = rest.strip_prefix("+++ ")?.strip_prefix(name)?.strip_prefix(" (")?;
        let (new, rest) = rest.split_once('\n')?;
        let new = new.strip_suffix(')')?;
        Some(DiffHeader { name, old, new, rest })
    })
}

/// `filectx undo`: restores each entry in turn, printing a line (or, with `--json`, the
/// `journal/restore` result) as each lands; stops at the first that fails.
pub(crate) async fn undo(client: &Client, undo: Undo, force: bool, json: bool) -> anyhow::Result<String> {
    require_journal(client)?;
    let targets: Vec<(String, Option<String>)> = match undo {
        Undo::Entries(entries) => entries.into_iter().map(|entry| (entry, None)).collect(),
        Undo::Last(path) => {
            let params = JournalListParams { path: Some(path.clone()), limit: Some(1), ..Default::default() };
            let page = client.journal_list(params).await?;
            match page.entries.into_iter().next() {
                Some(newest) => vec![(newest.entry, Some(newest.display_path))],
                None => {
                    return Err(UndoStopped {
                        message: format!(
                            "nothing to undo: the journal has no change to {}",
                            escape_field(&path)
                        ),
                        diff: None,
                    }
                    .into());
                }
            }
        }
        Undo::Session { id, owner } => {
            let params = JournalListParams {
                session_id: Some(id.clone()),
                owner,
                limit: Some(JOURNAL_MAX_PAGE),
                ..Default::default()
            };
            let entries = client.journal_list_all(params).await?;
            if entries.is_empty() {
                return Err(UndoStopped {
                    message: format!(
                        "nothing to undo: the journal has no change of session {} under the roots",
                        escape_field(&id)
                    ),
                    diff: None,
                }
                .into());
            }
            entries.into_iter().map(|entry| (entry.entry, Some(entry.display_path))).collect()
        }
    };
    let total = targets.len();
    for (done, (entry, path)) in targets.into_iter().enumerate() {
        let params = JournalRestoreParams { entry: entry.clone(), force, owner: None };
        let line = match client.journal_restore(params).await {
            Ok(result) if json => format!("{}\n", escape_json(&serde_json::to_string(&result)?)),
            Ok(result) => {
                let what = if result.version.is_some() { "restored" } else { "removed" };
                format!(
                    "{what} {} as it was before entry {entry} (undo this with: filectx undo {})\n",
                    escape_field(&result.display_path),
                    result.entry
                )
            }
            Err(error) => return Err(stopped(&error, &entry, path.as_deref(), done, total).into()),
        };
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(line.as_bytes()).and_then(|()| stdout.flush())?;
    }
    Ok(String::new())
}

/// Why `undo` stopped at `entry` (the `done`th of `total`), and what to do about it.
fn stopped(error: &ClientError, entry: &str, path: Option<&str>, done: usize, total: usize) -> UndoStopped {
    let data_path = match error {
        ClientError::Rpc { data: Some(data), .. } => data.get("path").and_then(serde_json::Value::as_str),
        _ => None,
    };
    let at = match path.or(data_path) {
        Some(path) => format!("entry {entry} ({})", escape_field(path)),
        None => format!("entry {entry}"),
    };
    let (head, rest) = if total > 1 {
        (format!("stopped at {at}"), format!("; {done} of {total} undone, nothing older changed"))
    } else {
        (format!("{at} not undone"), String::new())
    };
    let message = match (error.fs_code(), error) {
        (Some(FsErrorCode::StaleVersion), _) => {
            let shown = if error.stale_diff().is_some() { " (below)" } else { "" };
            format!(
                "FS_STALE_VERSION: {head}: the file changed since{shown}{rest}; --force undoes it anyway, \
                 overwriting that change"
            )
        }
        (Some(code), ClientError::Rpc { message, .. }) => format!("{code}: {head}: {message}{rest}"),
        (_, other) => format!("{head}: {other}{rest}"),
    };
    UndoStopped { message, diff: error.stale_diff().map(str::to_owned) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The time the tests render at (ms since the epoch).
    const NOW: u64 = 1_800_000_000_000;

    fn entry(seq: u64, operation: JournalOperation, path: &str) -> JournalEntry {
        JournalEntry {
            entry: seq.to_string(),
            seq,
            time: NOW - 12_000,
            path: format!("/p/{path}"),
            display_path: path.to_owned(),
            session_id: "4242-7".to_owned(),
            client_name: Some("claude-code".to_owned()),
            owner: None,
            operation,
            before: Some("b3-1".to_owned()),
            after: Some("b3-2".to_owned()),
            restorable: true,
            added: Some(3),
            removed: Some(1),
        }
    }

    #[test]
    fn history_lines_are_aligned_newest_first_with_who_made_them() {
        let mut outside = entry(9, JournalOperation::Outside, "notes.md");
        outside.session_id = OUTSIDE_SESSION.to_owned();
        outside.client_name = None;
        outside.time = NOW - 3_600_000;
        let mut big = entry(7, JournalOperation::Create, "data/big.json");
        big.owner = Some("reviewer".to_owned());
        big.restorable = false;
        big.added = None;
        big.time = NOW - 3 * 86_400_000;
        let text =
            render_history(&[entry(12, JournalOperation::Edit, "src/lib.rs"), outside, big], true, NOW, 3);
        expect_test::expect![[r#"
            ENTRY  WHEN     WHAT     PATH           CHANGE              BY
               12  12s ago  edit     src/lib.rs     +3 -1               claude-code (session 4242-7)
                9  1h ago   outside  notes.md       +3 -1               outside (not through filectx)
                7  3d ago   create   data/big.json  ? (not restorable)  claude-code/reviewer (session 4242-7)
            (only the newest 3: --limit N for more, or narrow with PATH, --session or --since)
        "#]]
        .assert_eq(&text);
        assert!(render_history(&[], false, 0, 50).starts_with("no changes recorded"));
    }

    #[test]
    fn a_diffs_header_names_the_file_escaped_even_when_the_name_mimics_a_header() {
        let plain = "--- src/a.rs (before)\n+++ src/a.rs (after)\n@@ -1,1 +1,1 @@\n-x\n+y\n";
        let header = split_header(plain);
        assert_eq!(
            header,
            Some(DiffHeader {
                name: "src/a.rs",
                old: "before",
                new: "after",
                rest: "@@ -1,1 +1,1 @@\n-x\n+y\n"
            })
        );
        assert_eq!(shown_diff(plain, false), plain);
        assert_eq!(shown_diff(plain, true), plain);

        let hostile = "n\u{1b}]0;x\u{7}\r\u{202e}.txt";
        let diff =
            format!("--- {hostile} (before)\n+++ {hostile} (after)\n@@ -1,1 +1,1 @@\n-a\r\u{1b}[2K\n+b\n");
        // Piped: the name escaped, the lines as they are; on a terminal, the lines escaped too.
        let name = r"n\x1b]0;x\x07\r\u{202e}.txt";
        let header = format!("--- {name} (before)\n+++ {name} (after)\n@@ -1,1 +1,1 @@\n");
        assert_eq!(shown_diff(&diff, false), format!("{header}-a\r\u{1b}[2K\n+b\n"));
        assert_eq!(shown_diff(&diff, true), format!("{header}-a\\r\\x1b[2K\n+b\n"));

        // A name that holds a newline and a whole fake header: never split into content.
        let mimic = "x (y)\n+++ x (z)\n@@ -1 +1 @@\n\u{1b}[2J";
        let diff = format!("--- {mimic} (before)\n+++ {mimic} (after)\n@@ -1,1 +1,1 @@\n-a\n+b\n");
        let header = split_header(&diff).map(|h| (h.name, h.rest));
        assert_eq!(header, Some((mimic, "@@ -1,1 +1,1 @@\n-a\n+b\n")));
        let shown = shown_diff(&diff, false);
        assert!(!shown.contains('\u{1b}'), "{shown:?}");
        assert_eq!(shown.lines().count(), 5, "{shown:?}");

        // Not a header at all: escaped whole.
        assert_eq!(shown_diff("@@ -1 +1 @@\n-\u{1b}\n", false), "@@ -1 +1 @@\n-\\x1b\n");
    }

    #[test]
    fn entries_and_spans_are_checked() {
        assert_eq!(entry_id("#57"), Ok("57".to_owned()));
        assert_eq!(entry_id(" 8 "), Ok("8".to_owned()));
        assert!(entry_id("57a").is_err() && entry_id("#").is_err() && entry_id("-1").is_err());
        assert_eq!(parse_since("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_since("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_since("1w"), Ok(Duration::from_secs(604_800)));
        assert!(parse_since("2").is_err() && parse_since("h").is_err() && parse_since("0m").is_err());
        assert!(parse_since("3 days").is_err());
    }

    #[test]
    fn a_stale_stop_says_where_how_far_and_what_to_do() {
        let data = serde_json::json!({"code": "FS_STALE_VERSION", "diff": "--- a\n+++ b\n-x\n+y\n"});
        let error = ClientError::Rpc { code: -31009, message: "changed".to_owned(), data: Some(data) };
        let text = stopped(&error, "41", Some("src/a.rs"), 2, 5).to_string();
        assert!(
            text.starts_with(
                "FS_STALE_VERSION: stopped at entry 41 (src/a.rs): the file changed since (below); 2 of 5 \
                 undone, nothing older changed; --force undoes it anyway, overwriting that change\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("\n--- a\n+++ b\n-x\n+y"), "{text}");
        let error = ClientError::Rpc {
            code: -31013,
            message: "entry 3 of a.rs cannot be restored".to_owned(),
            data: Some(serde_json::json!({"code": "FS_TOO_LARGE"})),
        };
        assert_eq!(
            stopped(&error, "3", None, 0, 1).to_string(),
            "FS_TOO_LARGE: entry 3 not undone: entry 3 of a.rs cannot be restored"
        );
    }
}

//! The `glob` tool: the files under a folder whose relative path matches a glob, newest first,
//! within the session's read budget and [`GLOB_MAX_PATHS`].

use filectx_protocol::tools::GLOB_MAX_PATHS;

use super::answer::{FOOTER_ROOM, SearchError, listing_timed_out};
use crate::context::{FileContext, Globbed};
use crate::search::{Clock, PathMatch, SearchLimits};

/// `glob`: the files under `path` whose path relative to it matches `pattern`, newest first.
pub fn glob(
    ctx: &FileContext<'_>,
    pattern: &str,
    path: Option<&str>,
    (budget, escaped): (u64, bool),
    limits: &SearchLimits<'_>,
) -> Result<String, SearchError> {
    let matcher = PathMatch::new(pattern)?;
    let clock = Clock::new(limits);
    // It shows at most GLOB_MAX_PATHS: only the first of its hits are sorted up front.
    let mut hits = match ctx.glob(&matcher, path, &clock, GLOB_MAX_PATHS * 2)? {
        Globbed::Hits(hits) => hits,
        Globbed::ListingTimedOut { path } => return Ok(listing_timed_out(&clock, &path)),
    };
    let room = usize::try_from(budget).unwrap_or(usize::MAX).saturating_sub(FOOTER_ROOM);
    let mut text = String::new();
    // Bytes of the budget the text takes: its bytes, or as JSON escapes it.
    let mut used = 0usize;
    let cost = |line: &str| if escaped { crate::json::escaped_len(line) + 2 } else { line.len() + 1 };
    let mut shown = 0usize;
    let mut more = 0usize;
    while let Some(file) = hits.next() {
        let file = &file;
        hits.go_on(&clock)?;
        if shown >= GLOB_MAX_PATHS {
            // The rest are counted, never built.
            more += 1 + hits.left();
            break;
        }
        let line = cost(&file.display);
        if used + line > room {
            more += 1;
            continue;
        }
        // Listed only while it is still a file reached through no symlink.
        if !hits.still_listed(file) {
            continue;
        }
        text.push_str(&file.display);
        text.push('\n');
        used += line;
        shown += 1;
    }
    if shown == 0 && more == 0 {
        text.push_str("No files found");
        if hits.truncated() {
            text.push_str(" (the folder has too many files to list them all: narrow the path)");
        }
        return Ok(text);
    }
    if more > 0 {
        text.push_str(&format!(
            "\n({more} more matching files not shown; at most {GLOB_MAX_PATHS} paths are listed. Narrow the pattern or path.)"
        ));
    }
    if hits.truncated() {
        text.push_str("\n(The folder has too many files: only part of it was listed. Narrow the path.)");
    }
    Ok(text.trim_end_matches('\n').to_owned())
}

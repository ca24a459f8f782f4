//! The `glob` tool: the files under a folder whose relative path matches a glob, newest first,
//! within the session's read budget and [`GLOB_MAX_PATHS`].

use filectx_protocol::tools::GLOB_MAX_PATHS;
use globset::GlobBuilder;

use super::bounds::{Budget, FOOTER_ROOM, Limits, SearchError, cancelled, listed};
use crate::context::FileContext;
use crate::context::search::SearchFile;

/// `glob`: the files under `path` whose path relative to it matches `pattern`, newest first.
pub fn glob(
    ctx: &FileContext<'_>,
    pattern: &str,
    path: Option<&str>,
    budget: u64,
    limits: &Limits<'_>,
) -> Result<String, SearchError> {
    let matcher = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| SearchError::Invalid(format!("The glob pattern is not valid: {e}.")))?
        .compile_matcher();
    let clock = Budget::new(limits);
    let files = match listed(ctx, path, &clock)? {
        Ok(files) => files,
        Err(answer) => return Ok(answer),
    };
    let mut hits: Vec<SearchFile> = (0..files.len())
        .filter(|&i| matcher.is_match(files.under(i)))
        .filter_map(|i| ctx.search_file(&files, i))
        .collect();
    hits.sort_by(|a, b| b.mtime_ns.cmp(&a.mtime_ns).then_with(|| a.display.cmp(&b.display)));
    let room = usize::try_from(budget).unwrap_or(usize::MAX).saturating_sub(FOOTER_ROOM);
    let mut text = String::new();
    let mut shown = 0usize;
    let mut more = 0usize;
    for file in &hits {
        if clock.cancelled() {
            return Err(cancelled(&files));
        }
        if shown >= GLOB_MAX_PATHS || text.len() + file.display.len() + 1 > room {
            more += 1;
            continue;
        }
        // Listed only while it is still a file reached through no symlink.
        if !ctx.still_listed(&files, file) {
            continue;
        }
        text.push_str(&file.display);
        text.push('\n');
        shown += 1;
    }
    if shown == 0 && more == 0 {
        text.push_str("No files found");
        if files.truncated {
            text.push_str(" (the folder has too many files to list them all: narrow the path)");
        }
        return Ok(text);
    }
    if more > 0 {
        text.push_str(&format!(
            "\n({more} more matching files not shown; at most {GLOB_MAX_PATHS} paths are listed. Narrow the pattern or path.)"
        ));
    }
    if files.truncated {
        text.push_str("\n(The folder has too many files: only part of it was listed. Narrow the path.)");
    }
    Ok(text.trim_end_matches('\n').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn is_match(pattern: &str, path: &str) -> bool {
        GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .unwrap()
            .compile_matcher()
            .is_match(Path::new(path))
    }

    #[test]
    fn globs_match_like_ripgrep() {
        assert!(is_match("**/*.rs", "a.rs"));
        assert!(is_match("**/*.rs", "src/deep/a.rs"));
        assert!(!is_match("*.rs", "src/a.rs"), "* stays within a folder");
        assert!(is_match("src/**/*.{ts,tsx}", "src/x/y.tsx"));
    }
}

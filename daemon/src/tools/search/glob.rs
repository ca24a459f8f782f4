//! The `glob` tool: the files under a folder whose relative path matches a glob, newest first,
//! within the session's read budget and [`GLOB_MAX_PATHS`].

use filectx_protocol::tools::GLOB_MAX_PATHS;
use globset::GlobBuilder;

use super::bounds::{Budget, FOOTER_ROOM, Limits, SearchError, SearchListed, cancelled, listed};
use crate::context::FileContext;
use crate::context::search::SearchFile;

/// `glob`: the files under `path` whose path relative to it matches `pattern`, newest first.
pub fn glob(
    ctx: &FileContext<'_>,
    pattern: &str,
    path: Option<&str>,
    (budget, escaped): (u64, bool),
    limits: &Limits<'_>,
) -> Result<String, SearchError> {
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| SearchError::Invalid(format!("The glob pattern is not valid: {e}.")))?;
    let matcher = PathMatch::new(pattern, glob)?;
    let clock = Budget::new(limits);
    // Only the files that match are sorted by time: the walk dates those alone.
    let files = match listed(ctx, path, &clock, Some(&|path| matcher.is_match(path)))? {
        SearchListed::Files(files) => files,
        SearchListed::TimedOut(answer) => return Ok(answer),
    };
    // Newest first, the shown path breaking ties; only the files shown get their path built.
    let mut hits: Vec<(i64, usize)> = (0..files.len())
        .filter(|&i| matcher.is_match(files.under(i)) && !ctx.search_hidden(&files, i))
        .map(|i| (files.mtime_ns(i), i))
        .collect();
    let mut hits = Newest::new(ctx, &files, &mut hits);
    let room = usize::try_from(budget).unwrap_or(usize::MAX).saturating_sub(FOOTER_ROOM);
    let mut text = String::new();
    // Bytes of the budget the text takes: its bytes, or as JSON escapes it.
    let mut used = 0usize;
    let cost = |line: &str| if escaped { crate::json::escaped_len(line) + 2 } else { line.len() + 1 };
    let mut shown = 0usize;
    let mut more = 0usize;
    while let Some(file) = hits.next() {
        let file = &file;
        if clock.cancelled() {
            return Err(cancelled(&files));
        }
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
        if !ctx.still_listed(&files, file) {
            continue;
        }
        text.push_str(&file.display);
        text.push('\n');
        used += line;
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

/// What a glob matches paths with: the commonest globs by their bytes, any other with a glob set.
enum PathMatch {
    /// `**/*TAIL` (`**/*.rs`, `**/*_test.go`): the path ends with the tail.
    Suffix(Vec<u8>),
    /// `**/NAME` (`**/build.rs`): the path is the name, or ends with `/` and the name.
    Name(Vec<u8>),
    /// A set of one, not a `GlobMatcher`: a set matches by extension, name or literal where it
    /// can, and a lone matcher runs its regex on every path.
    Set(globset::GlobSet),
}

impl PathMatch {
    fn new(pattern: &str, glob: globset::Glob) -> Result<Self, SearchError> {
        let literal =
            |tail: &str| !tail.is_empty() && !tail.contains(['*', '?', '[', ']', '{', '}', '\\', '/']);
        if let Some(tail) = pattern.strip_prefix("**/*").filter(|tail| literal(tail)) {
            return Ok(Self::Suffix(tail.as_bytes().to_vec()));
        }
        if let Some(name) = pattern.strip_prefix("**/").filter(|name| literal(name)) {
            return Ok(Self::Name(name.as_bytes().to_vec()));
        }
        globset::GlobSetBuilder::new()
            .add(glob)
            .build()
            .map(Self::Set)
            .map_err(|e| SearchError::Invalid(format!("The glob pattern is not valid: {e}.")))
    }

    /// Whether `path` (relative to the searched folder) matches.
    fn is_match(&self, path: &std::path::Path) -> bool {
        use std::os::unix::ffi::OsStrExt as _;
        let bytes = path.as_os_str().as_bytes();
        match self {
            Self::Suffix(tail) => bytes.ends_with(tail),
            Self::Name(name) => {
                bytes.ends_with(name)
                    && (bytes.len() == name.len() || bytes[bytes.len() - name.len() - 1] == b'/')
            }
            Self::Set(set) => set.is_match(path),
        }
    }
}

/// The hits of a glob in the order it shows them, each built as it is reached: newest first,
/// files of the same time in the order of their shown paths.
struct Newest<'a, 'c> {
    ctx: &'a FileContext<'c>,
    files: &'a crate::context::search::SearchFiles,
    hits: Times<'a>,
    /// The rest of the current group of one time, in reverse order of their paths.
    tied: Vec<SearchFile>,
}

impl<'a, 'c> Newest<'a, 'c> {
    fn new(
        ctx: &'a FileContext<'c>,
        files: &'a crate::context::search::SearchFiles,
        hits: &'a mut [(i64, usize)],
    ) -> Self {
        Self { ctx, files, hits: Times::new(hits, GLOB_MAX_PATHS * 2), tied: Vec::new() }
    }

    /// How many hits are still to come.
    fn left(&self) -> usize {
        self.tied.len() + self.hits.left()
    }
}

impl Iterator for Newest<'_, '_> {
    type Item = SearchFile;

    fn next(&mut self) -> Option<SearchFile> {
        if let Some(file) = self.tied.pop() {
            return Some(file);
        }
        let group = self.hits.next_group()?;
        self.tied = group.iter().filter_map(|&(_, i)| self.ctx.search_file(self.files, i)).collect();
        self.tied.sort_by(|a, b| b.display.cmp(&a.display));
        self.tied.pop().or_else(|| self.next())
    }
}

/// (time, listing index) pairs handed out newest first, a group of one time at a time. Only
/// the first few are sorted at first (a glob shows at most [`GLOB_MAX_PATHS`]; the sort of all
/// 20,000 hits of a big tree was half of a repeated glob: 5.0 ms, 2.3 ms without); the rest
/// when they are reached.
struct Times<'a> {
    /// Newest first up to `sorted`.
    hits: &'a mut [(i64, usize)],
    sorted: usize,
    at: usize,
}

/// Newest first, then by listing index: a total order, so the first `k` after a selection are
/// the first `k` of a sort.
fn newest(a: &(i64, usize), b: &(i64, usize)) -> std::cmp::Ordering {
    b.0.cmp(&a.0).then(a.1.cmp(&b.1))
}

impl<'a> Times<'a> {
    /// `hits` with the first `first` of them sorted.
    fn new(hits: &'a mut [(i64, usize)], first: usize) -> Self {
        let sorted = if first < hits.len() {
            hits.select_nth_unstable_by(first, newest);
            hits[..first].sort_unstable_by(newest);
            first
        } else {
            hits.sort_unstable_by(newest);
            hits.len()
        };
        Self { hits, sorted, at: 0 }
    }

    fn left(&self) -> usize {
        self.hits.len() - self.at
    }

    /// The next hits of one time (all of them, however many).
    fn next_group(&mut self) -> Option<&[(i64, usize)]> {
        if self.at == self.hits.len() {
            return None;
        }
        let group = |hits: &[(i64, usize)], at: usize, end: usize| {
            hits[at..end].iter().take_while(|(t, _)| *t == hits[at].0).count()
        };
        let mut same = if self.at < self.sorted { group(self.hits, self.at, self.sorted) } else { 0 };
        if self.at + same == self.sorted && self.sorted < self.hits.len() {
            // The sorted part ends here, and the rest may go on with this time.
            self.hits[self.sorted..].sort_unstable_by(newest);
            self.sorted = self.hits.len();
            same = group(self.hits, self.at, self.sorted);
        }
        let at = self.at;
        self.at += same;
        Some(&self.hits[at..at + same])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Handed out a group at a time with only the first few sorted, the hits come in the
        /// order of a full sort, each group all of one time and no time split over two.
        #[test]
        fn times_come_in_the_order_of_a_sort(
            times in proptest::collection::vec(0i64..6, 0..40),
            first in 0usize..12,
        ) {
            let mut hits: Vec<(i64, usize)> = times.iter().copied().zip(0..).collect();
            let mut sorted = hits.clone();
            sorted.sort_by(newest);
            let mut times = Times::new(&mut hits, first);
            let mut seen: Vec<(i64, usize)> = Vec::new();
            while let Some(group) = times.next_group() {
                proptest::prop_assert!(!group.is_empty() && group.iter().all(|h| h.0 == group[0].0));
                proptest::prop_assert!(seen.last().is_none_or(|last| last.0 > group[0].0));
                seen.extend_from_slice(group);
            }
            proptest::prop_assert_eq!(seen, sorted);
        }
    }

    #[test]
    fn the_byte_matchers_agree_with_the_glob_set() {
        let paths = [
            "a.rs",
            "src/a.rs",
            "src/a.rs.bak",
            "src/ars",
            ".rs",
            "x/.rs",
            "build.rs",
            "a/build.rs",
            "a/xbuild.rs",
            "a/build.rs/x",
            "a/b/c_test.go",
            "c_test.go",
            "test.go",
            "a.RS",
        ];
        for pattern in ["**/*.rs", "**/*_test.go", "**/build.rs", "**/*.go", "**/c_test.go"] {
            let glob = || GlobBuilder::new(pattern).literal_separator(true).build().unwrap();
            let fast = PathMatch::new(pattern, glob()).ok().unwrap();
            assert!(!matches!(fast, PathMatch::Set(_)), "{pattern} is matched by bytes");
            let set = globset::GlobSetBuilder::new().add(glob()).build().unwrap();
            for path in paths {
                let path = std::path::Path::new(path);
                assert_eq!(fast.is_match(path), set.is_match(path), "{pattern} on {}", path.display());
            }
        }
        for pattern in ["*.rs", "src/**/*.rs", "**/*.{ts,tsx}", "**/a*.rs", "**/*"] {
            let glob = GlobBuilder::new(pattern).literal_separator(true).build().unwrap();
            assert!(matches!(PathMatch::new(pattern, glob).ok(), Some(PathMatch::Set(_))), "{pattern}");
        }
    }
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

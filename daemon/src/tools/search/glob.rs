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
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| SearchError::Invalid(format!("The glob pattern is not valid: {e}.")))?;
    let matcher = PathMatch::new(pattern, glob)?;
    let clock = Budget::new(limits);
    // Only the files that match are sorted by time: the walk dates those alone.
    let files = match listed(ctx, path, &clock, Some(&|path| matcher.is_match(path)))? {
        Ok(files) => files,
        Err(answer) => return Ok(answer),
    };
    // Newest first, the shown path breaking ties; only the files shown get their path built.
    let mut hits: Vec<(i64, usize)> = (0..files.len())
        .filter(|&i| matcher.is_match(files.under(i)) && !ctx.search_hidden(&files, i))
        .map(|i| (files.mtime_ns(i), i))
        .collect();
    hits.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut hits = Newest { ctx, files: &files, hits: &hits, at: 0, tied: Vec::new() };
    let room = usize::try_from(budget).unwrap_or(usize::MAX).saturating_sub(FOOTER_ROOM);
    let mut text = String::new();
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
        if text.len() + file.display.len() + 1 > room {
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
    /// (time, listing index), newest first.
    hits: &'a [(i64, usize)],
    at: usize,
    /// The rest of the current group of one time, in reverse order of their paths.
    tied: Vec<SearchFile>,
}

impl Newest<'_, '_> {
    /// How many hits are still to come.
    fn left(&self) -> usize {
        self.tied.len() + self.hits.len() - self.at
    }
}

impl Iterator for Newest<'_, '_> {
    type Item = SearchFile;

    fn next(&mut self) -> Option<SearchFile> {
        if let Some(file) = self.tied.pop() {
            return Some(file);
        }
        let (time, _) = *self.hits.get(self.at)?;
        let same = self.hits[self.at..].iter().take_while(|(t, _)| *t == time).count();
        let group = &self.hits[self.at..self.at + same];
        self.at += same;
        self.tied = group.iter().filter_map(|&(_, i)| self.ctx.search_file(self.files, i)).collect();
        self.tied.sort_by(|a, b| b.display.cmp(&a.display));
        self.tied.pop().or_else(|| self.next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

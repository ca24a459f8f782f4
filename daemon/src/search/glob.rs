//! A glob's matching and ordering: which paths a glob pattern matches (the commonest globs by
//! their bytes), and its hits handed out newest first, a group of one time at a time.

use globset::GlobBuilder;

use super::query::InvalidQuery;

/// What a glob matches paths with: the commonest globs by their bytes, any other with a glob set.
pub enum PathMatch {
    /// `**/*TAIL` (`**/*.rs`, `**/*_test.go`): the path ends with the tail.
    Suffix(Vec<u8>),
    /// `**/NAME` (`**/build.rs`): the path is the name, or ends with `/` and the name.
    Name(Vec<u8>),
    /// A set of one, not a `GlobMatcher`: a set matches by extension, name or literal where it
    /// can, and a lone matcher runs its regex on every path.
    Set(globset::GlobSet),
}

impl PathMatch {
    /// The matcher of `pattern`, or why it is not a valid glob.
    pub fn new(pattern: &str) -> Result<Self, InvalidQuery> {
        let invalid = |e: globset::Error| InvalidQuery(format!("The glob pattern is not valid: {e}."));
        let glob = GlobBuilder::new(pattern).literal_separator(true).build().map_err(invalid)?;
        let literal =
            |tail: &str| !tail.is_empty() && !tail.contains(['*', '?', '[', ']', '{', '}', '\\', '/']);
        if let Some(tail) = pattern.strip_prefix("**/*").filter(|tail| literal(tail)) {
            return Ok(Self::Suffix(tail.as_bytes().to_vec()));
        }
        if let Some(name) = pattern.strip_prefix("**/").filter(|name| literal(name)) {
            return Ok(Self::Name(name.as_bytes().to_vec()));
        }
        globset::GlobSetBuilder::new().add(glob).build().map(Self::Set).map_err(invalid)
    }

    /// Whether `path` (relative to the searched folder) matches.
    pub fn is_match(&self, path: &std::path::Path) -> bool {
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

/// (time, listing index) pairs handed out newest first, a group of one time at a time. Only
/// the first few are sorted at first (a glob shows at most `GLOB_MAX_PATHS`; the sort of all
/// 20,000 hits of a big tree was half of a repeated glob: 5.0 ms, 2.3 ms without); the rest
/// when they are reached.
#[derive(Debug)]
pub struct Times {
    /// Newest first up to `sorted`.
    hits: Vec<(i64, usize)>,
    sorted: usize,
    at: usize,
}

/// Newest first, then by listing index: a total order, so the first `k` after a selection are
/// the first `k` of a sort.
fn newest(a: &(i64, usize), b: &(i64, usize)) -> std::cmp::Ordering {
    b.0.cmp(&a.0).then(a.1.cmp(&b.1))
}

impl Times {
    /// `hits` with the first `first` of them sorted.
    pub fn new(mut hits: Vec<(i64, usize)>, first: usize) -> Self {
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

    /// How many hits are still to come.
    pub fn left(&self) -> usize {
        self.hits.len() - self.at
    }

    /// The next hits of one time (all of them, however many).
    pub fn next_group(&mut self) -> Option<&[(i64, usize)]> {
        if self.at == self.hits.len() {
            return None;
        }
        let group = |hits: &[(i64, usize)], at: usize, end: usize| {
            hits[at..end].iter().take_while(|(t, _)| *t == hits[at].0).count()
        };
        let mut same = if self.at < self.sorted { group(&self.hits, self.at, self.sorted) } else { 0 };
        if self.at + same == self.sorted && self.sorted < self.hits.len() {
            // The sorted part ends here, and the rest may go on with this time.
            self.hits[self.sorted..].sort_unstable_by(newest);
            self.sorted = self.hits.len();
            same = group(&self.hits, self.at, self.sorted);
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
            let hits: Vec<(i64, usize)> = times.iter().copied().zip(0..).collect();
            let mut sorted = hits.clone();
            sorted.sort_by(newest);
            let mut times = Times::new(hits, first);
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
            let fast = PathMatch::new(pattern).ok().unwrap();
            assert!(!matches!(fast, PathMatch::Set(_)), "{pattern} is matched by bytes");
            let set = globset::GlobSetBuilder::new().add(glob()).build().unwrap();
            for path in paths {
                let path = std::path::Path::new(path);
                assert_eq!(fast.is_match(path), set.is_match(path), "{pattern} on {}", path.display());
            }
        }
        for pattern in ["*.rs", "src/**/*.rs", "**/*.{ts,tsx}", "**/a*.rs", "**/*"] {
            assert!(matches!(PathMatch::new(pattern).ok(), Some(PathMatch::Set(_))), "{pattern}");
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

//! A grep's query: its pattern compiled within its regex bound, the file type and glob that
//! choose its files, the literals every match needs, and what it shows.

use std::path::Path;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};

use super::bounds::RegexLimits;

/// A query the model must change before it can run, phrased for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidQuery(pub String);

/// Literals a match of a search's pattern cannot do without: every group must have one of its
/// literals in a file for the file to match (empty: no such literal is known).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needles(pub Vec<Vec<Vec<u8>>>);

/// What a grep shows of the files that match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrepMode {
    /// Their paths (newest first).
    FilesWithMatches,
    /// Their paths, each with how many lines match.
    Count,
    /// The matching lines, with context around them.
    Content,
}

/// What a grep asks, checked and compiled.
#[derive(Debug)]
pub struct GrepQuery {
    /// The pattern, compiled.
    pub matcher: RegexMatcher,
    /// What it shows.
    pub mode: GrepMode,
    /// Context lines around matches (content mode).
    pub context: usize,
    /// Whether a match may span lines.
    pub multiline: bool,
    /// Literals every match needs (a warm listing's filters skip files without them).
    pub needles: Needles,
    types: Option<Types>,
    /// The glob, relative to the searched folder.
    glob: Option<Override>,
}

/// The arguments a [`GrepQuery`] is built from.
#[derive(Debug, Clone, Copy)]
pub struct GrepSpec<'a> {
    /// The regular expression.
    pub pattern: &'a str,
    /// Only files matching this glob (ripgrep's `-g`).
    pub glob: Option<&'a str>,
    /// Only files of this ripgrep type.
    pub file_type: Option<&'a str>,
    /// What to show.
    pub mode: GrepMode,
    /// Case-insensitive matching.
    pub case_insensitive: bool,
    /// Context lines around matches (content mode).
    pub context: usize,
    /// Whether a match may span lines.
    pub multiline: bool,
}

impl GrepQuery {
    /// `args` checked and compiled, the pattern within `limits`.
    pub fn new(args: &GrepSpec<'_>, limits: RegexLimits) -> Result<Self, InvalidQuery> {
        let matcher = matcher(args, limits)?;
        let types = match args.file_type {
            None => None,
            Some(name) => {
                let mut types = TypesBuilder::new();
                types.add_defaults().select(name);
                Some(types.build().map_err(|e| {
                    InvalidQuery(format!(
                        "{e}. Use one of ripgrep's file types: rust, py, js, ts, go, c, cpp, java, md, ..."
                    ))
                })?)
            }
        };
        // Rooted at `.`: matched against paths relative to the searched folder.
        let glob = match args.glob {
            None => None,
            Some(glob) => {
                let invalid = |e: ignore::Error| InvalidQuery(format!("The glob is not valid: {e}."));
                let mut builder = OverrideBuilder::new(".");
                builder.add(glob).map_err(invalid)?;
                Some(builder.build().map_err(invalid)?)
            }
        };
        Ok(Self {
            matcher,
            mode: args.mode,
            context: args.context,
            multiline: args.multiline,
            needles: needles(args),
            types,
            glob,
        })
    }

    /// Whether a listed file, at `under` relative to the searched folder, is one the query's
    /// type and glob choose.
    pub fn wants(&self, under: &Path) -> bool {
        !self.types.as_ref().is_some_and(|t| t.matched(under, false).is_ignore())
            && !self.glob.as_ref().is_some_and(|o| o.matched(under, false).is_ignore())
    }

    /// Whether its matcher was built for matches spanning lines.
    pub fn spans_lines(&self) -> bool {
        grep_matcher::Matcher::line_terminator(&self.matcher).is_none()
    }
}

/// Whether grep-regex refused a pattern for its compiled size (its text for that case, which
/// a unit test pins).
fn too_big(err: &grep_regex::Error) -> bool {
    matches!(err.kind(), grep_regex::ErrorKind::Regex(text) if text.starts_with("compiled regex exceeds size limit"))
}

/// The MiB (or KiB) figure of `bytes`, as the model reads it.
fn size_text(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
    }
}

/// The query's matcher, within `limits`.
fn matcher(args: &GrepSpec<'_>, limits: RegexLimits) -> Result<RegexMatcher, InvalidQuery> {
    let mut builder = RegexMatcherBuilder::new();
    builder
        .case_insensitive(args.case_insensitive)
        .multi_line(true)
        .size_limit(limits.program)
        .dfa_size_limit(limits.dfa_cache);
    if args.multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(args.pattern).map_err(|e| {
        if too_big(&e) {
            InvalidQuery(format!(
                "The pattern is too big: compiled, it exceeds the {} a search's pattern may take. Simplify it (smaller counted repetitions like {{n}}; ASCII classes such as [A-Za-z0-9_] instead of Unicode \\w) and search again.",
                size_text(limits.program)
            ))
        } else {
            InvalidQuery(format!("The pattern is not a valid regular expression: {e}"))
        }
    })
}

/// Literals every match needs, from the pattern's prefixes and suffixes (regex-syntax's
/// extractor): a file without one of them cannot match, so a warm listing's trigram filters
/// skip it unread. Parsed as grep-regex parses it, or wider (a superset of matches only ever
/// adds literals): empty when unknown.
fn needles(args: &GrepSpec<'_>) -> Needles {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    let parsed = regex_syntax::ParserBuilder::new()
        .case_insensitive(args.case_insensitive)
        .multi_line(true)
        .dot_matches_new_line(args.multiline)
        .utf8(false)
        .build()
        .parse(args.pattern);
    let Ok(hir) = parsed else { return Needles::default() };
    let mut groups = Vec::new();
    for kind in [ExtractKind::Prefix, ExtractKind::Suffix] {
        let mut extractor = Extractor::new();
        extractor.kind(kind);
        let seq = extractor.extract(&hir);
        if let Some(literals) = seq.literals()
            && !literals.is_empty()
            && literals.iter().all(|l| l.as_bytes().len() >= 3)
        {
            groups.push(literals.iter().map(|l| l.as_bytes().to_vec()).collect());
        }
    }
    Needles(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_over_its_program_bound_is_too_big_and_says_so() {
        let build = |pattern: &str, bytes: usize| {
            let limits = RegexLimits::of(bytes);
            RegexMatcherBuilder::new()
                .size_limit(limits.program)
                .dfa_size_limit(limits.dfa_cache)
                .build(pattern)
        };
        assert_eq!(RegexLimits::of(16 << 20), RegexLimits { program: 4 << 20, dfa_cache: 2 << 20 });
        // grep-regex's text for the case, which `too_big` recognises.
        let err = build(r"\w{200}", 16 << 20).unwrap_err();
        assert!(too_big(&err), "{err}");
        assert!(!too_big(&build("(", 16 << 20).unwrap_err()));
        // The smallest bound still takes a few Unicode classes; the default one \w{50}.
        assert!(build(r"\w{4}", crate::config::MIN_SEARCH_REGEX_BYTES as usize).is_ok());
        assert!(build(r"\w{50}", crate::config::DEFAULT_SEARCH_REGEX_BYTES as usize).is_ok());
        assert_eq!(size_text(4 << 20), "4 MiB");
        assert_eq!(size_text(300 * 1024), "300 KiB");
    }
}

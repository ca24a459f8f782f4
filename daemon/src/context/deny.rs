//! Deny rules: glob patterns (globset syntax) matched against a resolved path relative to the
//! root that contains it, separately for reads and for writes. The daemon's own rules (config)
//! and a session's (`initialize.deny`) are both applied; the first rule that matches names the
//! refusal. A rule holds for what lies beneath a name it matches too (a path is denied when it
//! or a folder above it matches), and a path that may not be read may not be written either
//! (a write's answer would tell whether something is there).

use std::path::Path;
use std::sync::Arc;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// The daemon's default write rule: nothing under a `.git` folder is written by an agent.
pub const DEFAULT_DENY_WRITE: &[&str] = &["**/.git/**"];

/// What a rule guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading content (read, stat's version, streams).
    Read,
    /// Writing or editing.
    Write,
}

impl Access {
    /// `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// Where a rule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The daemon's configuration.
    Daemon,
    /// The session's `initialize`.
    Session,
}

/// A rule that refused an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The pattern as written.
    pub rule: String,
    /// What it guards.
    pub access: Access,
    /// Where it comes from.
    pub origin: Origin,
}

/// A pattern that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("deny rule {pattern:?} is not a valid glob: {source}")]
pub struct BadRule {
    /// The pattern as written.
    pub pattern: String,
    /// What the parser said.
    #[source]
    pub source: globset::Error,
}

/// One list of patterns, compiled: each as written and followed by `/**`, so that one match of
/// a path also says whether it lies beneath a name the pattern matches.
#[derive(Debug, Clone, Default)]
struct RuleSet {
    patterns: Vec<(String, Origin)>,
    /// Globs `2i` (pattern `i`) and `2i + 1` (what lies beneath it).
    set: GlobSet,
    /// For each pattern, a piece of text every path it matches holds (see [`needle`]); `None`
    /// when a pattern has none. A path holding none of them is matched by no pattern, found
    /// without running the set: a search checks each of 100,000 listed files.
    needles: Option<Vec<memchr::memmem::Finder<'static>>>,
}

/// The longest run of plain characters between `/`, `*` and `?` in `pattern`: text every path
/// the pattern matches (or lies beneath what it matches) holds. `None` when the pattern has
/// classes, alternatives or escapes (their text is no plain run), or no plain character.
fn needle(pattern: &str) -> Option<memchr::memmem::Finder<'static>> {
    if pattern.contains(['[', ']', '{', '}', '\\']) {
        return None;
    }
    let longest =
        pattern.split(['/', '*', '?']).max_by_key(|piece| piece.len()).filter(|piece| !piece.is_empty())?;
    Some(memchr::memmem::Finder::new(longest.as_bytes()).into_owned())
}

impl RuleSet {
    fn build(patterns: Vec<(String, Origin)>) -> Result<Self, BadRule> {
        let mut builder = GlobSetBuilder::new();
        for (pattern, _) in &patterns {
            builder.add(glob(pattern)?);
            builder.add(glob(&format!("{}/**", pattern.trim_end_matches('/')))?);
        }
        let set = builder.build().map_err(|source| BadRule { pattern: String::new(), source })?;
        let needles = patterns.iter().map(|(pattern, _)| needle(pattern)).collect();
        Ok(Self { patterns, set, needles })
    }

    /// The first pattern matching `rel` or a folder above it.
    fn first_match(&self, rel: &Path) -> Option<&(String, Origin)> {
        use std::os::unix::ffi::OsStrExt as _;
        // The common answer (no rule, or none matches) allocates nothing.
        if self.patterns.is_empty() {
            return None;
        }
        let bytes = rel.as_os_str().as_bytes();
        if self.needles.as_ref().is_some_and(|needles| needles.iter().all(|n| n.find(bytes).is_none())) {
            return None;
        }
        if !self.set.is_match(rel) {
            return None;
        }
        self.set.matches(rel).into_iter().min().and_then(|i| self.patterns.get(i / 2))
    }
}

/// `*` stays inside one folder (`**` crosses folders), as in `.gitignore`.
fn glob(pattern: &str) -> Result<Glob, BadRule> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|source| BadRule { pattern: pattern.to_owned(), source })
}

/// Compiled read and write rules. Cloning shares the compiled sets (every session that adds
/// no rule of its own shares the daemon's).
#[derive(Debug, Clone, Default)]
pub struct DenyRules {
    read: Arc<RuleSet>,
    write: Arc<RuleSet>,
}

impl PartialEq for DenyRules {
    fn eq(&self, other: &Self) -> bool {
        self.read.patterns == other.read.patterns && self.write.patterns == other.write.patterns
    }
}

impl Eq for DenyRules {}

impl DenyRules {
    /// Rules from the daemon's lists.
    pub fn daemon(read: &[String], write: &[String]) -> Result<Self, BadRule> {
        Self::default().with(read, write, Origin::Daemon)
    }

    /// These rules plus more (a session's own on top of the daemon's).
    pub fn with(&self, read: &[String], write: &[String], origin: Origin) -> Result<Self, BadRule> {
        let add = |set: &Arc<RuleSet>, more: &[String]| {
            if more.is_empty() {
                return Ok(set.clone());
            }
            let mut patterns = set.patterns.clone();
            patterns.extend(more.iter().map(|p| (p.clone(), origin)));
            RuleSet::build(patterns).map(Arc::new)
        };
        Ok(Self { read: add(&self.read, read)?, write: add(&self.write, write)? })
    }

    /// The rule refusing `access` to `rel` (a path relative to its root), if any: a rule of
    /// that access (for a write, a read rule as well) matching `rel` or a folder above it.
    pub fn check(&self, rel: &Path, access: Access) -> Result<(), Denial> {
        let sets: &[(&RuleSet, Access)] = match access {
            Access::Read => &[(&self.read, Access::Read)],
            Access::Write => &[(&self.write, Access::Write), (&self.read, Access::Read)],
        };
        let denial = sets.iter().find_map(|(set, access)| {
            let (rule, origin) = set.first_match(rel)?;
            Some(Denial { rule: rule.clone(), access: *access, origin: *origin })
        });
        denial.map_or(Ok(()), Err)
    }

    /// Whether a rule refuses `access` to `rel` (what resolution asks of each name it leads
    /// through, before looking at it).
    pub fn denies(&self, rel: &Path, access: Access) -> bool {
        match access {
            Access::Read => self.read.first_match(rel).is_some(),
            Access::Write => self.write.first_match(rel).is_some() || self.read.first_match(rel).is_some(),
        }
    }

    /// Whether any rule governs `access` (for writes: a write or a read rule). While one does,
    /// a file with several hard links is refused for that access: its other names might be
    /// denied, and no rule can see them.
    pub fn applies(&self, access: Access) -> bool {
        let any = |set: &RuleSet| !set.patterns.is_empty();
        match access {
            Access::Read => any(&self.read),
            Access::Write => any(&self.write) || any(&self.read),
        }
    }

    /// The patterns, for `--print-config` and status: (read, write).
    pub fn patterns(&self) -> (Vec<&str>, Vec<&str>) {
        fn list(set: &RuleSet) -> Vec<&str> {
            set.patterns.iter().map(|(p, _)| p.as_str()).collect()
        }
        (list(&self.read), list(&self.write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rules_protect_git_folders_anywhere_and_nothing_else() {
        let rules =
            DenyRules::daemon(&[], &DEFAULT_DENY_WRITE.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .unwrap();
        for denied in [".git/config", ".git/refs/heads/main", "vendor/lib/.git/HEAD"] {
            let denial = rules.check(Path::new(denied), Access::Write).unwrap_err();
            assert_eq!(denial.rule, "**/.git/**", "{denied}");
        }
        for allowed in [".gitignore", "src/git/x.rs", ".github/workflows/ci.yml", "a.git/x"] {
            assert!(rules.check(Path::new(allowed), Access::Write).is_ok(), "{allowed}");
        }
        assert!(
            rules.check(Path::new(".git/config"), Access::Read).is_ok(),
            "reads are not denied by default"
        );
    }

    proptest::proptest! {
        /// The needles never turn a match away: with them, a path is denied exactly when the
        /// compiled set alone matches it.
        #[test]
        fn needles_never_hide_a_match(
            patterns in proptest::collection::vec("[ab/*?.]{1,8}|[ab]{1,3}[{][ab],c[}]|\\*\\*/[ab.]{1,4}", 1..4),
            paths in proptest::collection::vec("[ab/.]{1,10}", 1..16),
        ) {
            let patterns: Vec<String> = patterns.into_iter().filter(|p| glob(p).is_ok()).collect();
            let Ok(rules) = RuleSet::build(patterns.iter().map(|p| (p.clone(), Origin::Daemon)).collect()) else {
                return Ok(());
            };
            for path in paths {
                let path = Path::new(&path);
                proptest::prop_assert_eq!(
                    rules.first_match(path).is_some(),
                    !rules.patterns.is_empty() && rules.set.is_match(path),
                    "{:?} against {:?}", path, patterns
                );
            }
        }
    }

    #[test]
    fn session_rules_add_to_the_daemons_and_star_stays_in_a_folder() {
        let daemon = DenyRules::daemon(&["secrets/**".into()], &[]).unwrap();
        let session = daemon.with(&[], &["*.lock".into()], Origin::Session).unwrap();
        assert_eq!(session.check(Path::new("secrets/k"), Access::Read).unwrap_err().origin, Origin::Daemon);
        let denial = session.check(Path::new("Cargo.lock"), Access::Write).unwrap_err();
        assert_eq!((denial.rule.as_str(), denial.origin), ("*.lock", Origin::Session));
        assert!(session.check(Path::new("sub/Cargo.lock"), Access::Write).is_ok());
        assert!(DenyRules::daemon(&["a/[".into()], &[]).is_err());
    }

    #[test]
    fn a_rule_holds_beneath_its_name_and_reads_denied_are_writes_denied() {
        let rules = DenyRules::daemon(&["**/*.pem".into()], &["**/.git/**".into()]).unwrap();
        let denial = rules.check(Path::new("certs/site.pem/inner.txt"), Access::Read).unwrap_err();
        assert_eq!(denial.rule, "**/*.pem", "beneath a denied name");
        let denial = rules.check(Path::new("site.pem"), Access::Write).unwrap_err();
        assert_eq!((denial.rule.as_str(), denial.access), ("**/*.pem", Access::Read));
        assert_eq!(rules.check(Path::new(".git/x"), Access::Write).unwrap_err().access, Access::Write);
        assert!(rules.check(Path::new("src/main.rs"), Access::Write).is_ok());
        assert!(
            rules.denies(Path::new("a.pem"), Access::Write) && !rules.denies(Path::new("a"), Access::Read)
        );
        assert!(rules.applies(Access::Read) && rules.applies(Access::Write));
        let writes_only = DenyRules::daemon(&[], &["**/.git/**".into()]).unwrap();
        assert!(!writes_only.applies(Access::Read) && writes_only.applies(Access::Write));
        assert!(!DenyRules::default().applies(Access::Write));
    }
}

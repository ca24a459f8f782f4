//! Deny rules: glob patterns (globset syntax) matched against a resolved path relative to the
//! root that contains it, separately for reads and for writes. The daemon's own rules (config)
//! and a session's (`initialize.deny`) are both applied; the first rule that matches names the
//! refusal.

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

/// One list of patterns, compiled.
#[derive(Debug, Clone, Default)]
struct RuleSet {
    patterns: Vec<(String, Origin)>,
    set: GlobSet,
}

impl RuleSet {
    fn build(patterns: Vec<(String, Origin)>) -> Result<Self, BadRule> {
        let mut builder = GlobSetBuilder::new();
        for (pattern, _) in &patterns {
            builder.add(glob(pattern)?);
        }
        let set = builder.build().map_err(|source| BadRule { pattern: String::new(), source })?;
        Ok(Self { patterns, set })
    }

    fn first_match(&self, rel: &Path) -> Option<&(String, Origin)> {
        // The common answer (no rule, or none matches) allocates nothing.
        if self.patterns.is_empty() || !self.set.is_match(rel) {
            return None;
        }
        self.set.matches(rel).into_iter().min().and_then(|i| self.patterns.get(i))
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

    /// The rule refusing `access` to `rel` (a path relative to its root), if any.
    pub fn check(&self, rel: &Path, access: Access) -> Result<(), Denial> {
        let set = match access {
            Access::Read => &self.read,
            Access::Write => &self.write,
        };
        match set.first_match(rel) {
            Some((rule, origin)) => Err(Denial { rule: rule.clone(), access, origin: *origin }),
            None => Ok(()),
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
}

//! A write or edit in two steps, for the writes something must see before they land (a gate):
//! [`Provider::prepare`] makes every check of the one-step path (locks, inode re-check,
//! expectation, text, match) and computes the bytes to write under the locks, then lets go of
//! them; [`Provider::commit`] takes the locks again, checks that the
//! file is still at the version prepared against (or still absent), and replaces (or creates)
//! it. A file that changed in between is `StaleVersion`: nothing is ever written that was not
//! prepared against the very content it replaces.

use std::io::ErrorKind;

use super::edit::{Region, Replacement};
use super::error::io_error;
use super::journaled::ChangeKind;
use super::journaling::Old;
use super::outcome::Expect;
use super::read::read_all_at;
use super::{Conventions, Expectation, Provider, ProviderError, Resolved, Version};

/// A write or edit computed and checked, not yet written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The version the bytes replace; `None`: nothing was there (a create).
    pub base: Option<Version>,
    /// The bytes to write.
    pub bytes: Vec<u8>,
    /// The bytes replaced, when they were at most the `max_old` asked for (empty for a create).
    pub old: Option<Vec<u8>>,
    /// For an edit: occurrences replaced, and the first edited places of the new version.
    pub edit: Option<(u64, Vec<Region>)>,
}

/// A committed write or edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// Whether the file was created.
    pub created: bool,
    /// The new version.
    pub version: Version,
    /// Hard links the written file has.
    pub links: u64,
    /// The journal entry that recorded it (`None`: not journaled).
    pub entry: Option<u64>,
}

/// What a two-step change is: a whole-file write or an edit, as the one-step entries take them.
#[derive(Debug, Clone, Copy)]
pub enum ChangeToPrepare<'a, 'r> {
    /// `content` as the whole of the file if `expect` holds, conventions kept as asked; the
    /// replaced bytes are kept in [`Prepared::old`] when the file has at most `max_old` bytes.
    Write {
        /// The new content.
        content: &'a str,
        /// What must hold of the file.
        expect: Expectation,
        /// Line endings and BOM: kept from the file, or as given.
        conventions: Conventions,
        /// The most replaced bytes kept.
        max_old: usize,
    },
    /// `change` made to the file at version `expected` (its bytes kept in [`Prepared::old`]).
    Edit {
        /// The replacement.
        change: &'a Replacement<'r>,
        /// The version the edit was made against.
        expected: Version,
    },
}

impl Provider {
    /// The first step of a two-step change: the checks and the bytes of [`Provider::write`] or
    /// [`Provider::edit`], nothing written; [`Provider::commit`] is the second.
    pub fn prepare(
        &self,
        target: &Resolved,
        change: ChangeToPrepare<'_, '_>,
    ) -> Result<Prepared, ProviderError> {
        match change {
            ChangeToPrepare::Write { content, expect, conventions, max_old } => {
                self.prepare_write(target, content, expect, conventions, max_old)
            }
            ChangeToPrepare::Edit { change, expected } => self.prepare_edit(target, change, expected),
        }
    }

    /// The first step of [`Provider::write`]: the same checks and the same bytes (conventions
    /// kept as asked), nothing written. The replaced bytes are kept in `old` when the file has
    /// at most `max_old` bytes.
    fn prepare_write(
        &self,
        target: &Resolved,
        content: &str,
        expect: Expectation,
        conventions: Conventions,
        max_old: usize,
    ) -> Result<Prepared, ProviderError> {
        self.check_content(target, content)?;
        self.settle_folder(target);
        let _guard = self.lock_path(target)?;
        match self.existing(target, expect)? {
            true => {
                let locked = self.lock_file(target)?;
                let (current, old) = if locked.meta.len() <= max_old as u64 {
                    let bytes = read_all_at(&locked.file, locked.meta.len())
                        .map_err(|e| io_error(&target.display, "read", e))?;
                    (Version::of(&bytes), Some(bytes))
                } else {
                    (self.version_of(target, &locked.file, &locked.meta)?, None)
                };
                if let Expect::Version(expected) = expect.0
                    && current != expected
                {
                    return Err(ProviderError::StaleVersion {
                        path: target.display.clone(),
                        current: Some(current),
                    });
                }
                let bytes = self.conventional(target, &locked, content, conventions)?.into_owned();
                Ok(Prepared { base: Some(current), bytes, old, edit: None })
            }
            false => {
                if let Expect::Version(_) = expect.0 {
                    return Err(ProviderError::StaleVersion { path: target.display.clone(), current: None });
                }
                Ok(Prepared {
                    base: None,
                    bytes: content.as_bytes().to_vec(),
                    old: Some(Vec::new()),
                    edit: None,
                })
            }
        }
    }

    /// The first step of [`Provider::edit`]: the same checks and the same new bytes, nothing
    /// written. The edited file's bytes are kept in `old` (an edit reads them whole anyway).
    fn prepare_edit(
        &self,
        target: &Resolved,
        change: &Replacement<'_>,
        expected: Version,
    ) -> Result<Prepared, ProviderError> {
        self.settle_folder(target);
        let _guard = self.lock_path(target)?;
        let locked = self.lock_edited(target)?;
        let edited = self.edited(target, &locked, change, expected)?;
        Ok(Prepared {
            base: Some(edited.base),
            bytes: edited.out,
            old: Some(edited.old),
            edit: Some((edited.replacements, edited.regions)),
        })
    }

    /// The second step: under the locks again, writes `prepared` if the file is still what it
    /// was prepared against and `expect` still holds of it; else `StaleVersion` with the
    /// current version (`None`: nothing there), and nothing is written.
    pub fn commit(
        &self,
        target: &Resolved,
        prepared: &Prepared,
        expect: Expectation,
    ) -> Result<Committed, ProviderError> {
        let stale = |current| ProviderError::StaleVersion { path: target.display.clone(), current };
        self.settle_folder(target);
        let _guard = self.lock_path(target)?;
        let existing = match target.dir.open_path(&target.rel).and_then(|f| f.metadata()) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(io_error(&target.display, "stat", e)),
        };
        // What the caller expects now must be what was prepared against.
        let consistent = match expect.0 {
            Expect::Any => true,
            Expect::Absent => prepared.base.is_none(),
            Expect::Version(version) => prepared.base == Some(version),
        };
        let (created, landed) = match existing {
            Some(meta) if meta.is_dir() => {
                return Err(ProviderError::IsDirectory { path: target.display.clone() });
            }
            Some(meta) if !meta.is_file() => {
                return Err(ProviderError::NotRegularFile { path: target.display.clone() });
            }
            Some(_) => {
                let locked = self.lock_file(target)?;
                let current = self.version_of(target, &locked.file, &locked.meta)?;
                if !consistent || prepared.base != Some(current) {
                    return Err(stale(Some(current)));
                }
                let kind = if prepared.edit.is_some() { ChangeKind::Edit } else { ChangeKind::Write };
                let old = match &prepared.old {
                    Some(old) => Old::Known(current, old),
                    None => Old::Locked(&locked),
                };
                let landed = self.replace(target, &locked, &prepared.bytes, kind, old)?;
                super::write::release(locked, &landed);
                (false, landed)
            }
            None if !consistent || prepared.base.is_some() => return Err(stale(None)),
            None => match self.create(target, &prepared.bytes) {
                Ok(landed) => (true, landed),
                // It appeared between our stat and our create: not what was prepared against.
                Err(ProviderError::AlreadyExists { .. }) => {
                    return Err(stale(self.current_version(target)?));
                }
                Err(e) => return Err(e),
            },
        };
        let version = self.remember_written(target, &prepared.bytes, &landed);
        Ok(Committed { created, version, links: landed.links, entry: landed.entry })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ProviderConfig, RootDir, Scope};

    fn setup() -> (tempfile::TempDir, std::path::PathBuf, Provider) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root, Provider::new(ProviderConfig { fsync: false, ..Default::default() }))
    }

    #[test]
    fn a_commit_writes_only_over_the_version_it_was_prepared_against() {
        let (_dir, root, provider) = setup();
        let roots = [RootDir::new(&root, None).unwrap()];
        let scope = Scope { roots: &roots, cwd: &root };
        std::fs::write(root.join("a.txt"), "one\r\ntwo\r\n").unwrap();
        let target = provider.resolve("a.txt", scope).unwrap();
        let prepared =
            provider.prepare_write(&target, "uno\n", Expectation::ANY, Conventions::Keep, 1024).unwrap();
        assert_eq!(prepared.bytes, b"uno\r\n", "conventions kept, as the one-step write keeps them");
        assert_eq!(prepared.old.as_deref(), Some(&b"one\r\ntwo\r\n"[..]));
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"one\r\ntwo\r\n", "nothing written yet");

        // Changed in between: stale, nothing written.
        std::fs::write(root.join("a.txt"), "changed\r\n").unwrap();
        let err = provider.commit(&target, &prepared, Expectation::ANY).unwrap_err();
        assert!(matches!(err, ProviderError::StaleVersion { current: Some(_), .. }), "{err:?}");
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"changed\r\n");

        let change = Replacement::new("changed", "edited", false).unwrap();
        let base = Version::of(b"changed\r\n");
        let prepared = provider.prepare_edit(&target, &change, base).unwrap();
        assert_eq!(prepared.edit.as_ref().map(|e| e.0), Some(1));
        // An expectation that disagrees with what was prepared is stale too.
        let other = Expectation::version(Version::of(b"x"));
        assert!(provider.commit(&target, &prepared, other).is_err());
        let done = provider.commit(&target, &prepared, Expectation::version(base)).unwrap();
        assert!(!done.created);
        assert_eq!(done.version, Version::of(b"edited\r\n"));
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"edited\r\n");

        // A create prepared against nothing refuses a file that appeared meanwhile.
        let new = provider.resolve("new.txt", scope).unwrap();
        let prepared =
            provider.prepare_write(&new, "n\n", Expectation::ABSENT, Conventions::Keep, 1024).unwrap();
        assert_eq!(prepared.base, None);
        std::fs::write(root.join("new.txt"), "someone else\n").unwrap();
        assert!(matches!(
            provider.commit(&new, &prepared, Expectation::ABSENT),
            Err(ProviderError::StaleVersion { current: Some(_), .. })
        ));
        std::fs::remove_file(root.join("new.txt")).unwrap();
        assert!(provider.commit(&new, &prepared, Expectation::ABSENT).unwrap().created);
        assert_eq!(std::fs::read(root.join("new.txt")).unwrap(), b"n\n");
    }
}

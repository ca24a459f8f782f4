//! What the layers above need of a file to ask its language server about it: which file, under
//! which root, at which version, and which other files a session may be told of.

use std::path::{Path, PathBuf};

use super::deny::{Access, DenyRules};
use super::{ContextError, FileContext, Kind, ProviderError, Root, Version};

/// A file to ask its language server about, as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosed {
    /// The root it is beneath.
    pub root: Root,
    /// The file, canonical.
    pub path: PathBuf,
    /// How it is shown to the session.
    pub display: String,
    /// Its current version.
    pub version: Version,
}

/// Whether a session with `roots` and `deny` rules may be shown anything of `path` (canonical):
/// inside one of its roots, no deny rule for reads names it, and it is a regular file there now
/// (a server's report on a name that is not a file, made up or gone, is not worth a line).
pub fn visible_to(roots: &[Root], deny: &DenyRules, path: &Path) -> bool {
    crate::provider::resolve::locate(roots, path)
        .is_some_and(|(_, rel)| deny.check(rel, Access::Read).is_ok())
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

impl FileContext<'_> {
    /// The regular file at `path` as it is now, for its language server: resolved and admitted
    /// as a read (roots, deny rules, links), its current version. Records nothing.
    pub fn diagnosed(&self, path: &str) -> Result<Diagnosed, ContextError> {
        let target = self.target(path, Access::Read)?;
        let stat = self.provider.stat(&target)?;
        match stat.kind {
            Kind::File => self.one_name(&target.display, stat.links, Access::Read)?,
            Kind::Missing => return Err(ProviderError::NotFound { path: target.display, why: None }.into()),
            Kind::Directory => return Err(ProviderError::IsDirectory { path: target.display }.into()),
            Kind::Other => return Err(ProviderError::NotRegularFile { path: target.display }.into()),
        }
        let version = stat.version.ok_or_else(|| ProviderError::TooLarge {
            path: target.display.clone(),
            size: stat.size.unwrap_or(0),
            limit: crate::lsp::MAX_DOCUMENT_BYTES,
        })?;
        Ok(Diagnosed { root: target.dir, path: target.path, display: target.display, version })
    }
}

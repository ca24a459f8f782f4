//! One listing as the search index kept it, decoded: its folders (each one's subfolders side by
//! side, by name) and files (each folder's side by side, by name), with the stat data a
//! validation compares and the trigram filters it may keep. What a validation walk asks of it
//! (see [`walker`](crate::listing::walker)): a folder's stamp, ignore files and rules, its
//! subfolders and files by name.

use std::ops::Range;
use std::path::PathBuf;

use crate::listing::grams::GramFilter;
use crate::listing::rules::IgnoreFiles;
use crate::listing::stamp::Stamp;

/// One kept listing (of one searched folder of a root).
#[derive(Debug, Default)]
pub struct Section {
    /// The searched folder, relative to the root.
    pub rel: PathBuf,
    /// Whether an ignore file its walk read whitelists.
    pub whitelists: bool,
    /// The digest of the rules of the folders on the way from the root to the searched one
    /// (see [`rules_read`](crate::listing::rules::rules_read)), combined.
    pub way: u64,
    /// Its folders: `[0]` is the searched folder; each folder's subfolders lie side by side,
    /// sorted by name.
    pub folders: Vec<KnownFolder>,
    /// Its files: each folder's side by side, sorted by name.
    pub files: Vec<KnownFile>,
    /// The names of its folders and files.
    pub names: Vec<u8>,
    /// The bits of its files' trigram filters, 64 a word, little-endian.
    pub words: Vec<u8>,
}

/// A folder of a kept listing.
#[derive(Debug, Clone, Default)]
pub struct KnownFolder {
    /// Its name: a range of [`Section::names`] (empty for the searched folder).
    pub name: Range<u32>,
    /// Its stat data when its entries were read, when they can be trusted (else its entries
    /// are read again).
    pub stamp: Option<Stamp>,
    /// Which ignore files its entries held.
    pub found: IgnoreFiles,
    /// The digest of its own ignore files' rules.
    pub rules: u64,
    /// Its listed files: a range of [`Section::files`].
    pub files: Range<u32>,
    /// Its subfolders: a range of [`Section::folders`].
    pub children: Range<u32>,
}

/// A listed file of a kept listing.
#[derive(Debug, Clone, Default)]
pub struct KnownFile {
    /// Its place in the listing (sorted by path).
    pub rank: u32,
    /// Its name: a range of [`Section::names`].
    pub name: Range<u32>,
    /// Its stat data when its filter was built, when they can be trusted.
    pub stamp: Option<Stamp>,
    /// Its filter's bits: a range of [`Section::words`], in words (only with a stamp).
    pub filter: Option<Range<u32>>,
}

impl Section {
    /// Files the listing held.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether it held none.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    fn name(&self, range: &Range<u32>) -> &[u8] {
        self.names.get(range.start as usize..range.end as usize).unwrap_or_default()
    }

    /// Folder `id`.
    pub fn folder(&self, id: u32) -> Option<&KnownFolder> {
        self.folders.get(id as usize)
    }

    /// The name of folder `id`.
    pub fn folder_name(&self, id: u32) -> &[u8] {
        self.folder(id).map_or(&[], |folder| self.name(&folder.name))
    }

    /// The subfolders of folder `id`, by name.
    pub fn children(&self, id: u32) -> Range<u32> {
        self.folder(id).map_or(0..0, |folder| folder.children.clone())
    }

    /// The subfolder `name` of folder `id`.
    pub fn child(&self, id: u32, name: &[u8]) -> Option<u32> {
        let children = self.children(id);
        let (start, end) = (children.start as usize, children.end as usize);
        let found = self.folders.get(start..end)?.binary_search_by(|child| self.name(&child.name).cmp(name));
        found.ok().map(|at| children.start + at as u32)
    }

    /// The listed files of folder `id`, by name.
    pub fn files_of(&self, id: u32) -> Range<u32> {
        self.folder(id).map_or(0..0, |folder| folder.files.clone())
    }

    /// File `index`.
    pub fn file(&self, index: u32) -> Option<&KnownFile> {
        self.files.get(index as usize)
    }

    /// The name of file `index`.
    pub fn file_name(&self, index: u32) -> &[u8] {
        self.file(index).map_or(&[], |file| self.name(&file.name))
    }

    /// The filter of file `index`, stamped with its stamp's digest (only with a stamp).
    pub fn filter(&self, index: u32) -> Option<GramFilter> {
        let file = self.file(index)?;
        let (stamp, words) = (file.stamp?, file.filter.clone()?);
        let bytes = self.words.get(words.start as usize * 8..words.end as usize * 8)?;
        let bits = bytes
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]));
        GramFilter::from_parts(stamp.digest(), bits)
    }

    /// The listed file `name` of folder `id`.
    pub fn file_named(&self, id: u32, name: &[u8]) -> Option<u32> {
        let files = self.files_of(id);
        let found = self
            .files
            .get(files.start as usize..files.end as usize)?
            .binary_search_by(|file| self.name(&file.name).cmp(name));
        found.ok().map(|at| files.start + at as u32)
    }
}

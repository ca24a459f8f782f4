//! The search index's bytes: a header (magic, version, the writer's uid, the length, an xxh3
//! checksum of everything else), the root, then one section per kept listing of that root.
//! Little-endian throughout, every table 8-byte aligned:
//!
//! ```text
//! header   magic "filectxI" | version u32 | uid u32 | length u64 | 0 [24] | xxh3-128 [16]
//! root     length u32 | bytes | pad to 8          sections u32 | 0 u32
//! section  rel length u32 | rel | pad | flags u32 | folders u32 | files u32 | names u32
//!          words u32 | 0 u32 | way digest u64
//!          folders × 80: name offset u32, length u32 | found and flags u32 | 0 u32 | stamp 40
//!                        | rules digest u64 | files start u32, count u32 | subfolders start u32, count u32
//!          files × 64:   rank u32 | name offset u32, length u32 | flags u32 | stamp 40
//!                        | filter start u32, words u32
//!          names | pad to 8 | filter words × 8
//! stamp    dev u64 | inode u64 | size u64 | mtime ns i64 | ctime ns i64
//! ```
//!
//! Folders lie breadth first, the searched one first, each one's subfolders side by side by
//! name; files lie folder by folder, by name, each with its rank (its place in the listing,
//! sorted by path). A file keeps its filter only with the stamp of the bytes it was built from.
//! Decoding checks everything (magic, version, uid, length, checksum, root, every range and
//! count, ranks a permutation) and never panics: a file that is not exactly what this code
//! writes is refused whole, with the reason.

use std::path::{Path, PathBuf};

use crate::listing::grams::GramFilter;
use crate::listing::index::section::{KnownFile, KnownFolder, Section};
use crate::listing::listed::Listed;
use crate::listing::rules::IgnoreFiles;
use crate::listing::stamp::Stamp;
use crate::listing::walker::Folder;

/// The first bytes of every index file.
pub const MAGIC: [u8; 8] = *b"filectxI";
/// The format's version: an index of another one is discarded.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER: usize = 64;
/// Where the checksum lies in the header.
const CHECKSUM: std::ops::Range<usize> = 48..64;
/// The header's reserved bytes (zero).
const RESERVED: std::ops::Range<usize> = 24..48;
/// Bytes of a folder's entry.
const FOLDER_BYTES: usize = 80;
/// Bytes of a file's entry.
const FILE_BYTES: usize = 64;
/// A folder's or file's flag: its stamp is kept.
const HAS_STAMP: u32 = 1 << 8;
/// A file's flag: its filter is kept.
const HAS_FILTER: u32 = 1 << 9;
/// A section's flag: an ignore file its walk read whitelists.
const WHITELISTS: u32 = 1;

/// Why an index file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexRefused {
    /// Not an index file of filectx.
    #[error("it is not a filectx search index")]
    Magic,
    /// Written by another version of the format.
    #[error("it is of format version {0}, this daemon reads {VERSION}")]
    Version(u32),
    /// Written by another user.
    #[error("it was written by uid {0}")]
    Uid(u32),
    /// Shorter or longer than its header says.
    #[error("it is truncated or has bytes appended ({found} bytes, {said} said)")]
    Length {
        /// Its length.
        found: u64,
        /// What its header says.
        said: u64,
    },
    /// Its bytes are not those checksummed.
    #[error("its checksum does not match: it is corrupt")]
    Checksum,
    /// It is another root's.
    #[error("it is the index of another root ({0})")]
    Root(String),
    /// Something in it is out of range.
    #[error("it is malformed: {0}")]
    Malformed(&'static str),
}

/// A decoded index: its root and its listings.
#[derive(Debug, Default)]
pub struct Image {
    /// The root, canonical.
    pub root: PathBuf,
    /// Its listings, one per searched folder.
    pub sections: Vec<Section>,
}

/// One kept listing to encode.
pub struct Out<'a> {
    /// The searched folder, relative to the root.
    pub rel: &'a Path,
    /// Whether an ignore file its walk read whitelists.
    pub whitelists: bool,
    /// The digest of the rules on the way to it.
    pub way: u64,
    /// Its files, sorted by path.
    pub files: &'a [Listed],
    /// For each file, its stamp when its filter was built from bytes of that stamp (looked at
    /// again just before writing), else `None`.
    pub stamps: &'a [Option<Stamp>],
    /// For each file, its filter.
    pub filters: &'a [Option<GramFilter>],
    /// The folders its walks recorded.
    pub folders: &'a [Folder],
}

/// Builds an index file, section by section.
pub struct Encoder {
    bytes: Vec<u8>,
    sections: u32,
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn pad(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
}

fn put_stamp(out: &mut Vec<u8>, stamp: Option<Stamp>) {
    let stamp = stamp.unwrap_or_default();
    for word in [stamp.dev, stamp.ino, stamp.size, stamp.mtime_ns as u64, stamp.ctime_ns as u64] {
        put_u64(out, word);
    }
}

fn len32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// One folder of a section being encoded.
struct Node<'a> {
    path: &'a Path,
    record: Option<&'a Folder>,
    children: Vec<usize>,
    files: Vec<usize>,
}

impl Encoder {
    /// An index of `root`, written by `uid`.
    pub fn new(root: &Path, uid: u32) -> Self {
        let mut bytes = Vec::with_capacity(1 << 16);
        bytes.extend_from_slice(&MAGIC);
        put_u32(&mut bytes, VERSION);
        put_u32(&mut bytes, uid);
        bytes.resize(HEADER, 0);
        let root = root.as_os_str().as_encoded_bytes();
        put_u32(&mut bytes, len32(root.len()));
        bytes.extend_from_slice(root);
        pad(&mut bytes);
        // The count of sections, filled in by `finish`.
        put_u64(&mut bytes, 0);
        Self { bytes, sections: 0 }
    }

    /// Adds one listing.
    pub fn section(&mut self, out: &Out<'_>) {
        let (nodes, order) = tree(out);
        let out_bytes = &mut self.bytes;
        let rel = out.rel.as_os_str().as_encoded_bytes();
        put_u32(out_bytes, len32(rel.len()));
        out_bytes.extend_from_slice(rel);
        pad(out_bytes);
        let mut names: Vec<u8> = Vec::new();
        let mut words: Vec<u64> = Vec::new();
        let mut folders: Vec<u8> = Vec::with_capacity(order.len() * FOLDER_BYTES);
        let mut files: Vec<u8> = Vec::with_capacity(out.files.len() * FILE_BYTES);
        // Where each folder lands in breadth-first order, to give its subfolders' range.
        let mut place = vec![0u32; nodes.len()];
        for (at, &node) in order.iter().enumerate() {
            place[node] = len32(at);
        }
        let mut file_count = 0u32;
        for (at, &node) in order.iter().enumerate() {
            let node = &nodes[node];
            let name = match at {
                0 => &[][..],
                _ => node.path.file_name().map_or(&[][..], |n| n.as_encoded_bytes()),
            };
            put_u32(&mut folders, len32(names.len()));
            put_u32(&mut folders, len32(name.len()));
            names.extend_from_slice(name);
            let record = node.record;
            let stamp = record.and_then(|r| r.stamp);
            let found = record.map_or(0, |r| u32::from(r.found.bits()));
            put_u32(&mut folders, found | if stamp.is_some() { HAS_STAMP } else { 0 });
            put_u32(&mut folders, 0);
            put_stamp(&mut folders, stamp);
            put_u64(&mut folders, record.map_or(0, |r| r.rules));
            put_u32(&mut folders, file_count);
            put_u32(&mut folders, len32(node.files.len()));
            let first_child = node.children.first().map_or(0, |&c| place[c]);
            put_u32(&mut folders, first_child);
            put_u32(&mut folders, len32(node.children.len()));
            for &index in &node.files {
                file_count += 1;
                let file = &out.files[index];
                let name = file.rel.file_name().map_or(&[][..], |n| n.as_encoded_bytes());
                put_u32(&mut files, len32(index));
                put_u32(&mut files, len32(names.len()));
                put_u32(&mut files, len32(name.len()));
                names.extend_from_slice(name);
                let stamp = out.stamps.get(index).copied().flatten();
                let filter = out.filters.get(index).and_then(Option::as_ref).filter(|_| stamp.is_some());
                let flags = if stamp.is_some() { HAS_STAMP } else { 0 }
                    | if filter.is_some() { HAS_FILTER } else { 0 };
                put_u32(&mut files, flags);
                put_stamp(&mut files, stamp);
                match filter {
                    Some(filter) => {
                        put_u32(&mut files, len32(words.len()));
                        put_u32(&mut files, len32(filter.bits().len()));
                        words.extend_from_slice(filter.bits());
                    }
                    None => put_u64(&mut files, 0),
                }
            }
        }
        put_u32(out_bytes, if out.whitelists { WHITELISTS } else { 0 });
        put_u32(out_bytes, len32(order.len()));
        put_u32(out_bytes, file_count);
        put_u32(out_bytes, len32(names.len()));
        put_u32(out_bytes, len32(words.len()));
        put_u32(out_bytes, 0);
        put_u64(out_bytes, out.way);
        out_bytes.extend_from_slice(&folders);
        out_bytes.extend_from_slice(&files);
        out_bytes.extend_from_slice(&names);
        pad(out_bytes);
        for word in words {
            put_u64(out_bytes, word);
        }
        self.sections += 1;
    }

    /// Whether no listing was added.
    pub fn is_empty(&self) -> bool {
        self.sections == 0
    }

    /// The file's bytes, length and checksum filled in.
    pub fn finish(mut self) -> Vec<u8> {
        let root_len = u32::from_le_bytes(self.bytes[HEADER..HEADER + 4].try_into().unwrap_or_default());
        let at = (HEADER + 4 + root_len as usize).next_multiple_of(8);
        self.bytes[at..at + 4].copy_from_slice(&self.sections.to_le_bytes());
        let len = self.bytes.len() as u64;
        self.bytes[16..24].copy_from_slice(&len.to_le_bytes());
        let sum = checksum(&self.bytes);
        self.bytes[CHECKSUM].copy_from_slice(&sum);
        self.bytes
    }
}

/// The checksum of an index file's bytes: xxh3-128 of all of them but the checksum itself (it
/// finds corruption and truncation; the file is private, so no one forges it).
fn checksum(bytes: &[u8]) -> [u8; 16] {
    let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
    hasher.update(&bytes[..CHECKSUM.start]);
    hasher.update(&bytes[CHECKSUM.end..]);
    hasher.digest128().to_le_bytes()
}

/// The folders of a section to encode, and their breadth-first order from the searched folder:
/// every recorded folder at or beneath it, and every folder holding a file, with the folders
/// between.
fn tree<'a>(out: &'a Out<'_>) -> (Vec<Node<'a>>, Vec<usize>) {
    use std::collections::HashMap;
    let mut nodes: Vec<Node<'a>> = Vec::new();
    let mut at: HashMap<&'a Path, usize> = HashMap::new();
    fn node<'a>(
        path: &'a Path,
        top: &Path,
        nodes: &mut Vec<Node<'a>>,
        at: &mut HashMap<&'a Path, usize>,
    ) -> usize {
        if let Some(&index) = at.get(path) {
            return index;
        }
        let index = nodes.len();
        nodes.push(Node { path, record: None, children: Vec::new(), files: Vec::new() });
        at.insert(path, index);
        if path != top
            && let Some(parent) = path.parent()
        {
            let parent = node(parent, top, nodes, at);
            nodes[parent].children.push(index);
        }
        index
    }
    let top = node(out.rel, out.rel, &mut nodes, &mut at);
    for record in out.folders.iter().filter(|f| f.rel.starts_with(out.rel)) {
        let index = node(&record.rel, out.rel, &mut nodes, &mut at);
        nodes[index].record = Some(record);
    }
    for (index, file) in out.files.iter().enumerate() {
        let Some(parent) = file.rel.parent().filter(|p| p.starts_with(out.rel)) else { continue };
        let folder = node(parent, out.rel, &mut nodes, &mut at);
        nodes[folder].files.push(index);
    }
    let name = |path: &Path| path.file_name().map(|n| n.as_encoded_bytes().to_vec()).unwrap_or_default();
    for index in 0..nodes.len() {
        let mut children = std::mem::take(&mut nodes[index].children);
        children.sort_by_cached_key(|&c| name(nodes[c].path));
        let mut files = std::mem::take(&mut nodes[index].files);
        files.sort_by(|&a, &b| out.files[a].rel.file_name().cmp(&out.files[b].rel.file_name()));
        nodes[index].children = children;
        nodes[index].files = files;
    }
    let mut order = vec![top];
    let mut next = 0;
    while next < order.len() {
        let children = nodes[order[next]].children.clone();
        order.extend(children);
        next += 1;
    }
    (nodes, order)
}

/// Reads little-endian values from a checked slice, refusing whatever lies out of it.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], IndexRefused> {
        let end = self.at.checked_add(len).ok_or(IndexRefused::Malformed("a length overflows"))?;
        let taken =
            self.bytes.get(self.at..end).ok_or(IndexRefused::Malformed("a table runs past the end"))?;
        self.at = end;
        Ok(taken)
    }

    fn u32(&mut self) -> Result<u32, IndexRefused> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn u64(&mut self) -> Result<u64, IndexRefused> {
        Ok(u64::from(self.u32()?) | u64::from(self.u32()?) << 32)
    }

    fn align(&mut self) -> Result<(), IndexRefused> {
        let pad = self.at.next_multiple_of(8) - self.at;
        let padding = self.take(pad)?;
        if padding.iter().any(|&b| b != 0) {
            return Err(IndexRefused::Malformed("padding is not zero"));
        }
        Ok(())
    }

    fn stamp(&mut self, kept: bool, written_ns: i64) -> Result<Option<Stamp>, IndexRefused> {
        let stamp = Stamp {
            dev: self.u64()?,
            ino: self.u64()?,
            size: self.u64()?,
            mtime_ns: self.u64()? as i64,
            ctime_ns: self.u64()? as i64,
        };
        // Changed within the racy window of the index's own write: not trusted (git's rule).
        Ok((kept && stamp.settled(written_ns)).then_some(stamp))
    }
}

/// Checks the header of an index file: `Ok(length)` when it is one this daemon reads, written
/// by `uid`; decoding checks the rest.
pub fn check_header(bytes: &[u8], uid: u32) -> Result<u64, IndexRefused> {
    if bytes.len() < HEADER || bytes[..8] != MAGIC {
        return Err(IndexRefused::Magic);
    }
    let mut reader = Reader { bytes, at: 8 };
    let version = reader.u32()?;
    if version != VERSION {
        return Err(IndexRefused::Version(version));
    }
    let writer = reader.u32()?;
    if writer != uid {
        return Err(IndexRefused::Uid(writer));
    }
    let said = reader.u64()?;
    if said != bytes.len() as u64 {
        return Err(IndexRefused::Length { found: bytes.len() as u64, said });
    }
    Ok(said)
}

/// Decodes an index file of `root` written by `uid`; its stamps changed within the racy window
/// before `written_ns` (the file's own modification time) are not trusted.
pub fn decode(bytes: &[u8], root: &Path, uid: u32, written_ns: i64) -> Result<Image, IndexRefused> {
    check_header(bytes, uid)?;
    if bytes[CHECKSUM] != checksum(bytes) {
        return Err(IndexRefused::Checksum);
    }
    if bytes[RESERVED].iter().any(|&b| b != 0) {
        return Err(IndexRefused::Malformed("a reserved field is not zero"));
    }
    let mut reader = Reader { bytes, at: HEADER };
    let root_len = reader.u32()? as usize;
    let found = reader.take(root_len)?;
    if found != root.as_os_str().as_encoded_bytes() {
        return Err(IndexRefused::Root(String::from_utf8_lossy(found).into_owned()));
    }
    reader.align()?;
    let count = reader.u32()?;
    if reader.u32()? != 0 {
        return Err(IndexRefused::Malformed("a reserved field is not zero"));
    }
    let mut sections = Vec::new();
    for _ in 0..count {
        sections.push(section(&mut reader, written_ns)?);
    }
    if reader.at != bytes.len() {
        return Err(IndexRefused::Malformed("bytes after the last section"));
    }
    Ok(Image { root: root.to_path_buf(), sections })
}

/// Decodes one section.
fn section(reader: &mut Reader<'_>, written_ns: i64) -> Result<Section, IndexRefused> {
    let rel_len = reader.u32()? as usize;
    let rel = reader.take(rel_len)?;
    if rel.contains(&0) {
        return Err(IndexRefused::Malformed("a path holds a NUL byte"));
    }
    let rel = PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(rel));
    if rel.is_absolute() || rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
        return Err(IndexRefused::Malformed("a searched folder is not a plain relative path"));
    }
    reader.align()?;
    let flags = reader.u32()?;
    let (folder_count, file_count) = (reader.u32()? as usize, reader.u32()? as usize);
    let (names_len, word_count) = (reader.u32()? as usize, reader.u32()? as usize);
    if reader.u32()? != 0 {
        return Err(IndexRefused::Malformed("a reserved field is not zero"));
    }
    let way = reader.u64()?;
    let mut folders_bytes = Reader { bytes: reader.take(folder_count.saturating_mul(FOLDER_BYTES))?, at: 0 };
    let mut files_bytes = Reader { bytes: reader.take(file_count.saturating_mul(FILE_BYTES))?, at: 0 };
    let names = reader.take(names_len)?.to_vec();
    reader.align()?;
    // Copied whole; each filter is made of them when a validation finds its file unchanged.
    let words = reader.take(word_count.saturating_mul(8))?.to_vec();
    let name = |offset: u32, len: u32| -> Result<std::ops::Range<u32>, IndexRefused> {
        let end = offset.checked_add(len).filter(|&end| end as usize <= names_len);
        let end = end.ok_or(IndexRefused::Malformed("a name runs past the names"))?;
        let bytes = &names[offset as usize..end as usize];
        if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') || bytes.contains(&0)
        {
            return Err(IndexRefused::Malformed("a name is not a plain name"));
        }
        Ok(offset..end)
    };
    let mut folders = Vec::with_capacity(folder_count);
    for index in 0..folder_count {
        let (offset, len) = (folders_bytes.u32()?, folders_bytes.u32()?);
        let name = if index == 0 && len == 0 { offset..offset } else { name(offset, len)? };
        let bits = folders_bytes.u32()?;
        if bits & !(HAS_STAMP | 7) != 0 || folders_bytes.u32()? != 0 {
            return Err(IndexRefused::Malformed("a folder's flags are unknown"));
        }
        let stamp = folders_bytes.stamp(bits & HAS_STAMP != 0, written_ns)?;
        let rules = folders_bytes.u64()?;
        let files = range(folders_bytes.u32()?, folders_bytes.u32()?, file_count)?;
        let children = range(folders_bytes.u32()?, folders_bytes.u32()?, folder_count)?;
        let found = IgnoreFiles::from_bits((bits & 7) as u8);
        folders.push(KnownFolder { name, stamp, found, rules, files, children });
    }
    check_tree(&folders, file_count)?;
    let mut files = Vec::with_capacity(file_count);
    let mut ranked = vec![false; file_count];
    for _ in 0..file_count {
        let rank = files_bytes.u32()?;
        match ranked.get_mut(rank as usize) {
            Some(seen @ false) => *seen = true,
            _ => return Err(IndexRefused::Malformed("two files of one rank, or a rank out of range")),
        }
        let name = name(files_bytes.u32()?, files_bytes.u32()?)?;
        let bits = files_bytes.u32()?;
        if bits & !(HAS_STAMP | HAS_FILTER) != 0 {
            return Err(IndexRefused::Malformed("a file's flags are unknown"));
        }
        let stamp = files_bytes.stamp(bits & HAS_STAMP != 0, written_ns)?;
        let (start, len) = (files_bytes.u32()?, files_bytes.u32()?);
        let filter = if bits & HAS_FILTER != 0 {
            let words = range(start, len, word_count)?;
            if !GramFilter::possible_words(len as usize) {
                return Err(IndexRefused::Malformed("a filter has no size a filter has"));
            }
            Some(words)
        } else {
            None
        };
        // A filter whose stamp is not trusted is not kept.
        files.push(KnownFile { rank, name, stamp, filter: filter.filter(|_| stamp.is_some()) });
    }
    Ok(Section { rel, whitelists: flags & WHITELISTS != 0, way, folders, files, names, words })
}

/// `start..start + len` when it lies within `0..total`.
fn range(start: u32, len: u32, total: usize) -> Result<std::ops::Range<u32>, IndexRefused> {
    match start.checked_add(len) {
        Some(end) if end as usize <= total => Ok(start..end),
        _ => Err(IndexRefused::Malformed("a range runs past its table")),
    }
}

/// Checks that the folders form a tree breadth first from the first (every folder but the first
/// the subfolder of exactly one, listed after it) and that their files cover every file once,
/// in order.
fn check_tree(folders: &[KnownFolder], file_count: usize) -> Result<(), IndexRefused> {
    let mut next_child = 1u32;
    let mut next_file = 0u32;
    for (index, folder) in folders.iter().enumerate() {
        if !folder.children.is_empty() && folder.children.start as usize <= index {
            return Err(IndexRefused::Malformed("a folder is its own subfolder"));
        }
        if folder.children.is_empty() {
            if folder.children.start != 0 && folder.children.start != next_child {
                return Err(IndexRefused::Malformed("the folders are not breadth first"));
            }
        } else if folder.children.start != next_child {
            return Err(IndexRefused::Malformed("the folders are not breadth first"));
        }
        next_child = next_child.max(folder.children.end);
        if folder.files.start != next_file {
            return Err(IndexRefused::Malformed("the files are not folder by folder"));
        }
        next_file = folder.files.end;
    }
    if next_child as usize != folders.len().max(1) || next_file as usize != file_count {
        return Err(IndexRefused::Malformed("folders or files are left out of the tree"));
    }
    Ok(())
}

//! Tests of the search index's bytes and folder: what is written is read back, anything else
//! (truncated or corrupt at any offset, another version, uid or root) is refused whole, and the
//! folder keeps its files private and within its bound.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::format::{self, Encoder, Out, decode};
use super::*;
use crate::listing::grams::GramFilter;
use crate::listing::listed::Listed;
use crate::listing::walker::{self, Folder};
use crate::provider::RootDir;

/// Long after anything the tests write: no stamp is racily clean against it.
const LATER: i64 = i64::MAX / 2;

/// A small tree (nested folders, an empty one, an ignored one) walked with its folders
/// recorded, and each listed file's stamp and filter.
struct Walked {
    _dir: tempfile::TempDir,
    root: PathBuf,
    files: Vec<Listed>,
    folders: Vec<Folder>,
    way: u64,
    stamps: Vec<Option<Stamp>>,
    filters: Vec<Option<GramFilter>>,
}

fn walked() -> Walked {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    for folder in ["src/deep", "docs", "empty", "target"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    for (name, text) in [
        ("src/a.rs", "fn alpha() {}\n"),
        ("src/deep/b.rs", "struct Beta;\n"),
        ("src/b.rs", "fn beta_two() {}\n"),
        ("docs/readme.md", "# A readme\n"),
        ("top.txt", "top level text\n"),
        ("target/out.rs", "ignored\n"),
        ("bin.dat", "\0binary"),
    ] {
        std::fs::write(root.join(name), text).unwrap();
    }
    let handle = RootDir::new(&root, None).unwrap();
    let found = walker::walk_with(&handle, Path::new(""), &|| false, None, None, (true, None)).unwrap();
    let stamps: Vec<Option<Stamp>> = found
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (i != 1).then(|| Stamp::of_meta(&std::fs::metadata(root.join(&f.rel)).unwrap())))
        .collect();
    let filters = found
        .files
        .iter()
        .zip(&stamps)
        .map(|(file, stamp)| {
            let bytes = std::fs::read(root.join(&file.rel)).unwrap();
            Some(GramFilter::of(&bytes).stamped(stamp.map_or(0, |s| s.digest())))
        })
        .collect();
    Walked { _dir: dir, root, files: found.files, folders: found.folders, way: found.way, stamps, filters }
}

fn encoded(tree: &Walked, uid: u32) -> Vec<u8> {
    let mut encoder = Encoder::new(&tree.root, uid);
    encoder.section(&Out {
        rel: Path::new(""),
        whitelists: false,
        way: tree.way,
        files: &tree.files,
        stamps: &tree.stamps,
        filters: &tree.filters,
        folders: &tree.folders,
    });
    encoder.finish()
}

fn uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

#[test]
fn what_is_written_is_read_back() {
    let tree = walked();
    let bytes = encoded(&tree, uid());
    let image = decode(&bytes, &tree.root, uid(), LATER).unwrap();
    assert_eq!(image.sections.len(), 1);
    let section = &image.sections[0];
    assert_eq!(section.way, tree.way);
    assert_eq!(section.len(), tree.files.len());
    // Every file is found again by its folder and name, at its rank, with its stamp, and its
    // filter only where its stamp is kept.
    let mut ranks: Vec<u32> = Vec::new();
    for (index, known) in section.files.iter().enumerate() {
        let file = &tree.files[known.rank as usize];
        assert_eq!(section.file_name(index as u32), file.rel.file_name().unwrap().as_encoded_bytes());
        assert_eq!(known.stamp, tree.stamps[known.rank as usize]);
        let filter = section.filter(index as u32);
        let filter = filter.as_ref();
        match tree.stamps[known.rank as usize] {
            Some(stamp) => {
                let filter = filter.unwrap();
                assert_eq!(filter.stamp(), stamp.digest());
                assert_eq!(filter.bits(), tree.filters[known.rank as usize].as_ref().unwrap().bits());
            }
            None => assert!(filter.is_none(), "a filter without a trusted stamp is not kept"),
        }
        ranks.push(known.rank);
    }
    ranks.sort_unstable();
    assert_eq!(ranks, (0..tree.files.len() as u32).collect::<Vec<_>>());
    // The folders, breadth first by name: every walked one (the empty one too), not the ignored.
    let names: Vec<&[u8]> = section.children(0).map(|c| section.folder_name(c)).collect();
    assert_eq!(names, [&b"docs"[..], b"empty", b"src"]);
    let src = section.child(0, b"src").unwrap();
    assert!(section.child(src, b"deep").is_some() && section.child(0, b"target").is_none());
    let in_src: Vec<&[u8]> = section.files_of(src).map(|f| section.file_name(f)).collect();
    assert_eq!(in_src, [&b"a.rs"[..], b"b.rs"]);
    assert!(section.file_named(src, b"b.rs").is_some() && section.file_named(src, b"c.rs").is_none());
    let root_record = tree.folders.iter().find(|f| f.rel.as_os_str().is_empty()).unwrap();
    assert_eq!(section.folders[0].stamp, root_record.stamp);
    assert_eq!(section.folders[0].found, root_record.found);
    assert_eq!(section.folders[0].rules, root_record.rules);
}

#[test]
fn stamps_changed_within_the_racy_window_of_the_write_are_not_trusted() {
    let tree = walked();
    let bytes = encoded(&tree, uid());
    // Written right after the files changed: none of their stamps is trusted.
    let written = tree.stamps.iter().flatten().map(|s| s.ctime_ns).max().unwrap();
    let image = decode(&bytes, &tree.root, uid(), written).unwrap();
    let section = &image.sections[0];
    assert!(section.files.iter().all(|f| f.stamp.is_none()));
    assert!((0..section.len() as u32).all(|index| section.filter(index).is_none()));
    assert!(section.folders.iter().all(|f| f.stamp.is_none()));
}

#[test]
fn an_index_truncated_or_corrupt_at_any_offset_is_refused_whole() {
    let tree = walked();
    let bytes = encoded(&tree, uid());
    assert!(bytes.len() > 1000, "{} bytes", bytes.len());
    for len in 0..bytes.len() {
        let refused = decode(&bytes[..len], &tree.root, uid(), LATER);
        assert!(refused.is_err(), "truncated to {len} bytes, it was read");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(decode(&longer, &tree.root, uid(), LATER).is_err(), "a byte appended");
    for at in 0..bytes.len() {
        for flip in [0x01u8, 0x80] {
            let mut corrupt = bytes.clone();
            corrupt[at] ^= flip;
            let refused = decode(&corrupt, &tree.root, uid(), LATER);
            assert!(refused.is_err(), "byte {at} changed ({flip:#x}), it was read");
        }
    }
}

#[test]
fn another_version_uid_or_root_is_refused_and_says_so() {
    let tree = walked();
    let bytes = encoded(&tree, uid());
    let mut other_version = bytes.clone();
    other_version[8..12].copy_from_slice(&(format::VERSION + 1).to_le_bytes());
    assert_eq!(
        decode(&other_version, &tree.root, uid(), LATER).unwrap_err(),
        IndexRefused::Version(format::VERSION + 1)
    );
    let theirs = encoded(&tree, uid() + 1);
    assert_eq!(decode(&theirs, &tree.root, uid(), LATER).unwrap_err(), IndexRefused::Uid(uid() + 1));
    let elsewhere = tree.root.join("elsewhere");
    assert!(matches!(decode(&bytes, &elsewhere, uid(), LATER), Err(IndexRefused::Root(_))));
    assert_eq!(
        decode(b"not an index at all, not at all.", &tree.root, uid(), LATER).unwrap_err(),
        IndexRefused::Magic
    );
    assert!(IndexRefused::Checksum.to_string().contains("corrupt"));
}

#[test]
fn the_folder_is_private_bounded_and_cleaned_of_unfinished_writes() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("state/index");
    let private = crate::provider::private::Private::new(std::slice::from_ref(&folder), &[]);
    let tree = walked();
    let bytes = encoded(&tree, uid());
    // Room for two indexes of this size, not three.
    let max_bytes = bytes.len() as u64 * 5 / 2;
    let config = IndexConfig { dir: folder.clone(), max_bytes, fsync: false };
    let indexes = Indexes::open(&config, Arc::clone(&private)).unwrap();
    assert_eq!(std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777, 0o700);
    assert!(indexes.write(&tree.root, &bytes).unwrap());
    let name = folder.join(Indexes::name(&tree.root));
    let meta = std::fs::metadata(&name).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // A hard link to it is known as the daemon's own file.
    std::fs::hard_link(&name, dir.path().join("link")).unwrap();
    assert!(private.is_private_file(&std::fs::metadata(dir.path().join("link")).unwrap()));
    let (image, len) = indexes.load(&tree.root).unwrap().unwrap();
    assert_eq!((image.sections[0].len(), len), (tree.files.len(), bytes.len() as u64));
    assert_eq!(indexes.roots()[0].1.bytes, bytes.len() as u64);
    // Two more roots' indexes: the least recently written goes to keep within the bound.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (second, third) = (tree.root.join("src"), tree.root.join("docs"));
    let rewritten = |root: &Path| {
        let mut encoder = Encoder::new(root, uid());
        encoder.section(&Out {
            rel: Path::new(""),
            whitelists: false,
            way: 0,
            files: &tree.files,
            stamps: &tree.stamps,
            filters: &tree.filters,
            folders: &tree.folders,
        });
        encoder.finish()
    };
    assert!(indexes.write(&second, &rewritten(&second)).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(indexes.write(&third, &rewritten(&third)).unwrap());
    assert!(indexes.load(&tree.root).unwrap().is_none(), "the oldest went");
    assert!(indexes.load(&second).unwrap().is_some() && indexes.load(&third).unwrap().is_some());
    // One bigger than the bound alone is not written, and the old one goes.
    let huge = vec![0u8; max_bytes as usize + 1];
    assert!(!indexes.write(&second, &huge).unwrap());
    assert!(indexes.load(&second).unwrap().is_none());
    // Corrupt: refused, and discarding removes it.
    let third_name = folder.join(Indexes::name(&third));
    let mut corrupt = std::fs::read(&third_name).unwrap();
    corrupt[100] ^= 1;
    std::fs::write(&third_name, &corrupt).unwrap();
    let why = indexes.load(&third).unwrap_err();
    assert!(matches!(why, Unread::IndexRefused(IndexRefused::Checksum)), "{why}");
    indexes.discard(&third, &why);
    assert!(!third_name.exists());
    // A link where an index belongs is never followed.
    std::os::unix::fs::symlink(dir.path().join("link"), &third_name).unwrap();
    assert!(matches!(indexes.load(&third), Err(Unread::IndexRefused(IndexRefused::Malformed(_)))));
    // An unfinished write a killed daemon left is removed at the next open.
    std::fs::write(folder.join(".tmp-0123456789abcdef"), "half").unwrap();
    let _again = Indexes::open(&config, private).unwrap();
    assert!(!folder.join(".tmp-0123456789abcdef").exists());
}

//! The journal on its own: entries recorded through the provider's hook, kept across a reopen,
//! a torn tail dropped, half-recorded changes settled by their files, caps and age; what it
//! does with files in its folder it did not write (other versions, garbage, links), and ids
//! never handed out twice.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::provider::journaled::{Attribution, Author};
use crate::provider::private::Private;

fn config(dir: &Path) -> JournalConfig {
    JournalConfig {
        dir: dir.join("journal"),
        max_bytes: 1 << 30,
        max_age: Duration::from_secs(7 * 86_400),
        max_file_bytes: 1 << 20,
        fsync: false,
    }
}

fn by(session: &str, owner: Option<&str>) -> Attribution {
    Attribution {
        author: Arc::new(Author {
            session: session.into(),
            client: Some("test".into()),
            owner: owner.map(Into::into),
        }),
        restore: false,
    }
}

fn open(config: JournalConfig) -> Arc<Journal> {
    Journal::open(config, Private::none()).unwrap()
}

/// A change of `path` from `old` to `new` as the provider tells it (one link, mode 0640 before).
fn told<'a>(by: &'a Attribution, path: &'a Path, old: Option<&'a [u8]>, new: &'a [u8]) -> ChangeToRecord<'a> {
    let kind = if old.is_some() { ChangeKind::Edit } else { ChangeKind::Create };
    ChangeToRecord {
        path,
        by,
        kind,
        before: old.map(Version::of),
        before_bytes: old,
        after: Some(Version::of(new)),
        after_bytes: Some(new),
        links: (u64::from(old.is_some()), 1),
        mode: old.map(|_| 0o640),
    }
}

/// Records a change of `path` from `old` to `new` as the provider would, landed or not.
fn change(journal: &Journal, path: &Path, old: Option<&[u8]>, new: &[u8], landed: bool) -> u64 {
    let by = by("s1", None);
    let seq = journal.begin(&told(&by, path, old, new)).unwrap().unwrap();
    journal.end(seq, landed);
    seq
}

fn all(journal: &Journal) -> Vec<Entry> {
    journal.list(&Filter::default(), 1000, |_| true).0
}

#[test]
fn changes_are_listed_newest_first_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    {
        let journal = open(config(dir.path()));
        change(&journal, &file, None, b"one\n", true);
        change(&journal, &file, Some(b"one\n"), b"two\n", true);
        change(&journal, &file, Some(b"two\n"), b"three\n", false);
        let entries = all(&journal);
        assert_eq!(
            entries.iter().map(|e| e.operation).collect::<Vec<_>>(),
            [Operation::Edit, Operation::Create]
        );
        assert_eq!(journal.last_version(&file), Some(Some(Version::of(b"two\n"))));
        assert_eq!(journal.content(&Version::of(b"one\n")).unwrap().as_deref(), Some(&b"one\n"[..]));
        // "three" never landed: its bytes were released.
        assert_eq!(journal.content(&Version::of(b"three\n")).unwrap(), None);
    }
    let journal = open(config(dir.path()));
    let entries = all(&journal);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].before, Some(Version::of(b"one\n")));
    assert!(entries.iter().all(|e| e.restorable && e.session.as_ref() == "s1"));
    assert_eq!(journal.stats().entries, 2);
    // Two versions kept once each, plus the log.
    assert!(journal.stats().bytes > 8);
    assert_eq!(change(&journal, &file, Some(b"two\n"), b"four\n", true), 4, "seq goes on after a reopen");
}

#[test]
fn a_second_daemon_cannot_use_the_same_journal() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(config(dir.path()));
    let second = Journal::open(config(dir.path()), Private::none()).unwrap_err();
    assert!(second.to_string().contains("in use by another filectxd"), "{second}");
}

#[test]
fn a_torn_tail_is_dropped_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    let cfg = config(dir.path());
    {
        let journal = open(cfg.clone());
        change(&journal, &file, None, b"one\n", true);
        change(&journal, &file, Some(b"one\n"), b"two\n", true);
    }
    let segment = std::fs::read_dir(&cfg.dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("log-"))
        .unwrap()
        .path();
    let good = std::fs::read(&segment).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(b"{\"k\":\"begin\",\"seq\":3,\"ti");
    std::fs::write(&segment, &torn).unwrap();
    let journal = open(cfg.clone());
    assert_eq!(all(&journal).len(), 2);
    drop(journal);
    assert_eq!(std::fs::read(&segment).unwrap(), good, "the torn tail is cut off the file");
}

#[test]
fn a_change_left_half_recorded_is_settled_by_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let landed = dir.path().join("landed.txt");
    let not_landed = dir.path().join("not-landed.txt");
    let cfg = config(dir.path());
    {
        let journal = open(cfg.clone());
        for path in [&landed, &not_landed] {
            let by = by("s1", None);
            // Begun, never ended: the daemon died between.
            let _seq = journal.begin(&told(&by, path, Some(b"old\n"), b"new\n")).unwrap();
        }
    }
    std::fs::write(&landed, b"new\n").unwrap();
    std::fs::write(&not_landed, b"old\n").unwrap();
    let journal = open(cfg);
    let entries = all(&journal);
    assert_eq!(entries.len(), 1);
    assert_eq!(&*entries[0].path, landed.as_path());
    assert_eq!(journal.content(&Version::of(b"old\n")).unwrap().as_deref(), Some(&b"old\n"[..]));
}

#[test]
fn the_byte_cap_drops_the_oldest_entries_and_their_contents() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = JournalConfig { max_bytes: 4 << 20, ..config(dir.path()) };
    let journal = open(cfg.clone());
    let mut old: Option<Vec<u8>> = None;
    for i in 0..40u8 {
        let new = vec![b'a' + i % 26; 256 << 10];
        change(&journal, &dir.path().join("big.txt"), old.as_deref(), &new, true);
        old = Some(new);
    }
    let stats = journal.stats();
    assert!(stats.bytes <= cfg.max_bytes, "{stats:?}");
    let entries = all(&journal);
    assert!(entries.len() < 40 && entries.len() > 2, "{}", entries.len());
    assert_eq!(entries[0].seq, 40, "the newest stay");
    let objects: usize = walk_files(&cfg.dir.join("objects"));
    assert!(objects <= entries.len() + 1, "{objects} contents for {} entries", entries.len());
    drop(journal);
    let reopened = open(cfg);
    assert_eq!(all(&reopened).len(), entries.len(), "the drop is remembered");
}

/// The smallest cap holds on disk, its log included, through thousands of small changes (the
/// log alone once grew to a whole 4 MiB segment past a 1 MiB cap), and keeps many entries.
#[test]
fn the_smallest_byte_cap_holds_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = JournalConfig { max_bytes: MIN_MAX_BYTES, ..config(dir.path()) };
    assert!(matches!(
        Journal::open(JournalConfig { max_bytes: MIN_MAX_BYTES - 1, ..cfg.clone() }, Private::none()),
        Err(OpenError::TooSmall(_))
    ));
    let journal = open(cfg.clone());
    let file = dir.path().join("a.txt");
    let mut old = b"0\n".to_vec();
    change(&journal, &file, None, &old, true);
    for i in 1..3000u32 {
        let new = format!("{i}\n{}\n", "x".repeat(200)).into_bytes();
        change(&journal, &file, Some(&old), &new, true);
        old = new;
        if i % 500 == 0 {
            let on_disk = disk_bytes(&cfg.dir);
            assert!(on_disk <= cfg.max_bytes, "{on_disk} bytes on disk after {i} changes");
        }
    }
    let entries = all(&journal).len();
    assert!(entries > 100, "only {entries} entries kept");
    assert!(journal.stats().bytes <= cfg.max_bytes);
    // A version over a quarter of the cap is kept without its bytes: the newest entry fits.
    let big = vec![b'b'; (MIN_MAX_BYTES / 4 + 1) as usize];
    change(&journal, &file, Some(&old), &big, true);
    assert!(disk_bytes(&cfg.dir) <= cfg.max_bytes);
    assert!(!all(&journal)[0].after_kept);
}

#[test]
fn entries_older_than_the_age_limit_go() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = JournalConfig { max_age: Duration::from_millis(50), ..config(dir.path()) };
    let journal = open(cfg);
    let file = dir.path().join("a.txt");
    change(&journal, &file, None, b"one\n", true);
    change(&journal, &file, Some(b"one\n"), b"two\n", true);
    std::thread::sleep(Duration::from_millis(80));
    change(&journal, &file, Some(b"two\n"), b"three\n", true);
    let entries = all(&journal);
    assert_eq!(entries.iter().map(|e| e.seq).collect::<Vec<_>>(), [3]);
    assert_eq!(journal.content(&Version::of(b"one\n")).unwrap(), None);
}

#[test]
fn a_file_over_the_cap_is_recorded_without_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = JournalConfig { max_file_bytes: 8, ..config(dir.path()) };
    let journal = open(cfg);
    let file = dir.path().join("a.txt");
    change(&journal, &file, Some(b"0123456789\n"), b"short\n", true);
    let entries = all(&journal);
    assert!(!entries[0].restorable);
    assert_eq!(journal.content(&Version::of(b"short\n")).unwrap().as_deref(), Some(&b"short\n"[..]));
}

#[test]
fn an_outside_change_is_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let journal = open(config(dir.path()));
    let file = dir.path().join("a.txt");
    let (one, two) = (Version::of(b"one\n"), Version::of(b"two\n"));
    let before = Side { version: one, bytes: Some(b"one\n"), links: Some(1) };
    let after = Side { version: two, bytes: Some(b"two\n"), links: Some(2) };
    assert!(journal.outside(&file, before, Some(after)).is_some());
    assert!(journal.outside(&file, before, Some(after)).is_none());
    let entries = all(&journal);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].operation, Operation::Outside);
    assert_eq!(&*entries[0].session, OUTSIDE_SESSION);
    assert_eq!(entries[0].links, (Some(1), Some(2)), "each version's links are kept with it");
}

#[test]
fn list_filters_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let journal = open(config(dir.path()));
    let (a, b) = (dir.path().join("x/a.txt"), dir.path().join("y/b.txt"));
    for i in 0..5u8 {
        change(&journal, if i % 2 == 0 { &a } else { &b }, None, &[b'0' + i, b'\n'], true);
    }
    let folder = dir.path().join("x");
    let only_x = Filter { path: Some(&folder), ..Filter::default() };
    assert_eq!(journal.list(&only_x, 10, |_| true).0.len(), 3);
    let (page, more) = journal.list(&Filter::default(), 2, |_| true);
    assert_eq!((page.iter().map(|e| e.seq).collect::<Vec<_>>(), more), (vec![5, 4], true));
    let next = Filter { before_seq: Some(4), ..Filter::default() };
    let (page, more) = journal.list(&next, 2, |_| true);
    assert_eq!((page.iter().map(|e| e.seq).collect::<Vec<_>>(), more), (vec![3, 2], true));
    let hidden = journal.list(&Filter::default(), 10, |p| !p.starts_with(&folder)).0;
    assert_eq!(hidden.len(), 2, "what the session may not read is never listed");
}

fn walk_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|fans| {
            fans.flatten().map(|fan| std::fs::read_dir(fan.path()).map(|f| f.count()).unwrap_or(0)).sum()
        })
        .unwrap_or(0)
}

/// Bytes of every file beneath `dir`.
fn disk_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() { disk_bytes(&entry.path()) } else { meta.len() };
    }
    total
}

/// The journal's log segments, in order.
fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("log-0"))
        .collect();
    found.sort();
    found
}

#[test]
fn links_and_mode_are_kept_with_each_entry() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    {
        let journal = open(config(dir.path()));
        let by = by("s1", None);
        let mut linked = told(&by, &file, Some(b"one\n"), b"two\n");
        linked.links = (3, 3);
        linked.mode = Some(0o600);
        let seq = journal.begin(&linked).unwrap().unwrap();
        journal.end(seq, true);
    }
    let journal = open(config(dir.path()));
    let entry = &all(&journal)[0];
    assert_eq!((entry.links, entry.mode), ((Some(3), Some(3)), Some(0o600)), "kept across a reopen");
}

/// Ids are never handed out twice: cut the log inside its last record (a crash while writing
/// it), and the next change still gets a new id.
#[test]
fn ids_are_never_reused_after_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let file = dir.path().join("a.txt");
    {
        let journal = open(cfg.clone());
        change(&journal, &file, None, b"1\n", true);
        change(&journal, &file, Some(b"1\n"), b"2\n", true);
        assert_eq!(change(&journal, &file, Some(b"2\n"), b"3\n", true), 3);
        // Killed: no clean close (which would write the next id down).
        journal.crash();
    }
    let segment = segments(&cfg.dir).pop().unwrap();
    let text = std::fs::read(&segment).unwrap();
    let last_begin = text.windows(9).rposition(|w| w == b"{\"k\":\"beg").unwrap();
    std::fs::write(&segment, &text[..last_begin + 20]).unwrap();
    let journal = open(cfg.clone());
    assert_eq!(all(&journal).len(), 2, "the torn entry 3 is gone");
    let next = change(&journal, &file, Some(b"2\n"), b"4\n", true);
    assert!(next > 3, "id {next} was already shown for another change");
}

/// A clean close writes the next id down: ids go on without a gap.
#[test]
fn ids_go_on_without_a_gap_after_a_clean_close() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    {
        let journal = open(config(dir.path()));
        change(&journal, &file, None, b"1\n", true);
    }
    let journal = open(config(dir.path()));
    assert_eq!(change(&journal, &file, Some(b"1\n"), b"2\n", true), 2);
}

/// Files in its folder it did not write are left alone and the rest stays in use; a segment of
/// another format version means no journal at all, and is not touched.
#[test]
fn strangers_in_its_folder_are_left_alone_and_another_version_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let file = dir.path().join("a.txt");
    {
        let journal = open(cfg.clone());
        change(&journal, &file, None, b"1\n", true);
        change(&journal, &file, Some(b"1\n"), b"2\n", true);
    }
    let garbage = cfg.dir.join("log-00000000000000000900");
    std::fs::write(&garbage, b"\x00\x01 not a journal\n").unwrap();
    std::fs::write(cfg.dir.join("log-evil"), b"{}\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("a.txt"), cfg.dir.join("log-00000000000000000901")).unwrap();
    // A damaged line between good ones is skipped; the entries around it stay.
    let segment = segments(&cfg.dir).into_iter().next().unwrap();
    let mut text = std::fs::read(&segment).unwrap();
    let second = text.windows(9).rposition(|w| w == b"{\"k\":\"beg").unwrap();
    text.splice(second..second, b"{\"k\":\"begin\",\"seq\":\x07\n".iter().copied());
    std::fs::write(&segment, &text).unwrap();
    {
        let journal = open(cfg.clone());
        assert_eq!(all(&journal).len(), 2, "both entries around the damaged line are listed");
        assert!(journal.off().is_none());
        assert_eq!(change(&journal, &file, Some(b"2\n"), b"3\n", true), 3, "and it records");
        assert_eq!(all(&journal).len(), 3);
    }
    assert_eq!(std::fs::read(&garbage).unwrap(), b"\x00\x01 not a journal\n", "left alone");
    assert!(cfg.dir.join("log-evil").exists());
    // Another format version: not used, not touched.
    let newer = cfg.dir.join("log-00000000000000000950");
    std::fs::write(&newer, b"{\"format\":\"filectx-journal\",\"version\":2}\n").unwrap();
    let before = disk_bytes(&cfg.dir);
    match Journal::open(cfg.clone(), Private::none()) {
        Err(OpenError::Format(why)) => assert!(why.contains("format 2"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(disk_bytes(&cfg.dir), before);
}

/// A link planted among the journal's contents is never followed: the sweep after a load does
/// not empty the folder it points to, and no content is read or written through it.
#[test]
fn a_link_in_its_folders_is_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let file = dir.path().join("a.txt");
    {
        let journal = open(cfg.clone());
        change(&journal, &file, None, b"1\n", true);
    }
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("precious"), b"keep me").unwrap();
    std::os::unix::fs::symlink(&elsewhere, cfg.dir.join("objects/zz")).unwrap();
    let fan = Version::of(b"2\n").to_string()[..2].to_owned();
    let _ = std::fs::remove_dir_all(cfg.dir.join("objects").join(&fan));
    std::os::unix::fs::symlink(&elsewhere, cfg.dir.join("objects").join(&fan)).unwrap();
    let journal = open(cfg.clone());
    journal.load();
    assert_eq!(std::fs::read(elsewhere.join("precious")).unwrap(), b"keep me", "the sweep followed a link");
    // Keeping a content whose fan folder is a link replaces the link, never writes through it.
    change(&journal, &file, Some(b"1\n"), b"2\n", true);
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1, "written through a link");
    assert!(cfg.dir.join("objects").join(&fan).is_dir() && !cfg.dir.join("objects").join(&fan).is_symlink());
    assert_eq!(journal.content(&Version::of(b"2\n")).unwrap().as_deref(), Some(&b"2\n"[..]));
}

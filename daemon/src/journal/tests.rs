//! The journal on its own: entries recorded through the provider's hook, kept across a reopen,
//! a torn tail dropped, half-recorded changes settled by their files, caps and age.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::provider::journaled::{Attribution, Author};

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

/// Records a change of `path` from `old` to `new` as the provider would, landed or not.
fn change(journal: &Journal, path: &Path, old: Option<&[u8]>, new: &[u8], landed: bool) -> u64 {
    let by = by("s1", None);
    let kind = if old.is_some() { ChangeKind::Edit } else { ChangeKind::Create };
    let change = Change {
        path,
        by: &by,
        kind,
        before: old.map(Version::of),
        before_bytes: old,
        after: Some(Version::of(new)),
        after_bytes: Some(new),
    };
    let seq = journal.begin(&change).unwrap();
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
        let journal = Journal::open(config(dir.path())).unwrap();
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
    let journal = Journal::open(config(dir.path())).unwrap();
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
    let _first = Journal::open(config(dir.path())).unwrap();
    let second = Journal::open(config(dir.path())).unwrap_err();
    assert!(second.to_string().contains("in use by another filectxd"), "{second}");
}

#[test]
fn a_torn_tail_is_dropped_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    let cfg = config(dir.path());
    {
        let journal = Journal::open(cfg.clone()).unwrap();
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
    let journal = Journal::open(cfg.clone()).unwrap();
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
        let journal = Journal::open(cfg.clone()).unwrap();
        for path in [&landed, &not_landed] {
            let by = by("s1", None);
            let change = Change {
                path,
                by: &by,
                kind: ChangeKind::Edit,
                before: Some(Version::of(b"old\n")),
                before_bytes: Some(b"old\n"),
                after: Some(Version::of(b"new\n")),
                after_bytes: Some(b"new\n"),
            };
            // Begun, never ended: the daemon died between.
            let _seq = journal.begin(&change).unwrap();
        }
    }
    std::fs::write(&landed, b"new\n").unwrap();
    std::fs::write(&not_landed, b"old\n").unwrap();
    let journal = Journal::open(cfg).unwrap();
    let entries = all(&journal);
    assert_eq!(entries.len(), 1);
    assert_eq!(&*entries[0].path, landed.as_path());
    assert_eq!(journal.content(&Version::of(b"old\n")).unwrap().as_deref(), Some(&b"old\n"[..]));
}

#[test]
fn the_byte_cap_drops_the_oldest_entries_and_their_contents() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = JournalConfig { max_bytes: 64 * 1024, ..config(dir.path()) };
    let journal = Journal::open(cfg.clone()).unwrap();
    let mut old: Option<Vec<u8>> = None;
    for i in 0..40u8 {
        let new = vec![b'a' + i % 26; 4096];
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
    let reopened = Journal::open(cfg).unwrap();
    assert_eq!(all(&reopened).len(), entries.len(), "the drop is remembered");
}

#[test]
fn entries_older_than_the_age_limit_go() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = JournalConfig { max_age: Duration::from_millis(50), ..config(dir.path()) };
    let journal = Journal::open(cfg).unwrap();
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
    let journal = Journal::open(cfg).unwrap();
    let file = dir.path().join("a.txt");
    change(&journal, &file, Some(b"0123456789\n"), b"short\n", true);
    let entries = all(&journal);
    assert!(!entries[0].restorable);
    assert_eq!(journal.content(&Version::of(b"short\n")).unwrap().as_deref(), Some(&b"short\n"[..]));
}

#[test]
fn an_outside_change_is_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(config(dir.path())).unwrap();
    let file = dir.path().join("a.txt");
    let (one, two) = (Version::of(b"one\n"), Version::of(b"two\n"));
    assert!(journal.outside(&file, (one, b"one\n"), Some((two, Some(b"two\n")))).is_some());
    assert!(journal.outside(&file, (one, b"one\n"), Some((two, Some(b"two\n")))).is_none());
    let entries = all(&journal);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].operation, Operation::Outside);
    assert_eq!(&*entries[0].session, OUTSIDE_SESSION);
}

#[test]
fn list_filters_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(config(dir.path())).unwrap();
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

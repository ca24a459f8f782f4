//! Tests of the line index, the scan and the window reads.

use std::borrow::Cow;

use memchr::memchr_iter;

use super::lines::*;
use super::scan::*;
use super::window::*;
use crate::provider::version::Version;

/// Whole lines, with no byte budget to speak of.
fn req(offset: u64, limit: u64) -> WindowRequest {
    WindowRequest::whole(offset, limit, u64::MAX)
}

fn cut(text: &[u8], request: &WindowRequest) -> Window {
    let (_, index) = Scanner::scan(text);
    window(text, &index.unwrap(), request).unwrap()
}

fn lines(text: &[u8], offset: u64, limit: u64) -> Window {
    cut(text, &req(offset, limit))
}

/// `text`'s index with its line ends kept.
fn with_ends(text: &[u8]) -> LineIndex {
    let index = Scanner::scan(text).1.unwrap();
    assert!(index.set_ends(index.line_ends(text).expect("the text's own ends")));
    index
}

/// A source that hands out at most `.1` bytes at a time (windows span chunks).
struct Small<'a>(&'a [u8], usize);

impl ByteSource for Small<'_> {
    fn chunk_at(&self, offset: u64, max: usize) -> std::io::Result<Cow<'_, [u8]>> {
        let start = usize::try_from(offset).unwrap().min(self.0.len());
        let end = start.saturating_add(max.min(self.1)).min(self.0.len());
        Ok(Cow::Owned(self.0[start..end].to_vec()))
    }
}

#[test]
fn windows_cut_with_the_line_ends_kept_are_the_windows_searched() {
    // Lines of every kind: empty, CRLF, a lone CR, non-ASCII, one just at the character
    // cap (with its \r), longer ones, a last line with and without its newline, a BOM.
    let mut seed = 7u64;
    let mut next = move |below: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % below
    };
    for case in 0..40 {
        let mut text = if case % 3 == 0 { "\u{feff}".to_owned() } else { String::new() };
        for _ in 0..next(300) {
            match next(12) {
                0 => {}
                // Every fourth text without a `\r` before a newline (cut from the ends alone).
                1 if case % 4 != 1 => text.push_str("crlf ü\r"),
                2 => text.push_str("lone \r cr"),
                3 => text.push_str(&"é".repeat(1 + next(30) as usize)),
                4 => text.push_str(&"x".repeat(2000 + next(3) as usize)),
                5 => text.push_str(&"y".repeat(1999 + next(3) as usize)),
                _ => text.push_str(&"word \"q\" ".repeat(next(8) as usize)),
            }
            text.push('\n');
        }
        if case % 2 == 0 {
            text.push_str("last");
        }
        let bytes = text.as_bytes();
        let sparse = Scanner::scan(bytes).1.unwrap();
        let dense = with_ends(bytes);
        assert_eq!(dense.ends().map(<[u32]>::len), Some(memchr_iter(b'\n', bytes).count()));
        let total = sparse.total_lines;
        for _ in 0..20 {
            let offset = 1 + next(total + 2);
            let limit = 1 + next(total + 2);
            let budget = if next(2) == 0 { u64::MAX } else { next(20_000) };
            let cap = [None, Some(2000), Some(5)][next(3) as usize];
            let fit_first = next(2) == 0;
            let request = WindowRequest {
                offset,
                limit,
                max_line_chars: cap,
                max_bytes: budget,
                overhead: |n, cut| 8 + n % 3 + if cut { 30 } else { 0 },
                overhead_of_lines: None,
                fit_first,
            };
            let at_once = WindowRequest {
                overhead_of_lines: Some(|first, last| (first..=last).map(|n| 8 + n % 3).sum()),
                ..request
            };
            let expected = window(bytes, &sparse, &request).unwrap();
            let chunk = 1 + next(5000) as usize;
            assert_eq!(window(bytes, &dense, &request).unwrap(), expected, "{case} {request:?}");
            assert_eq!(window(bytes, &dense, &at_once).unwrap(), expected, "{case} {request:?}");
            assert_eq!(window(&Small(bytes, chunk), &dense, &at_once).unwrap(), expected, "{case} {chunk}");
            assert_eq!(window(bytes, &sparse, &at_once).unwrap(), expected, "{case} {request:?}");
            assert_eq!(window(&Small(bytes, chunk), &dense, &request).unwrap(), expected, "{case} {chunk}");
            assert_eq!(window(&Small(bytes, chunk), &sparse, &request).unwrap(), expected, "{case} {chunk}");
        }
    }
}

#[test]
fn line_ends_read_in_pieces_are_the_ends_of_the_whole() {
    // Lines of 0-199 bytes over two and a half chunks, read back 1 to 7,000 bytes at a time.
    let mut text = Vec::new();
    for n in 0..2_000u32 {
        text.extend(std::iter::repeat_n(b'x', (n * 37 % 200) as usize));
        text.push(b'\n');
    }
    text.extend_from_slice(b"open last line");
    assert!(text.len() > 2 * ENDS_CHUNK);
    let index = Scanner::scan(&text).1.unwrap();
    let whole: Vec<u32> =
        text.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(at, _)| at as u32).collect();
    for piece in [1usize, 7, 4096, 7_000] {
        let ends = index.read_line_ends(|buf, pos| {
            let from = &text[pos as usize..];
            let n = buf.len().min(from.len()).min(piece);
            buf[..n].copy_from_slice(&from[..n]);
            Ok(n)
        });
        let ends = ends.expect("the text's own ends");
        assert_eq!(ends.offsets(), &whole[..], "read {piece} bytes at a time");
        assert!(!ends.after_cr());
    }
    // A file that ends early, or fails to read, has no line ends.
    assert_eq!(index.read_line_ends(|_, pos| Ok(if pos < 1000 { 10 } else { 0 })), None);
    assert_eq!(index.read_line_ends(|_, _| Err(std::io::Error::other("gone"))), None);
}

#[test]
fn line_ends_say_whether_a_newline_follows_a_carriage_return() {
    // A `\r` that is the last byte of one read and a `\n` the first of the next.
    let mut across = vec![b'x'; ENDS_CHUNK - 1];
    across.extend_from_slice(b"\r\ntail\n");
    let cases: [(&[u8], bool); 6] = [
        (b"a\nb\rc\nd", false),
        (b"\na\r", false),
        (b"\r\rx\n\r", false),
        (b"a\nb\r\nc", true),
        (b"\r\n", true),
        (&across, true),
    ];
    for (text, after_cr) in cases {
        let index = Scanner::scan(text).1.unwrap();
        for piece in [1usize, 2, 3, ENDS_CHUNK] {
            let ends = index
                .read_line_ends(|buf, pos| {
                    let from = &text[pos as usize..];
                    let n = buf.len().min(from.len()).min(piece);
                    buf[..n].copy_from_slice(&from[..n]);
                    Ok(n)
                })
                .expect("the text's own ends");
            assert_eq!(
                ends.after_cr(),
                after_cr,
                "{piece} {:?}",
                String::from_utf8_lossy(&text[..text.len().min(20)])
            );
        }
    }
}

#[test]
fn line_ends_are_kept_only_for_the_bytes_of_their_index() {
    let text = b"one\ntwo\r\nthree";
    let index = Scanner::scan(text).1.unwrap();
    assert_eq!(index.checkpoints.len(), 2);
    assert_eq!(index.line_ends(text).map(|ends| ends.offsets().to_vec()), Some(vec![3u32, 8]));
    assert_eq!(index.line_ends(b"one\ntwo\r\nth\nee"), None, "a line more");
    assert_eq!(index.line_ends(b"on\netwo\r\nthree"), None, "a checkpoint elsewhere");
    assert_eq!(index.line_ends(b"one\ntwo\r\nthreee"), None, "another length");
    assert_eq!(index.ends_bytes(), 0);
    assert!(index.set_ends(index.line_ends(text).unwrap()));
    assert!(!index.set_ends(LineEnds { at: Box::new([]), after_cr: false }), "set once");
    assert_eq!(index.ends_bytes(), 8);
    // Windows of a file that changed under its index stop where its bytes disagree.
    let w = window(&b"one\ntwo\r\nthree"[..], &index, &req(1, 3)).unwrap();
    assert_eq!(w.lines, ["one", "two", "three"]);
    let moved = window(&b"on\nxtwo\r\nthree"[..], &index, &req(1, 3));
    assert!(moved.is_err() || moved.unwrap().lines != ["one", "two", "three"]);
    // Files of 64 to 512 KiB of lines 8 bytes long on average, or longer, want them.
    let long = "a line of text\n".repeat(DENSE_MIN_BYTES as usize / 15 + 1);
    assert!(Scanner::scan(long.as_bytes()).1.unwrap().wants_ends());
    let small = "a line of text\n".repeat(DENSE_MIN_BYTES as usize / 15 - 1);
    assert!(!Scanner::scan(small.as_bytes()).1.unwrap().wants_ends());
    let short = "a\n".repeat(DENSE_MIN_BYTES as usize);
    assert!(!Scanner::scan(short.as_bytes()).1.unwrap().wants_ends());
    let big = "a line of text\n".repeat(DENSE_MAX_BYTES as usize / 15 + 1);
    assert!(!Scanner::scan(big.as_bytes()).1.unwrap().wants_ends());
}

#[test]
fn the_word_newline_search_finds_what_memchr_finds() {
    let mut bytes = Vec::new();
    for i in 0..300u32 {
        bytes.push(match i * 7919 % 13 {
            0 | 5 => b'\n',
            1 => 0x8a,
            2 => 0x0b,
            3 => 0xff,
            4 => 0x00,
            _ => b'a' + (i % 26) as u8,
        });
    }
    for len in [0, 1, 7, 8, 9, 63, 64, 65, 300] {
        let bytes = &bytes[..len];
        for from in 0..=len.min(20) {
            let found: Vec<usize> = Newlines::new(bytes, from).collect();
            let expected: Vec<usize> = memchr::memchr_iter(b'\n', &bytes[from..]).map(|i| from + i).collect();
            assert_eq!(found, expected, "{len} from {from}");
        }
    }
    assert_eq!(Newlines::new(&[b'\n'; 17], 0).count(), 17);
}

#[test]
fn a_window_read_from_a_chunk_that_starts_inside_a_character_is_the_same() {
    use std::io::Write as _;
    // Line 3, after a checkpoint, crosses the first read's end: finding line 5 reads on
    // from inside line 3 (inside a character, for one of the two prefixes), and that read
    // holds the window's lines.
    for prefix in ["x", "xy"] {
        let mut text = String::from("line 1\nline 2\n");
        text.push_str(prefix);
        text.push_str(&"é".repeat(3000));
        text.push('\n');
        for i in 4..=40 {
            text.push_str(&format!("line {i} ü\r\n"));
        }
        let (_, index) = Scanner::scan(text.as_bytes());
        let index = index.unwrap();
        let mut temp = tempfile::NamedTempFile::new().unwrap();
        temp.write_all(text.as_bytes()).unwrap();
        let file = std::fs::File::open(temp.path()).unwrap();
        for (offset, limit) in [(5, 5), (4, 37), (1, 3), (40, 1)] {
            let request = WindowRequest::whole(offset, limit, u64::MAX).cut_at(Some(2000));
            let read = window(&file, &index, &request).unwrap();
            let held = window(text.as_bytes(), &index, &request).unwrap();
            assert_eq!(read, held, "{offset} {limit}");
            assert_eq!(read.lines.len() as u64, limit);
        }
        let w = window(&file, &index, &WindowRequest::whole(5, 2, u64::MAX)).unwrap();
        assert_eq!(w.lines, ["line 5 ü", "line 6 ü"]);
        assert_eq!(w.lines.text_len(), 2 * "line 5 ü".len());
    }
}

#[test]
fn the_inline_newline_search_finds_what_memchr_finds() {
    for len in 0..90 {
        for at in 0..=len {
            for other in [0u8, 0x0b, 0x8a, 0x09, 0xff, b'x'] {
                let mut bytes = vec![other; len];
                if at < len {
                    bytes[at] = b'\n';
                    if at + 3 < len {
                        bytes[at + 3] = b'\n';
                    }
                }
                assert_eq!(newline(&bytes), memchr::memchr(b'\n', &bytes), "{other:#x} {at} {len}");
            }
        }
    }
}

#[test]
fn line_counts() {
    let count = |t: &[u8]| Scanner::scan(t).1.unwrap().total_lines();
    assert_eq!(count(b""), 0);
    assert_eq!(count(b"\n"), 1);
    assert_eq!(count(b"a"), 1);
    assert_eq!(count(b"a\nb"), 2);
    assert_eq!(count(b"a\nb\n"), 2);
    assert_eq!(count(b"a\n\nb\n"), 3);
    assert_eq!(count(b"\xEF\xBB\xBF"), 0);
    assert_eq!(count(b"\xEF\xBB\xBFx\n"), 1);
}

#[test]
fn windows_hide_bom_and_cr_and_keep_empty_lines() {
    let w = lines(b"\xEF\xBB\xBFone\r\ntwo\r\n\r\nfour", 1, 10);
    assert_eq!(w.lines, ["one", "two", "", "four"]);
    assert_eq!(w.total_lines, 4);
    let w = lines(b"a\nb\nc\n", 2, 1);
    assert_eq!((w.start_line, w.lines.to_vec()), (2, vec!["b".to_owned()]));
    assert!(lines(b"a\n", 2, 5).lines.is_empty());
}

#[test]
fn long_lines_are_whole_unless_a_character_cap_is_asked() {
    let long = "é".repeat(2500);
    let text = format!("short\n{long}\n{}\r\n", "x".repeat(2000));
    let w = lines(text.as_bytes(), 1, 3);
    assert_eq!(w.lines.get(1).unwrap(), long, "whole");
    assert!(w.truncated.is_empty() && !w.capped && w.oversized.is_none());
    let w = cut(text.as_bytes(), &req(1, 3).cut_at(Some(2000)));
    assert_eq!(w.lines.get(1).unwrap().chars().count(), 2000);
    assert_eq!(w.lines.get(2).unwrap().len(), 2000, "exactly the cap plus \\r is not cut");
    assert_eq!(w.truncated, vec![2]);
}

#[test]
fn a_window_of_whole_lines_stops_before_its_byte_budget() {
    let text = "aaaa\nbbbb\r\ncccc\ndd\n";
    // 4 + 4 bytes fit in 9, the third line does not.
    let w = cut(text.as_bytes(), &WindowRequest::whole(1, 10, 9));
    assert_eq!((w.lines.to_vec(), w.capped), (vec!["aaaa".to_owned(), "bbbb".to_owned()], true));
    // Exactly full: the \r does not count, and reaching the last asked line is not capped.
    let w = cut(text.as_bytes(), &WindowRequest::whole(2, 2, 8));
    assert_eq!((w.lines.to_vec(), w.capped), (vec!["bbbb".to_owned(), "cccc".to_owned()], false));
    // A first line over the budget: no lines, its size reported.
    let w = cut(text.as_bytes(), &WindowRequest::whole(2, 2, 3));
    assert!(w.lines.is_empty());
    assert_eq!(w.oversized, Some(Oversized { line: 2, bytes: 5 }));
    // Unless asked to cut it to fit, counting what the caller adds per line.
    let request = WindowRequest {
        fit_first: true,
        overhead: |_, cut| if cut { 2 } else { 1 },
        overhead_of_lines: Some(|first, last| last + 1 - first),
        ..WindowRequest::whole(3, 5, 4)
    };
    let w = cut(text.as_bytes(), &request);
    assert_eq!((w.lines.to_vec(), w.truncated.clone(), w.capped), (vec!["cc".to_owned()], vec![3], true));
    // Whole lines and overhead: "dd" costs 3 with its overhead of 1.
    let request = WindowRequest {
        overhead: |_, _| 1,
        overhead_of_lines: Some(|first, last| last + 1 - first),
        ..WindowRequest::whole(3, 5, 8)
    };
    let w = cut(text.as_bytes(), &request);
    assert_eq!((w.lines.to_vec(), w.capped), (vec!["cccc".to_owned(), "dd".to_owned()], false));
    // Cut to fit at a character boundary.
    let w = cut("ééé\n".as_bytes(), &WindowRequest { fit_first: true, ..WindowRequest::whole(1, 1, 5) });
    assert_eq!((w.lines.to_vec(), w.capped), (vec!["éé".to_owned()], false));
}

/// A source that counts the bytes it hands out.
struct Counting<'a>(&'a [u8], std::sync::atomic::AtomicU64);

impl ByteSource for Counting<'_> {
    fn chunk_at(&self, offset: u64, max: usize) -> std::io::Result<Cow<'_, [u8]>> {
        let start = usize::try_from(offset).unwrap().min(self.0.len());
        let end = start.saturating_add(max).min(self.0.len());
        self.1.fetch_add((end - start) as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(Cow::Borrowed(&self.0[start..end]))
    }
}

#[test]
fn a_huge_line_is_never_read_whole_to_be_cut_or_refused() {
    let huge = "y".repeat(4 << 20);
    let index = Scanner::scan(huge.as_bytes()).1.unwrap();
    let source = Counting(huge.as_bytes(), Default::default());
    let read = || source.1.swap(0, std::sync::atomic::Ordering::Relaxed);
    let w = window(&source, &index, &req(1, 2000).cut_at(Some(2000))).unwrap();
    assert_eq!((w.lines.get(0).unwrap().len(), w.truncated.clone()), (2000, vec![1]));
    let bytes = read();
    assert!(bytes <= READ_AHEAD as u64, "one read for the prefix, not the line: {bytes}");
    let w = window(&source, &index, &WindowRequest::whole(1, 2000, 1 << 20)).unwrap();
    assert_eq!(w.oversized, Some(Oversized { line: 1, bytes: 4 << 20 }));
    // Its length is learnt by reading on, but nothing past the budget is kept.
    assert!(w.lines.is_empty());
    read();
    let two = format!("{huge}\nz\n");
    let index = Scanner::scan(two.as_bytes()).1.unwrap();
    let source = Counting(two.as_bytes(), Default::default());
    let w = window(&source, &index, &req(1, 2).cut_at(Some(10))).unwrap();
    assert_eq!(w.lines, ["y".repeat(10), "z".to_owned()]);
    let bytes = source.1.load(std::sync::atomic::Ordering::Relaxed);
    assert!(bytes <= READ_AHEAD as u64 + 2, "the next line's checkpoint is jumped to: {bytes}");
}

#[test]
fn not_text_is_found_across_chunk_boundaries() {
    let check = |bytes: &[u8], chunk: usize| {
        let mut s = Scanner::new();
        for c in bytes.chunks(chunk) {
            s.feed(c);
        }
        s.finish().1.err()
    };
    let multibyte = "ab日本語✓é".as_bytes();
    for chunk in 1..8 {
        assert_eq!(check(multibyte, chunk), None, "chunk {chunk}");
        assert_eq!(check(b"ab\xffcd", chunk), Some(NotText::InvalidUtf8(2)), "chunk {chunk}");
        assert_eq!(check(b"abc\0", chunk), Some(NotText::Nul(3)), "chunk {chunk}");
        assert_eq!(check(b"ab\xe6\x97", chunk), Some(NotText::InvalidUtf8(2)), "chunk {chunk}");
    }
}

#[test]
fn a_head_is_judged_as_the_whole_scan_would_judge_it() {
    let full = |bytes: &[u8]| Scanner::scan(bytes).1.err();
    // A character cut by the head's end is fine unless the file ends there.
    let text = "abc日本".as_bytes();
    let cut = &text[..text.len() - 1];
    assert_eq!(check_head(cut, false), Ok(()));
    assert_eq!(check_head(cut, true).err(), full(cut));
    for bad in [&b"ab\0cd"[..], b"ab\xffcd", b"\xEF\xBB\xBF\0", b"a\xe6\x97x"] {
        let expected = full(bad);
        assert!(expected.is_some());
        assert_eq!(check_head(bad, false).err(), expected, "{bad:?}");
        assert_eq!(check_head(bad, true).err(), expected, "{bad:?}");
    }
    assert_eq!(check_head(b"plain text\n", false), Ok(()));
}

#[test]
fn sequential_chunked_and_parallel_scans_agree() {
    let data: Vec<u8> = (0..3_000_000u32).flat_map(|i| format!("line {i} é\n").into_bytes()).collect();
    let whole = Scanner::scan(&data);
    let mut s = Scanner::new();
    for c in data.chunks(777_777) {
        s.feed(c);
    }
    let chunked = s.finish();
    assert_eq!(chunked.0, whole.0);
    assert_eq!(whole.0, Version::of(&data));
    let parallel = scan_parallel(&data);
    assert_eq!(parallel.0, whole.0);
    let (a, b, c) = (whole.1.unwrap(), chunked.1.unwrap(), parallel.1.unwrap());
    assert_eq!((a.total_lines, b.total_lines, c.total_lines), (3_000_000, 3_000_000, 3_000_000));
    for n in [1, 2, 63, 64, 65, 1_000_001, 2_999_999, 3_000_000] {
        let expected = format!("line {} é", n - 1);
        for index in [&a, &b, &c] {
            assert_eq!(
                window(data.as_slice(), index, &req(n, 1)).unwrap().lines,
                *std::slice::from_ref(&expected),
                "line {n}"
            );
        }
    }
    let mut bad = data.clone();
    bad[20_000_000] = 0xff;
    assert_eq!(scan_parallel(&bad).1.err(), Scanner::scan(&bad).1.err());
}

#[test]
fn counted_newlines_make_the_checkpoints_of_visited_ones() {
    // Line lengths from 0 to ~700 bytes (runs of short lines, long lines, empty ones) over
    // more than two checkpoint blocks, fed whole and in odd chunks.
    let mut data = Vec::new();
    let mut x = 12_345u64;
    while data.len() < 2 * CHECKPOINT_BLOCK as usize + 300_000 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let len = match (x >> 60) % 4 {
            0 => 0,
            1 => (x >> 20) as usize % 8,
            2 => (x >> 20) as usize % 80,
            _ => (x >> 20) as usize % 700,
        };
        data.extend(std::iter::repeat_n(b'a', len));
        data.push(b'\n');
    }
    data.extend_from_slice(b"tail");
    // Every newline visited, as before counting.
    let mut visited = Checkpoints::new();
    let mut newlines = 0u64;
    for i in memchr_iter(b'\n', &data) {
        newlines += 1;
        visited.see(newlines + 1, i as u64 + 1);
    }
    for chunk in [data.len(), 777, 256, 255, 4096, 100_003] {
        let mut counted = Checkpoints::new();
        let (mut n, mut last) = (0u64, None);
        for (k, piece) in data.chunks(chunk).enumerate() {
            counted.see_newlines(piece, (k * chunk) as u64, &mut n, &mut last);
        }
        assert_eq!(n, newlines, "chunk {chunk}");
        assert_eq!(last, memchr::memrchr(b'\n', &data).map(|i| i as u64), "chunk {chunk}");
        assert_eq!(counted.list, visited.list, "chunk {chunk}");
        assert_eq!((counted.since, counted.last_block), (visited.since, visited.last_block));
    }
}

#[test]
fn index_stays_small_and_huge_lines_are_jumped() {
    let huge = "x".repeat(3 * 1024 * 1024);
    let text = format!("a\n{huge}\nb\nc");
    let (_, index) = Scanner::scan(text.as_bytes());
    let index = index.unwrap();
    assert!(index.checkpoints.len() <= 4, "{:?}", index.checkpoints);
    let w = window(text.as_bytes(), &index, &req(2, 3).cut_at(Some(2000))).unwrap();
    assert_eq!(w.lines.get(0).unwrap().len(), 2000);
    assert_eq!(&w.lines.to_vec()[1..], ["b", "c"]);
    assert_eq!(w.truncated, vec![2]);
    let many: String = (0..100_000).map(|i| format!("{i}\n")).collect();
    let index = Scanner::scan(many.as_bytes()).1.unwrap();
    assert!(index.heap_bytes() < 100_000 / 64 * 16 * 2, "{}", index.heap_bytes());
}

#[test]
fn every_window_equals_the_same_slice_of_the_whole() {
    let text = "α\r\nβ\n\nlast without newline";
    let all: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    for offset in 1..=4u64 {
        for limit in 1..=5u64 {
            let w = lines(text.as_bytes(), offset, limit);
            let end = ((offset + limit - 1) as usize).min(all.len());
            assert_eq!(w.lines, all[offset as usize - 1..end], "offset {offset} limit {limit}");
        }
    }
}

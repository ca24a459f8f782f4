//! Property test: every read strategy (in memory, memory-mapped, positional reads; through the
//! provider with and without mapping; with the line ends kept or searched) cuts exactly the same
//! window as slicing the file's lines.
#![cfg(test)]

use std::io::Write;

use proptest::prelude::*;

use super::index::{self, Scanner, WindowRequest};
use super::mmap::Mapped;
use super::{Provider, ProviderConfig};

#[derive(Debug, Clone)]
struct TextFile {
    lines: Vec<String>,
    crlf: bool,
    final_newline: bool,
    bom: bool,
}

impl TextFile {
    fn bytes(&self) -> Vec<u8> {
        let sep = if self.crlf { "\r\n" } else { "\n" };
        let mut text = self.lines.join(sep);
        if self.final_newline && !self.lines.is_empty() {
            text.push_str(sep);
        }
        let mut bytes = if self.bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
        bytes.extend_from_slice(text.as_bytes());
        bytes
    }

    /// The lines of the window, cut at 2000 characters (as the read tool asks for them).
    fn expected(&self, offset: u64, limit: u64) -> Vec<String> {
        self.whole(offset, limit).iter().map(|l| l.chars().take(2000).collect()).collect()
    }

    /// The lines of the window, whole.
    fn whole(&self, offset: u64, limit: u64) -> Vec<String> {
        let mut lines = self.lines.clone();
        // Without a final newline, an empty last "line" is just the separator before it:
        // `["a", ""]` is the file "a\n", which has one line.
        if !self.final_newline && lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        lines.iter().skip(offset as usize - 1).take(limit as usize).cloned().collect()
    }
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-z é日✓\t]{0,40}",
        1 => Just(String::new()),
        1 => "[xé]{1995,2010}",
    ]
}

fn text_file() -> impl Strategy<Value = TextFile> {
    (prop::collection::vec(line(), 0..200), any::<bool>(), any::<bool>(), any::<bool>())
        .prop_map(|(lines, crlf, final_newline, bom)| TextFile { lines, crlf, final_newline, bom })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn every_strategy_cuts_the_same_window(file in text_file(), offset in 1u64..220, limit in 1u64..300) {
        let bytes = file.bytes();
        let (version, scanned) = Scanner::scan(&bytes);
        let index = scanned.expect("generated text is text");
        let total = index.total_lines();
        prop_assume!(offset <= total.max(1));
        let expected = file.expected(offset, limit);

        let request = WindowRequest::whole(offset, limit, u64::MAX).cut_at(Some(2000));
        let in_memory = index::window(bytes.as_slice(), &index, &request).expect("memory window");
        prop_assert_eq!(&in_memory.lines, &expected);
        let whole = WindowRequest::whole(offset, limit, u64::MAX);
        let whole_lines = index::window(bytes.as_slice(), &index, &whole).expect("whole window");
        prop_assert_eq!(&whole_lines.lines, &file.whole(offset, limit));

        let mut temp = tempfile::NamedTempFile::new().expect("temp file");
        temp.write_all(&bytes).expect("write");
        let opened = std::fs::File::open(temp.path()).expect("open");
        let positional = index::window(&opened, &index, &request).expect("positional window");
        prop_assert_eq!(&positional.lines, &expected);
        // With the line ends kept (a file read warm), the same windows.
        let dense = index.clone();
        prop_assert!(dense.set_ends(index.line_ends(&bytes).expect("its own line ends")));
        let from_ends = index::window(&opened, &dense, &request).expect("window by line ends");
        prop_assert_eq!(&from_ends, &positional);
        let from_ends = index::window(bytes.as_slice(), &dense, &whole).expect("whole window by line ends");
        prop_assert_eq!(&from_ends, &whole_lines);
        if let Some(mapped) = Mapped::map(&opened, bytes.len() as u64).expect("map") {
            let from_map = index::window(mapped.bytes(), &index, &request).expect("mapped window");
            prop_assert_eq!(&from_map.lines, &expected);
            prop_assert!(!mapped.torn());
        }

        // Through the provider, with every file mapped, and with none.
        let path = std::fs::canonicalize(temp.path()).expect("canonical");
        let parent = path.parent().expect("a parent").to_path_buf();
        let root = super::RootDir::new(&parent, None).expect("root");
        let name = path.file_name().expect("a name").to_string_lossy().into_owned();
        let target = super::resolve::resolve(&name, super::Scope { roots: &[root], cwd: &parent }).expect("resolve");
        for map_threshold in [1, u64::MAX] {
            let provider = Provider::new(ProviderConfig { map_threshold, fsync: false, ..ProviderConfig::default() });
            let read = provider.read_resolved(&target, &request).expect("provider read");
            prop_assert_eq!(read.version, version);
            prop_assert_eq!(&read.window.lines, &expected);
            prop_assert_eq!(read.window.total_lines, total);
            let cut: Vec<u64> = expected
                .iter()
                .zip(offset..)
                .filter(|(_, n)| file.lines[*n as usize - 1].chars().count() > 2000)
                .map(|(_, n)| n)
                .collect();
            prop_assert_eq!(&read.window.truncated, &cut);
        }
    }
}

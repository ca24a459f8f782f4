//! Ready JSON: our own JSON string escaper (byte for byte what serde_json writes, several times
//! faster on source text), and [`Json`], the bytes of one whole JSON-RPC message as the
//! transport's queue carries them, so that a response a handler wrote itself is never parsed
//! or copied again on its way to the socket.

use serde_json::value::RawValue;

/// What each byte becomes inside a JSON string: `0` stays as it is, `b'u'` is written
/// `\u00XX`, anything else is the letter after a backslash (as serde_json escapes).
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0A] = b'n';
    table[0x0C] = b'f';
    table[0x0D] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Bytes of a word that are all `b`.
const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// Whether any byte of `word` needs escaping: a control character (< 0x20), `"` or `\`.
/// Exact (no false positives or negatives) for the word as a whole.
#[inline]
fn needs_escape(word: u64) -> bool {
    escape_bits(word) != 0
}

/// Non-zero exactly when some byte of `word` needs escaping (see [`needs_escape`]); the bits
/// of several words may be or-ed together to test them all at once.
#[inline]
fn escape_bits(word: u64) -> u64 {
    const HIGH: u64 = splat(0x80);
    // A byte below 0x20 (non-ASCII bytes, which have the high bit, never count).
    let control = word.wrapping_sub(splat(0x20)) & !word & HIGH;
    let quote = word ^ splat(b'"');
    let backslash = word ^ splat(b'\\');
    let zero = |x: u64| x.wrapping_sub(splat(0x01)) & !x & HIGH;
    control | zero(quote) | zero(backslash)
}

/// Whether nothing in `bytes` needs escaping: every word tested, with no branch per word (the
/// usual line of source text has nothing to escape, and is short).
#[inline]
fn plain(bytes: &[u8]) -> bool {
    let len = bytes.len();
    if len < 8 {
        let mut padded = [b' '; 8];
        padded[..len].copy_from_slice(bytes);
        return escape_bits(u64::from_ne_bytes(padded)) == 0;
    }
    // The last word overlaps the one before it when the length is not a multiple of eight.
    let mut bits = escape_bits(word(bytes, len - 8));
    for chunk in bytes.chunks_exact(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        bits |= escape_bits(u64::from_ne_bytes(word));
    }
    bits == 0
}

/// The eight bytes of `bytes` at `at` as a word (`at + 8 <= bytes.len()`).
#[inline]
fn word(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(word)
}

/// Bytes `text` takes once escaped by [`escape_into`] (as serde_json escapes it).
pub fn escaped_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    if plain(bytes) {
        return bytes.len();
    }
    bytes
        .iter()
        .map(|&b| match ESCAPE[usize::from(b)] {
            0 => 1,
            b'u' => 6,
            _ => 2,
        })
        .sum()
}

/// Appends `text` escaped as the inside of a JSON string (no quotes), exactly as serde_json
/// escapes it: `"` and `\` with a backslash, `\b \t \n \f \r`, other control characters as
/// `\u00xx`, everything else (non-ASCII included) as it is. Runs of plain bytes are found
/// sixteen bytes at a time and copied whole.
pub fn escape_into(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    if plain(bytes) {
        out.extend_from_slice(bytes);
        return;
    }
    escape_known(out, bytes);
}

/// [`escape_into`] of bytes known to hold something to escape (UTF-8, as they came from a `str`).
fn escape_known(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len();
    let mut start = 0;
    let mut at = 0;
    loop {
        while at + 16 <= len && !(needs_escape(word(bytes, at)) || needs_escape(word(bytes, at + 8))) {
            at += 16;
        }
        while at + 8 <= len && !needs_escape(word(bytes, at)) {
            at += 8;
        }
        if at >= len {
            break;
        }
        // A word with something to escape (or the tail): byte by byte to the word's end.
        let end = (at + 8).min(len);
        while at < end {
            let b = bytes[at];
            let escape = ESCAPE[usize::from(b)];
            if escape != 0 {
                out.extend_from_slice(&bytes[start..at]);
                match escape {
                    b'u' => {
                        out.extend_from_slice(b"\\u00");
                        out.push(HEX[usize::from(b >> 4)]);
                        out.push(HEX[usize::from(b & 0xF)]);
                    }
                    letter => out.extend_from_slice(&[b'\\', letter]),
                }
                start = at + 1;
            }
            at += 1;
        }
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Bytes of a line tested and copied in one fixed-size step by [`escape_each_into`].
const BLOCK: usize = 64;

/// Each byte's index in a block.
const LANES: [u8; BLOCK] = {
    let mut lanes = [0u8; BLOCK];
    let mut i = 0;
    while i < BLOCK {
        lanes[i] = i as u8;
        i += 1;
    }
    lanes
};

/// Whether one of the first `len` bytes of `block` needs escaping (as [`escape_bits`] says).
/// Written as one pass over a fixed-size block with no branch, which the compiler turns into
/// tests of sixteen bytes at a time (a compare per kind of byte, and one for the length).
#[inline(always)]
fn block_needs_escape(block: &[u8; BLOCK], len: usize) -> bool {
    let len = len.min(BLOCK) as u8;
    let mut any = 0u8;
    for (&b, &lane) in block.iter().zip(&LANES) {
        let escape = (b < 0x20) | (b == b'"') | (b == b'\\');
        any |= u8::from(escape & (lane < len));
    }
    any != 0
}

/// Exactly the bytes of `word` that need escaping (see [`needs_escape`]), as their high bits
/// (no borrow crosses from one byte to the next, unlike [`escape_bits`]).
#[inline]
fn escape_bytes(word: u64) -> u64 {
    const LOW: u64 = splat(0x7F);
    const HIGH: u64 = splat(0x80);
    // Below 0x20: the low seven bits plus 0x60 stay below 0x80 (at most 0xDF: no carry), and
    // the high bit is clear (non-ASCII bytes never count).
    let control = !(((word & LOW) + splat(0x60)) | word) & HIGH;
    let zero = |x: u64| !(((x & LOW) + LOW) | x) & HIGH;
    control | zero(word ^ splat(b'"')) | zero(word ^ splat(b'\\'))
}

/// Bit `i` set exactly when byte `i` of the first `len` bytes of `block` needs escaping.
#[inline]
fn block_escape_mask(block: &[u8; BLOCK], len: usize) -> u64 {
    let mut mask = 0u64;
    for (i, chunk) in block.chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        // One bit per byte: each byte's high bit gathered into the top byte by one multiply
        // (byte `k`'s bit lands on bit 56 + `k`; no two products meet, so nothing carries).
        let bits = (escape_bytes(u64::from_le_bytes(word)) >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= bits << (8 * i);
    }
    let len = len.min(BLOCK);
    if len == 0 { 0 } else { mask & (u64::MAX >> (BLOCK - len)) }
}

/// Appends byte `b`, one that needs escaping, escaped.
#[inline]
fn push_escaped(out: &mut Vec<u8>, b: u8) {
    match ESCAPE[usize::from(b)] {
        b'u' => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xF)],
        ]),
        letter => out.extend_from_slice(&[b'\\', letter]),
    }
}

/// [`escape_into`] of the first `len` bytes of `block` (at most [`BLOCK`]), some of which need
/// escaping: the runs between them copied whole, one step per byte to escape (no test per byte).
fn escape_block(out: &mut Vec<u8>, block: &[u8; BLOCK], len: usize) {
    let len = len.min(BLOCK);
    let mut mask = block_escape_mask(block, len);
    let mut from = 0;
    while mask != 0 {
        let at = mask.trailing_zeros() as usize;
        out.extend_from_slice(block.get(from..at).unwrap_or_default());
        push_escaped(out, block[at]);
        from = at + 1;
        mask &= mask - 1;
    }
    out.extend_from_slice(block.get(from..len).unwrap_or_default());
}

/// Appends the lines of `text` that `bounds` say (where each starts and ends in it; no line
/// holds a line break), each escaped as [`escape_into`] escapes it, with what `between` appends
/// (already escaped) between two lines. A line of at most [`BLOCK`] bytes with room after it in
/// `text` is tested and copied in one fixed-size step and then cut to its length: no branch
/// depends on how long it is, and the bytes after it are copied but never kept.
pub fn escape_each_into(
    out: &mut Vec<u8>,
    text: &str,
    bounds: &[(usize, usize)],
    mut between: impl FnMut(&mut Vec<u8>),
) {
    let bytes = text.as_bytes();
    for (i, &(start, end)) in bounds.iter().enumerate() {
        if i > 0 {
            between(out);
        }
        let len = end.saturating_sub(start);
        let block = bytes.get(start..start + BLOCK).and_then(|block| <&[u8; BLOCK]>::try_from(block).ok());
        match block {
            Some(block) if len <= BLOCK => {
                if block_needs_escape(block, len) {
                    escape_block(out, block, len);
                } else {
                    out.extend_from_slice(block);
                    out.truncate(out.len() - BLOCK + len);
                }
            }
            _ => escape_into(out, text.get(start..end).unwrap_or_default()),
        }
    }
}

/// Appends `text` as a JSON string, quotes included.
pub fn string_into(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    escape_into(out, text);
    out.push(b'"');
}

/// Appends `n` in decimal.
pub fn number_into(out: &mut Vec<u8>, n: u64) {
    let (digits, at) = decimal(n);
    out.extend_from_slice(&digits[at..]);
}

/// `n`'s decimal digits, right-aligned in 20 bytes (room for any `u64`), and where they start.
pub fn decimal(n: u64) -> ([u8; 20], usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    (digits, at)
}

/// One whole JSON message, ready to be framed: what the transport's outgoing queue carries.
/// Made from a `RawValue` (moved, not copied) or from bytes a handler wrote itself with the
/// helpers above; it is never parsed again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Json(Vec<u8>);

impl Json {
    /// Bytes that are one complete JSON value by construction (a writer made of this module's
    /// helpers and serde_json, never client input). Debug builds check it.
    pub(crate) fn trusted(bytes: Vec<u8>) -> Json {
        debug_assert!(
            serde_json::from_slice::<&RawValue>(&bytes).is_ok(),
            "not one JSON value: {}",
            String::from_utf8_lossy(&bytes)
        );
        Json(bytes)
    }

    /// The message's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Its length in bytes (what the byte budgets count).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it is empty (never, for a message built by this module's constructors).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The message as text (it is UTF-8: made from `str`s and serde_json's output).
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

impl From<Box<RawValue>> for Json {
    fn from(raw: Box<RawValue>) -> Json {
        let text: Box<str> = raw.into();
        Json(text.into_string().into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(text: &str) -> String {
        let mut out = Vec::new();
        string_into(&mut out, text);
        String::from_utf8(out).expect("escaping keeps UTF-8")
    }

    /// [`escape_each_into`] of the lines of `text` (split at `\n`, one `\r` before it left
    /// out), `<NL>` between them.
    fn lines_ours(text: &str) -> String {
        let mut bounds = Vec::new();
        let mut start = 0;
        for (at, _) in text.match_indices('\n') {
            let end = if text[..at].ends_with('\r') { at - 1 } else { at };
            bounds.push((start, end));
            start = at + 1;
        }
        bounds.push((start, text.len()));
        let mut out = Vec::new();
        escape_each_into(&mut out, text, &bounds, |out| out.extend_from_slice(b"<NL>"));
        String::from_utf8(out).expect("escaping keeps UTF-8")
    }

    /// The lines of `text` (split at `\n`, one `\r` before it dropped) escaped by serde_json,
    /// `<NL>` between them.
    fn lines_reference(text: &str) -> String {
        let parts: Vec<&str> = text.split('\n').collect();
        let last = parts.len() - 1;
        let escaped: Vec<String> = parts
            .iter()
            .enumerate()
            .map(|(i, part)| {
                let part = if i < last { part.strip_suffix('\r').unwrap_or(part) } else { part };
                let quoted = serde_json::to_string(part).unwrap();
                quoted[1..quoted.len() - 1].to_owned()
            })
            .collect();
        escaped.join("<NL>")
    }

    #[test]
    fn a_line_tested_as_a_block_is_escaped_as_alone_whatever_follows_it() {
        // Lines around the block's size, something to escape (or not) at every position, and
        // bytes to escape right after the line, inside the block that is read past its end.
        let after = "\"\\\n\u{1}\t".repeat(30);
        for len in 0..(2 * BLOCK + 3) {
            for at in 0..=len {
                for b in [0u8, 0x1f, b'"', b'\\', b'\r', 0x7f, b'x'] {
                    let mut line = vec![b'a'; len];
                    if at < len {
                        line[at] = b;
                    }
                    let line = String::from_utf8(line).unwrap();
                    for before in ["", "é", "\u{1}"] {
                        let text = format!("{before}{line}{after}");
                        let bounds = [(before.len(), before.len() + len), (0, before.len())];
                        let mut out = Vec::new();
                        escape_each_into(&mut out, &text, &bounds, |out| out.push(b'|'));
                        let expected = format!(
                            "{}|{}",
                            serde_json::to_string(&line).unwrap(),
                            serde_json::to_string(before).unwrap()
                        );
                        let expected = expected.replace("\"|\"", "|");
                        assert_eq!(
                            format!("\"{}\"", String::from_utf8(out).unwrap()),
                            expected,
                            "{b:#x} at {at} of {len}"
                        );
                    }
                }
            }
        }
        // Non-ASCII and lines at the very end of the text (no block past them).
        for text in ["日本語 ✓ é", "x\u{2028}\"", "tail"] {
            let mut out = Vec::new();
            escape_each_into(&mut out, text, &[(0, text.len())], |_| {});
            assert_eq!(
                format!("\"{}\"", String::from_utf8(out).unwrap()),
                serde_json::to_string(text).unwrap()
            );
        }
    }

    #[test]
    fn lines_are_escaped_in_one_pass_as_one_by_one() {
        for text in [
            "",
            "\n",
            "\r\n",
            "\r",
            "a\r\r\nb",
            "\n\n\r\n",
            "x\ny",
            "exactly8\nexactly8",
            "ü\"\\\t\u{1}\r\u{7f}",
        ] {
            assert_eq!(lines_ours(text), lines_reference(text), "{text:?}");
        }
    }

    #[test]
    fn the_escaper_writes_what_serde_json_writes() {
        let mut samples: Vec<String> = vec![
            String::new(),
            "plain ascii text that is long enough for several words".into(),
            "\"quoted\" and \\back\\slashed\\".into(),
            "\t\tindented\r\n".into(),
            "é日✓ non-ASCII, and \u{7f} DEL, \u{2028} line separator".into(),
            String::from_utf8_lossy(b"bad \xff\xfe utf-8 \xc3").into_owned(),
            "\u{FFFD}\u{FFFD}".into(),
        ];
        // Every byte below 0x80 alone, at every position of a word, and between non-ASCII.
        for b in 0u8..0x80 {
            let c = char::from(b);
            for pad in 0..9 {
                samples.push(format!("{}{c}{}", "x".repeat(pad), "y".repeat(9 - pad)));
            }
            samples.push(format!("é{c}日{c}{c}"));
        }
        // Dense mixes.
        let all: String = (0u8..0x80).map(char::from).collect();
        samples.push(all.repeat(3));
        samples.push(format!("{all}é{all}✓"));
        for (i, sample) in samples.iter().enumerate() {
            let theirs = serde_json::to_string(sample).unwrap();
            assert_eq!(ours(sample), theirs, "sample {i}: {sample:?}");
        }
    }

    #[test]
    fn the_word_test_is_exact() {
        for b in 0u8..=255 {
            for pos in 0..8 {
                let mut word = *b"abcdefgh";
                word[pos] = b;
                let expected = b < 0x20 || b == b'"' || b == b'\\';
                assert_eq!(needs_escape(u64::from_ne_bytes(word)), expected, "byte {b:#x} at {pos}");
            }
        }
        for len in 0..40 {
            for at in 0..len {
                for b in [0u8, 0x0a, 0x1f, b'"', b'\\'] {
                    let mut text = vec![b'a'; len];
                    text[at] = b;
                    assert!(!plain(&text), "{b:#x} at {at} of {len}");
                    text[at] = 0x80;
                    assert!(plain(&text));
                }
            }
        }
        for len in 0..40 {
            for at in 0..len {
                for b in [0u8, b'\n', b'\r', 0x1f, b'"', b'\\'] {
                    let mut chars = vec!['é'; len];
                    chars[at] = char::from(b);
                    if at + 5 < len {
                        chars[at + 5] = '\n';
                    }
                    let text: String = chars.into_iter().collect();
                    assert_eq!(lines_ours(&text), lines_reference(&text), "{b:#x} at {at} of {len}");
                }
            }
        }
        // Bytes that borrow into their neighbours.
        assert!(!needs_escape(u64::from_ne_bytes([0x20, 0x80, 0xff, 0x21, 0x5d, 0x5b, 0x23, 0x7f])));
        assert!(needs_escape(u64::from_ne_bytes([0x20, 0x00, 0xff, 0x21, 0x5d, 0x5b, 0x23, 0x7f])));
    }

    #[test]
    fn the_block_mask_marks_exactly_the_bytes_to_escape() {
        let flagged = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        // Every byte at every place of a word, among neighbours of every kind (a borrow or a
        // carry from one byte must not mark another).
        for b in 0u8..=255 {
            for around in [0u8, 0x1f, 0x20, b'"', b'\\', 0x7f, 0x80, 0xff, b'a'] {
                for pos in 0..BLOCK {
                    let mut block = [around; BLOCK];
                    block[pos] = b;
                    let expected = (0..BLOCK).filter(|&i| flagged(block[i])).fold(0u64, |m, i| m | 1 << i);
                    assert_eq!(
                        block_escape_mask(&block, BLOCK),
                        expected,
                        "{b:#x} at {pos} among {around:#x}"
                    );
                    for len in [0, 1, pos, pos + 1, 63] {
                        let want = if len == 0 { 0 } else { expected & (u64::MAX >> (BLOCK - len)) };
                        assert_eq!(block_escape_mask(&block, len), want, "{b:#x} at {pos}, {len} bytes");
                    }
                }
            }
        }
        // Lines with several bytes to escape of every kind, and what follows them in the block.
        let mut block = [b'x'; BLOCK];
        for (i, b) in [0u8, b'"', 0x1f, b'\\', b'\t', b'\n', 0x08, 0x0c, b'\r', 0x7f].into_iter().enumerate()
        {
            block[3 * i + 1] = b;
        }
        block[40..43].copy_from_slice("é\"".as_bytes());
        block[BLOCK - 1] = b'"';
        for len in 0..=BLOCK {
            let Ok(line) = std::str::from_utf8(&block[..len]) else {
                assert_eq!(len, 41, "only inside the é");
                continue;
            };
            let mut out = Vec::new();
            escape_block(&mut out, &block, len);
            let quoted = serde_json::to_string(line).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), quoted[1..quoted.len() - 1], "{len}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_string_is_escaped_as_serde_json_escapes_it(text in proptest::prelude::any::<String>(), ascii in "[\\x00-\\x7f]{0,40}") {
            proptest::prop_assert_eq!(ours(&text), serde_json::to_string(&text).unwrap());
            proptest::prop_assert_eq!(ours(&ascii), serde_json::to_string(&ascii).unwrap());
            proptest::prop_assert_eq!(lines_ours(&text), lines_reference(&text));
            proptest::prop_assert_eq!(lines_ours(&ascii), lines_reference(&ascii));
        }
    }

    #[test]
    fn numbers_and_messages() {
        let mut out = Vec::new();
        for n in [0, 7, 10, 4_294_967_296, u64::MAX] {
            out.clear();
            number_into(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
        let raw = serde_json::value::to_raw_value(&serde_json::json!({"a": [1, "é"]})).unwrap();
        let json = Json::from(raw);
        assert_eq!(json.as_str(), r#"{"a":[1,"é"]}"#);
        assert_eq!(json.len(), json.as_bytes().len());
        assert!(!json.is_empty());
    }
}

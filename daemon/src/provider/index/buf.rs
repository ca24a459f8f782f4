//! A window's lines in one buffer ([`LineBuf`]): one allocation for the text and one for the
//! bounds, not one per line.

/// A window's lines in one buffer: their text and where each starts and ends in it (one
/// allocation for the text and one for the bounds, not one per line). The text may hold more
/// than the lines — their terminators, the rest of a cut line, bytes before the first line —
/// when it is the very buffer the file's bytes were read into (no copy between the read and
/// the projection).
#[derive(Clone, Default)]
pub struct LineBuf {
    /// The lines' text (and what lies between them).
    pub(super) text: String,
    /// Where each line starts and ends in `text`.
    pub(super) bounds: Vec<(usize, usize)>,
    /// The lines' bytes, added up.
    pub(super) line_bytes: usize,
}

impl LineBuf {
    /// Adds a line.
    pub fn push(&mut self, line: &str) {
        let start = self.text.len();
        self.text.push_str(line);
        self.bounds.push((start, self.text.len()));
        self.line_bytes += line.len();
    }

    /// The text the lines are in, and where each starts and ends in it (the text may hold more
    /// than the lines: their terminators, bytes before the first; never more than the window's
    /// read). For a projection that goes through the lines in place.
    pub fn parts(&self) -> (&str, &[(usize, usize)]) {
        (&self.text, &self.bounds)
    }

    /// How many lines.
    pub fn len(&self) -> usize {
        self.bounds.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.bounds.is_empty()
    }

    /// The bytes of all the lines (terminators are not counted).
    pub fn text_len(&self) -> usize {
        self.line_bytes
    }

    /// Line `i` (0-based).
    pub fn get(&self, i: usize) -> Option<&str> {
        let &(start, end) = self.bounds.get(i)?;
        self.text.get(start..end)
    }

    /// The lines, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + DoubleEndedIterator + '_ {
        self.bounds.iter().map(|&(start, end)| self.text.get(start..end).unwrap_or_default())
    }

    /// Keeps the first `n` lines.
    pub fn truncate(&mut self, n: usize) {
        for &(start, end) in self.bounds.get(n..).unwrap_or_default() {
            self.line_bytes -= end - start;
        }
        self.bounds.truncate(n);
    }

    /// Cuts line `i` to its first `len` bytes (at a character boundary, which the caller
    /// found).
    pub fn shorten(&mut self, i: usize, len: usize) {
        if let Some((start, end)) = self.bounds.get_mut(i)
            && len < *end - *start
            && self.text.is_char_boundary(*start + len)
        {
            self.line_bytes -= *end - *start - len;
            *end = *start + len;
        }
    }

    /// The lines as owned strings (for wire types that hold a list).
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_owned).collect()
    }
}

impl std::fmt::Debug for LineBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for LineBuf {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for LineBuf {}

impl<S: AsRef<str>> PartialEq<[S]> for LineBuf {
    fn eq(&self, other: &[S]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b.as_ref())
    }
}

impl<S: AsRef<str>> PartialEq<Vec<S>> for LineBuf {
    fn eq(&self, other: &Vec<S>) -> bool {
        *self == other[..]
    }
}

impl<S: AsRef<str>, const N: usize> PartialEq<[S; N]> for LineBuf {
    fn eq(&self, other: &[S; N]) -> bool {
        *self == other[..]
    }
}

impl<S: AsRef<str>> FromIterator<S> for LineBuf {
    fn from_iter<I: IntoIterator<Item = S>>(lines: I) -> Self {
        let mut buf = LineBuf::default();
        for line in lines {
            buf.push(line.as_ref());
        }
        buf
    }
}

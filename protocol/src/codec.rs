//! The LSP base-protocol codec (`Content-Length` framing) as a tokio-util `Decoder`/`Encoder`,
//! with hard caps on the header section and on the body.
//!
//! Frame grammar: one or more `Name: value\r\n` header lines, an empty line, then exactly
//! `Content-Length` bytes of body. `Content-Length` is required; `Content-Type` and any other
//! header are accepted and ignored (as LSP peers expect). Header names are case-insensitive.
//!
//! Caps, and what happens when they are hit:
//! - The header section may not exceed [`MAX_HEADER_BYTES`] before its terminating empty line is
//!   found: [`CodecError::HeaderTooLarge`]. The stream cannot be resynchronised, so the caller
//!   closes that connection.
//! - A missing, negative, non-numeric or unrepresentable `Content-Length`, or a header line that
//!   is not `Name: value`, is a [`CodecError`] for the same reason.
//! - A body longer than the configured maximum is *not* buffered: the decoder yields
//!   [`Frame::Oversized`] at once and then silently discards exactly that many bytes as they
//!   arrive, after which framing resumes. The caller answers -32007 and keeps the connection.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// Longest header section (including its terminating blank line) the decoder will buffer.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// Default cap on one frame's body: 64 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

const HEADER_END: &[u8] = b"\r\n\r\n";

/// One decoded unit of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete body of `Content-Length` bytes (not yet checked to be UTF-8 or JSON).
    Message(Bytes),
    /// A frame whose declared body exceeds the cap. Its body is being skipped, unbuffered.
    Oversized {
        /// The declared `Content-Length`.
        length: u64,
        /// The cap it exceeded.
        limit: usize,
    },
}

/// Why a stream cannot be decoded any further. Every variant means "close this connection".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The peer sent more than [`MAX_HEADER_BYTES`] without ending the header section.
    #[error("header section longer than {MAX_HEADER_BYTES} bytes")]
    HeaderTooLarge,
    /// A header line is not of the form `Name: value` or is not ASCII.
    #[error("malformed header line {line:?}")]
    MalformedHeader {
        /// The offending line, lossily decoded and shortened for logs.
        line: String,
    },
    /// The header section has no `Content-Length`.
    #[error("header section has no Content-Length")]
    MissingContentLength,
    /// `Content-Length` is present but not a non-negative integer that fits in 64 bits, or it
    /// appears twice with different values.
    #[error("invalid Content-Length {value:?}")]
    InvalidContentLength {
        /// The raw value, shortened for logs.
        value: String,
    },
    /// The stream ended in the middle of a frame.
    #[error("stream ended inside a frame ({buffered} bytes buffered)")]
    TruncatedFrame {
        /// Bytes of the unfinished frame that had arrived.
        buffered: usize,
    },
    /// The underlying transport failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Looking for the end of a header section; `scanned` bytes are known not to contain it.
    Header { scanned: usize },
    /// Waiting for a body of this many bytes.
    Body(usize),
    /// Dropping this many more bytes of an oversized body.
    Discard(u64),
}

/// `Content-Length` framing with caps. Cheap to construct; one per connection.
#[derive(Debug, Clone)]
pub struct LspCodec {
    max_body: usize,
    state: State,
}

impl LspCodec {
    /// A codec whose frames carry at most `max_body` bytes of body.
    pub fn new(max_body: usize) -> Self {
        Self { max_body, state: State::Header { scanned: 0 } }
    }

    /// The body cap this codec enforces.
    pub fn max_body(&self) -> usize {
        self.max_body
    }

    /// The length of the body being awaited, once its header section was read and until the
    /// body is complete: a reader that budgets memory reserves it before reading further.
    pub fn pending_body(&self) -> Option<usize> {
        match self.state {
            State::Body(length) => Some(length),
            _ => None,
        }
    }

    /// Whether the stream is between frames, given how many undecoded bytes are buffered: a
    /// reader that times out stalled frames applies its timeout only when this is false.
    pub fn between_frames(&self, buffered: usize) -> bool {
        matches!(self.state, State::Header { .. }) && buffered == 0
    }
}

impl Default for LspCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

fn shorten(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(80)];
    String::from_utf8_lossy(cut).into_owned()
}

/// Parses one header section (without its terminating blank line) into the body length.
fn parse_content_length(section: &[u8]) -> Result<u64, CodecError> {
    let mut length: Option<u64> = None;
    for line in section.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            // Tolerate a stray blank line from sloppy peers (a bare "\n" separator).
            continue;
        }
        let colon = memchr::memchr(b':', line)
            .filter(|_| line.is_ascii())
            .ok_or_else(|| CodecError::MalformedHeader { line: shorten(line) })?;
        let name = line[..colon].trim_ascii();
        if name.is_empty() {
            return Err(CodecError::MalformedHeader { line: shorten(line) });
        }
        if !name.eq_ignore_ascii_case(b"content-length") {
            continue;
        }
        let value = line[colon + 1..].trim_ascii();
        let invalid = || CodecError::InvalidContentLength { value: shorten(value) };
        if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
            return Err(invalid());
        }
        let parsed = value
            .iter()
            .try_fold(0u64, |acc, &digit| acc.checked_mul(10)?.checked_add(u64::from(digit - b'0')));
        let parsed = parsed.ok_or_else(invalid)?;
        if length.is_some_and(|previous| previous != parsed) {
            return Err(invalid());
        }
        length = Some(parsed);
    }
    length.ok_or(CodecError::MissingContentLength)
}

impl Decoder for LspCodec {
    type Item = Frame;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        loop {
            match self.state {
                State::Header { scanned } => {
                    // Resume the search a few bytes back so a terminator split across reads is found.
                    let from = scanned.saturating_sub(HEADER_END.len() - 1);
                    let Some(found) = memchr::memmem::find(&src[from..], HEADER_END) else {
                        if src.len() > MAX_HEADER_BYTES {
                            return Err(CodecError::HeaderTooLarge);
                        }
                        self.state = State::Header { scanned: src.len() };
                        return Ok(None);
                    };
                    let end = from + found;
                    if end + HEADER_END.len() > MAX_HEADER_BYTES {
                        return Err(CodecError::HeaderTooLarge);
                    }
                    let length = parse_content_length(&src[..end])?;
                    src.advance(end + HEADER_END.len());
                    match usize::try_from(length) {
                        Ok(body) if body <= self.max_body => {
                            self.state = State::Body(body);
                        }
                        _ => {
                            self.state = State::Discard(length);
                            return Ok(Some(Frame::Oversized { length, limit: self.max_body }));
                        }
                    }
                }
                State::Body(length) => {
                    if src.len() < length {
                        // Grow with what arrives (at most doubling), never by the declared length
                        // alone: a header that announces a big body must not cost its size in
                        // memory before the body comes. A reader that budgets bytes reserves the
                        // rest itself once it is paid for (see `pending_body`).
                        let missing = length - src.len();
                        src.reserve(missing.min(src.len().max(64 * 1024)));
                        return Ok(None);
                    }
                    self.state = State::Header { scanned: 0 };
                    return Ok(Some(Frame::Message(src.split_to(length).freeze())));
                }
                State::Discard(remaining) => {
                    let available = u64::try_from(src.len()).unwrap_or(u64::MAX);
                    let dropped = remaining.min(available);
                    // `dropped <= src.len()`, so the conversion cannot fail.
                    src.advance(usize::try_from(dropped).unwrap_or(src.len()));
                    if dropped < remaining {
                        self.state = State::Discard(remaining - dropped);
                        return Ok(None);
                    }
                    self.state = State::Header { scanned: 0 };
                }
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        if let Some(frame) = self.decode(src)? {
            return Ok(Some(frame));
        }
        match self.state {
            State::Header { .. } if src.is_empty() => Ok(None),
            _ => Err(CodecError::TruncatedFrame { buffered: src.len() }),
        }
    }
}

impl<T: AsRef<[u8]>> Encoder<T> for LspCodec {
    type Error = CodecError;

    fn encode(&mut self, body: T, dst: &mut BytesMut) -> Result<(), CodecError> {
        let body = body.as_ref();
        let header = format!("Content-Length: {}\r\n\r\n", body.len());
        dst.reserve(header.len() + body.len());
        dst.put_slice(header.as_bytes());
        dst.put_slice(body);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(codec: &mut LspCodec, input: &[u8]) -> Vec<Result<Frame, String>> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        // Feed one byte at a time: every split point of the stream is exercised.
        for &b in input {
            buf.put_u8(b);
            loop {
                match codec.decode(&mut buf) {
                    Ok(Some(frame)) => out.push(Ok(frame)),
                    Ok(None) => break,
                    Err(e) => {
                        out.push(Err(e.to_string()));
                        return out;
                    }
                }
            }
        }
        out
    }

    fn msg(s: &str) -> Result<Frame, String> {
        Ok(Frame::Message(Bytes::copy_from_slice(s.as_bytes())))
    }

    #[test]
    fn frames_split_at_every_byte() {
        let mut codec = LspCodec::new(1024);
        let input = b"Content-Length: 2\r\n\r\n{}Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length:3\r\n\r\n[1]";
        assert_eq!(decode_all(&mut codec, input), vec![msg("{}"), msg("[1]")]);
    }

    #[test]
    fn zero_length_body_is_a_frame() {
        let mut codec = LspCodec::new(8);
        assert_eq!(decode_all(&mut codec, b"Content-Length: 0\r\n\r\n"), vec![msg("")]);
    }

    #[test]
    fn oversized_body_is_skipped_and_stream_resyncs() {
        let mut codec = LspCodec::new(4);
        let mut input = b"Content-Length: 10\r\n\r\n0123456789".to_vec();
        input.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
        assert_eq!(
            decode_all(&mut codec, &input),
            vec![Ok(Frame::Oversized { length: 10, limit: 4 }), msg("ok")]
        );
    }

    #[test]
    fn oversized_body_is_never_buffered() {
        let mut codec = LspCodec::new(4);
        let mut buf = BytesMut::from(&b"Content-Length: 1000000\r\n\r\n"[..]);
        assert!(matches!(codec.decode(&mut buf), Ok(Some(Frame::Oversized { .. }))));
        for _ in 0..100 {
            buf.put_slice(&[b'x'; 10_000]);
            assert!(matches!(codec.decode(&mut buf), Ok(None)));
            assert!(buf.is_empty(), "discarded bytes must not accumulate");
        }
        buf.put_slice(b"Content-Length: 1\r\n\r\n1");
        assert_eq!(codec.decode(&mut buf).ok().flatten(), Some(Frame::Message(Bytes::from_static(b"1"))));
    }

    #[test]
    fn bad_headers_are_fatal() {
        let cases: &[(&[u8], &str)] = &[
            (b"Content-Length: -1\r\n\r\n", "invalid Content-Length \"-1\""),
            (b"Content-Length: abc\r\n\r\n", "invalid Content-Length \"abc\""),
            (b"Content-Length: +5\r\n\r\n", "invalid Content-Length \"+5\""),
            (b"Content-Length:\r\n\r\n", "invalid Content-Length \"\""),
            (
                b"Content-Length: 99999999999999999999999\r\n\r\n",
                "invalid Content-Length \"99999999999999999999999\"",
            ),
            (b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n", "invalid Content-Length \"3\""),
            (b"Content-Type: text/plain\r\n\r\n", "header section has no Content-Length"),
            (b"hello world\r\n\r\n", "malformed header line \"hello world\""),
            (b": 5\r\n\r\n", "malformed header line \": 5\""),
        ];
        for (input, expected) in cases {
            let mut codec = LspCodec::new(1024);
            let got = decode_all(&mut codec, input);
            assert_eq!(got, vec![Err((*expected).to_owned())], "input {:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn header_section_is_capped_before_its_end_is_found() {
        let mut codec = LspCodec::new(1024);
        let mut buf = BytesMut::new();
        buf.put_slice(b"X-Padding: ");
        let mut result = Ok(None);
        while buf.len() <= MAX_HEADER_BYTES + 1 {
            buf.put_slice(b"aaaaaaaa");
            result = codec.decode(&mut buf);
            if result.is_err() {
                break;
            }
        }
        assert!(matches!(result, Err(CodecError::HeaderTooLarge)), "{result:?}");
        assert!(buf.len() <= MAX_HEADER_BYTES + 8);
    }

    #[test]
    fn eof_inside_a_frame_is_reported() {
        let mut codec = LspCodec::new(1024);
        let mut buf = BytesMut::from(&b"Content-Length: 10\r\n\r\n{\"a\""[..]);
        assert!(matches!(codec.decode_eof(&mut buf), Err(CodecError::TruncatedFrame { buffered: 4 })));
        let mut codec = LspCodec::new(1024);
        let mut empty = BytesMut::new();
        assert!(matches!(codec.decode_eof(&mut empty), Ok(None)));
    }

    #[test]
    fn encoder_writes_content_length() {
        let mut codec = LspCodec::default();
        let mut dst = BytesMut::new();
        assert!(codec.encode("{\"x\":\"é\"}", &mut dst).is_ok());
        assert_eq!(&dst[..], "Content-Length: 10\r\n\r\n{\"x\":\"é\"}".as_bytes());
    }
}

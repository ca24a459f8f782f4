//! Fuzzing entry point for the LSP codec, shared by the cargo-fuzz target (`daemon/fuzz`,
//! nightly) and the stable property-test harness (`protocol/tests/fuzz_codec.rs`), so both
//! exercise exactly the same checks. Not part of the wire contract; hidden from the docs.
//!
//! [`codec`] panics when an invariant breaks; a fuzzer reports the panic as a crash.

use bytes::BytesMut;
use tokio_util::codec::Decoder;

use crate::codec::{Frame, LspCodec, MAX_HEADER_BYTES};

/// Body caps the fuzz input chooses from (its first byte). Small caps make oversized frames
/// common; none is large, so one execution never allocates more than a few hundred KiB.
const BODY_CAPS: [usize; 8] = [0, 1, 2, 16, 100, 4096, 65_536, 262_144];

/// What one execution of [`codec`] saw, for the harness's statistics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CodecRun {
    /// Complete frames decoded.
    pub frames: usize,
    /// Oversized frames announced (and skipped).
    pub oversized: usize,
    /// Whether the stream ended in a codec error (which closes a connection).
    pub failed: bool,
    /// Most bytes left buffered between two `decode` calls.
    pub max_buffered: usize,
    /// Largest capacity of the read buffer seen.
    pub max_capacity: usize,
}

/// What the decoder produced, comparable across chunkings.
type Output = Vec<Result<Frame, String>>;

/// Deterministic chunk sizes drawn from a seed (xorshift), between 1 and `max` bytes.
struct Chunks {
    state: u32,
    max: usize,
}

impl Chunks {
    fn next(&mut self) -> usize {
        if self.max <= 1 {
            return 1;
        }
        self.state ^= self.state << 13;
        self.state ^= self.state >> 17;
        self.state ^= self.state << 5;
        // u32 → usize is lossless on the 32- and 64-bit targets this builds for.
        1 + (self.state as usize) % self.max
    }
}

/// Decodes `stream` fed in chunks (`None`: all at once), then signals end of stream, the way
/// tokio-util's `FramedRead` drives a decoder. Stops at the first error, as a connection does.
fn run(max_body: usize, stream: &[u8], mut chunks: Option<Chunks>, stats: &mut CodecRun) -> Output {
    let mut codec = LspCodec::new(max_body);
    // The buffered bytes the decoder may keep between calls: one header section or one body.
    let keep = MAX_HEADER_BYTES.max(max_body);
    let largest_chunk = chunks.as_ref().map_or(stream.len(), |c| c.max.max(1));
    let mut buf = BytesMut::with_capacity(8 * 1024);
    let mut out = Output::new();
    let mut rest = stream;
    loop {
        let take = chunks.as_mut().map_or(rest.len(), Chunks::next).min(rest.len());
        let (chunk, after) = rest.split_at(take);
        rest = after;
        buf.extend_from_slice(chunk);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(frame)) => {
                    check_frame(&frame, max_body);
                    out.push(Ok(frame));
                }
                Ok(None) => break,
                Err(err) => {
                    out.push(Err(err.to_string()));
                    return out;
                }
            }
        }
        assert!(
            buf.len() <= keep,
            "decoder keeps {} bytes buffered; at most {keep} (one header section or body) allowed",
            buf.len()
        );
        stats.max_buffered = stats.max_buffered.max(buf.len());
        stats.max_capacity = stats.max_capacity.max(buf.capacity());
        // Vec-style doubling may at most double what is buffered plus one chunk.
        let bound = 2 * (keep + largest_chunk) + 8 * 1024;
        assert!(buf.capacity() <= bound, "read buffer grew to {} bytes (bound {bound})", buf.capacity());
        if rest.is_empty() {
            break;
        }
    }
    loop {
        match codec.decode_eof(&mut buf) {
            Ok(Some(frame)) => {
                check_frame(&frame, max_body);
                out.push(Ok(frame));
            }
            Ok(None) => break,
            Err(err) => {
                out.push(Err(err.to_string()));
                break;
            }
        }
    }
    out
}

fn check_frame(frame: &Frame, max_body: usize) {
    match frame {
        Frame::Message(body) => {
            assert!(body.len() <= max_body, "a {}-byte body passed a {max_body}-byte cap", body.len())
        }
        Frame::Oversized { length, limit } => {
            assert_eq!(*limit, max_body);
            assert!(usize::try_from(*length).map_or(true, |l| l > max_body), "{length} is not oversized");
        }
    }
}

/// One fuzz execution. Input layout: byte 0 picks the body cap, byte 1 the largest chunk
/// (0: one byte at a time), bytes 2–3 seed the chunk sizes; the rest is the stream.
///
/// Checks, panicking on failure: no panic inside the decoder; frames respect the cap and
/// oversized ones are announced, not buffered; between calls at most one header section or
/// one body stays buffered, and the buffer's capacity stays proportionate; and the decoded
/// frames (and the final error, if any) are the same whether the stream arrives all at once or
/// in chunks.
pub fn codec(data: &[u8]) -> CodecRun {
    let (head, stream) = data.split_at(data.len().min(4));
    let byte = |i: usize| head.get(i).copied().unwrap_or(0);
    let max_body = BODY_CAPS[usize::from(byte(0) & 7)];
    let max_chunk = usize::from(byte(1));
    let seed = u32::from(byte(2)) << 8 | u32::from(byte(3)) | 1;
    let mut stats = CodecRun::default();
    let whole = run(max_body, stream, None, &mut stats);
    let chunked = run(max_body, stream, Some(Chunks { state: seed, max: max_chunk }), &mut stats);
    assert_eq!(whole, chunked, "decoding depends on how the stream is split");
    stats.frames = whole.iter().filter(|f| matches!(f, Ok(Frame::Message(_)))).count();
    stats.oversized = whole.iter().filter(|f| matches!(f, Ok(Frame::Oversized { .. }))).count();
    stats.failed = whole.last().is_some_and(Result::is_err);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_frame_in_single_bytes() {
        let run = codec(b"\x05\x00\x00\x00Content-Length: 2\r\n\r\n{}");
        assert_eq!((run.frames, run.oversized, run.failed), (1, 0, false));
    }

    #[test]
    fn an_oversized_frame_is_skipped_and_the_next_one_decoded() {
        let run = codec(b"\x03\x07\x12\x34Content-Length: 40\r\n\r\n0123456789012345678901234567890123456789Content-Length: 2\r\n\r\n{}");
        assert_eq!((run.frames, run.oversized, run.failed), (1, 1, false));
        assert!(run.max_buffered <= MAX_HEADER_BYTES);
    }
}

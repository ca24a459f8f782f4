//! The line-framed transport of MCP over stdio: one JSON-RPC message per line. Reading a line
//! with a cap on its length (a longer line is skipped without being buffered), and writing each
//! outgoing message as one line, flushed.

use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

use super::Diagnostics;

/// Writes each queued message and a newline to `output`, flushing after each; ends when every
/// sender is gone or `output` fails (closed).
pub(super) async fn write_lines<W: AsyncWrite + Unpin>(
    mut receiver: mpsc::Receiver<String>,
    mut output: W,
    diagnostics: Diagnostics,
) {
    while let Some(message) = receiver.recv().await {
        let written = async {
            output.write_all(message.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await
        };
        if let Err(error) = written.await {
            if error.kind() != std::io::ErrorKind::BrokenPipe {
                diagnostics(&format!("cannot write to stdout: {error}"));
            }
            return;
        }
    }
}

/// How a line read from the input ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// `buf` holds one line, without its `\n`.
    Complete,
    /// The line was longer than the cap; it was skipped.
    TooLong,
    /// The input ended (with no partial line left).
    Eof,
}

/// Reads one line into `buf` (cleared first), without its newline. A line longer than `cap`
/// bytes is consumed without being kept. A last line without a newline counts as a line.
pub(super) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut seen = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (seen, too_long) {
                (false, _) => Line::Eof,
                (true, true) => Line::TooLong,
                (true, false) => Line::Complete,
            });
        }
        seen = true;
        let (chunk, used, done) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (&available[..end], end + 1, true),
            None => (available, available.len(), false),
        };
        if !too_long {
            if buf.len() + chunk.len() > cap {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        reader.consume(used);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Complete });
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::BufReader;

    use super::*;

    #[tokio::test]
    async fn lines_are_split_and_long_ones_skipped() {
        let input: &[u8] = b"one\n\ntoo long line\nlast";
        let mut reader = BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut lines = Vec::new();
        loop {
            let line = read_line(&mut reader, &mut buf, 8).await.ok();
            let done = line == Some(Line::Eof) || line.is_none();
            lines.push((line, String::from_utf8_lossy(&buf).into_owned()));
            if done {
                break;
            }
        }
        let expected = [
            (Some(Line::Complete), "one"),
            (Some(Line::Complete), ""),
            (Some(Line::TooLong), ""),
            (Some(Line::Complete), "last"),
            (Some(Line::Eof), ""),
        ];
        let lines: Vec<_> = lines.iter().map(|(l, s)| (l.as_ref(), s.as_str())).collect();
        let expected: Vec<_> = expected.iter().map(|(l, s)| (l.as_ref(), *s)).collect();
        assert_eq!(lines, expected);
    }
}

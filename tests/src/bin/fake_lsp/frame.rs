//! LSP framing on stdin and stdout: [`read`] takes one `Content-Length` frame, and [`Out`] writes
//! frames from a thread of its own, each when it is due, so a late publish holds back nothing
//! else.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufRead, Write as _};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One frame read from the client.
pub enum Incoming {
    /// A JSON message.
    Message(Value),
    /// A header block without `Content-Length`, or a body that is not JSON: what was wrong.
    Invalid(String),
    /// The end of stdin.
    Eof,
}

/// Reads one frame: headers up to an empty line, then `Content-Length` bytes of body.
pub fn read(input: &mut impl BufRead) -> std::io::Result<Incoming> {
    let mut length = None;
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(Incoming::Eof);
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let Some(length) = length else {
        return Ok(Incoming::Invalid("a header block without a valid Content-Length".to_owned()));
    };
    let mut body = vec![0; length];
    input.read_exact(&mut body)?;
    Ok(match serde_json::from_slice(&body) {
        Ok(value) => Incoming::Message(value),
        Err(e) => Incoming::Invalid(format!("a body that is not JSON: {e}")),
    })
}

/// `body` with its `Content-Length` header.
pub fn encode(body: &[u8]) -> Vec<u8> {
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(body);
    frame
}

/// The writer of stdout: frames are handed to its thread with the time they are due.
pub struct Out {
    tx: mpsc::Sender<(Instant, Vec<u8>)>,
}

impl Out {
    /// Starts the writer thread. When stdout is closed (the client went away) the process ends
    /// with code 0.
    pub fn start() -> Out {
        let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
        std::thread::spawn(move || {
            // Due time, then order of sending: equal times keep their order.
            let mut queue: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>> = BinaryHeap::new();
            let mut seq = 0_u64;
            loop {
                let next = match queue.peek() {
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    Some(Reverse((due, _, _))) => {
                        rx.recv_timeout(due.saturating_duration_since(Instant::now()))
                    }
                };
                match next {
                    Ok((due, bytes)) => {
                        seq += 1;
                        queue.push(Reverse((due, seq, bytes)));
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => match queue.peek() {
                        None => return,
                        // Nothing more will come: wait for the next one due.
                        Some(Reverse((due, _, _))) => {
                            std::thread::sleep(due.saturating_duration_since(Instant::now()));
                        }
                    },
                }
                let mut stdout = std::io::stdout().lock();
                while let Some(Reverse((due, _, _))) = queue.peek() {
                    if *due > Instant::now() {
                        break;
                    }
                    let Some(Reverse((_, _, bytes))) = queue.pop() else { break };
                    if stdout.write_all(&bytes).and_then(|()| stdout.flush()).is_err() {
                        std::process::exit(0);
                    }
                }
            }
        });
        Out { tx }
    }

    /// Sends `message` after `delay`.
    pub fn send(&self, message: &Value, delay: Duration) {
        self.raw(encode(message.to_string().as_bytes()), delay);
    }

    /// Sends `bytes` as they are after `delay`.
    pub fn raw(&self, bytes: Vec<u8>, delay: Duration) {
        // The writer thread ends only when this sender is gone.
        let _ = self.tx.send((Instant::now() + delay, bytes));
    }
}

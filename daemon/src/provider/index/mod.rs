//! Text scanning and line windows. One pass over a file's bytes computes its version, checks it
//! is text (UTF-8, no NUL) and builds a sparse line index; a window is then cut from any byte
//! source at the cost of the window, not the file.
//!
//! The index keeps a checkpoint (line number, byte offset) at least every [`CHECKPOINT_LINES`]
//! lines and at the first line start in every [`CHECKPOINT_BLOCK`] bytes, so finding any line
//! start means scanning forward from its checkpoint over fewer than 64 lines and less than
//! 1 MiB — while the index costs 16 bytes per 64 lines instead of 8 bytes per line.
//!
//! By job: the index itself in `lines.rs`, the one pass that builds it in `scan.rs`, a window's
//! buffer in `buf.rs`, the window reads in `window.rs`, and their tests in `tests.rs`.

mod buf;
mod lines;
mod scan;
#[cfg(test)]
mod tests;
mod window;

pub use self::buf::LineBuf;
pub use self::lines::{
    CHECKPOINT_BLOCK, CHECKPOINT_LINES, Checkpoint, DENSE_MAX_BYTES, DENSE_MIN_BYTES, LineEnds, LineIndex,
    NotText,
};
pub use self::scan::{Scanner, check_head, check_text, scan_parallel, scan_parallel_until};
pub use self::window::{ByteSource, Oversized, Window, WindowRequest, window};

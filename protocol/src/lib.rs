//! The filectx wire contract: JSON-RPC types, method names, tool schemas, `FS_*` error codes and
//! the LSP `Content-Length` codec. This crate does no IO; the daemon, the client library and the
//! tests all build on it so they cannot drift apart.

pub mod codec;
pub mod error;
pub mod features;
#[doc(hidden)]
pub mod fuzzing;
pub mod methods;
pub mod rpc;
pub mod socket;
pub mod tools;
pub mod types;

pub use codec::{CodecError, DEFAULT_MAX_FRAME_BYTES, Frame, LspCodec, MAX_HEADER_BYTES};
pub use error::{FsErrorCode, FsErrorData};
pub use tools::{ToolDescriptor, ToolName};
pub use types::*;

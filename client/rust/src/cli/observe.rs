//! Recording a file's version for this session before a command writes it or watches it.

use filectx_client::{Client, ClientError};
use filectx_protocol::ReadParams;

/// Records the file's current version for this session: a one-line `file/read` (any window
/// counts), so that the write or edit that follows is allowed.
pub(crate) async fn observe(client: &Client, path: &str) -> Result<(), ClientError> {
    client
        .file_read(ReadParams { path: path.to_owned(), limit: Some(1), ..ReadParams::default() })
        .await
        .map(drop)
}

//! Wire shapes of the JSON-RPC plumbing around the file methods: `$/cancelRequest`, the
//! `fs/streamText` subscription (its id, its `fs/textChunk` items, `fs/streamCancel`) and the
//! results that are not a struct of their own (`fs/stat`'s `FsInfo | null`). They complete the
//! method table of `protocol/schema/filectx.schema.json`, from which the other languages' types
//! are generated.

use serde::{Deserialize, Serialize};

use crate::types::{FsInfo, TextChunk};

/// A JSON-RPC request id: a number or a string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum RequestId {
    /// A numeric id.
    Number(i64),
    /// A string id.
    String(String),
}

/// Params of `$/cancelRequest` (LSP's), in either direction: the request to withdraw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CancelParams {
    /// The id of the request to cancel.
    pub id: RequestId,
}

/// The id of an `fs/streamText` subscription (jsonrpsee's: this daemon sends integers).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum SubscriptionId {
    /// A numeric id (at most 2^53 - 1, so JavaScript numbers hold it exactly).
    Number(u64),
    /// A string id.
    String(String),
}

/// Params of one `fs/textChunk` notification: an item of an `fs/streamText` subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TextChunkNotification {
    /// The subscription this chunk belongs to (the result of `fs/streamText`).
    pub subscription: SubscriptionId,
    /// The chunk.
    pub result: TextChunk,
}

/// Params of `fs/streamCancel`: a one-element array holding the subscription id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct StreamCancelParams(pub (SubscriptionId,));

/// Result of `fs/streamCancel`: whether a running stream was stopped (`false` for one that had
/// already ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct StreamCancelResult(pub bool);

/// Result of `fs/stat`: the design's `FsInfo`, or `null` when nothing is at the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct FsStatResult(pub Option<FsInfo>);

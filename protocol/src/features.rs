//! Names of the protocol-2 features a daemon announces in `capabilities.features` of
//! `initialize`. A client checks for a name before relying on the feature, so a daemon of an
//! older build (kept alive by socket activation) is never silently misused.

/// `$/cancelRequest` is honoured: the cancelled request answers -32800 (`tools/call`: an
/// `FS_ABORTED` result).
pub const CANCEL_REQUEST: &str = "cancelRequest";

//! `ContextError`: the file context's failures — the provider's, plus the session's own rules
//! (not observed, stale, read-only, denied). Typed only: the rpc layer maps them to the wire.

use super::deny::{self, Access, Denial};
use super::stale::ChangeSince;
use super::{ProviderError, Version};

/// A file-context failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// The provider refused or failed.
    #[error(transparent)]
    File(ProviderError),
    /// The session has no (remaining) record of reading this existing file: it was never read,
    /// or its record was forgotten to keep the session within its caps.
    #[error(
        "{path} has not been read in this session, or its record was dropped to keep the session's \
         memory bounded: read it again, then retry"
    )]
    NotObserved {
        /// The path as shown.
        path: String,
    },
    /// The file changed (or was deleted) since this session read or wrote it.
    #[error("{path} has changed since this session last read it{}", match change {
        ChangeSince::Shown(_) => "; the change is shown, and a retry may now go ahead",
        ChangeSince::TooLarge => "; the change is too large to show: read it again",
        ChangeSince::Unknown => "; read it again",
    })]
    Stale {
        /// The path as shown.
        path: String,
        /// Its current version (the one shown, when the change is); `None` when it was deleted.
        current: Option<Version>,
        /// What can be shown of the change (and whether the session's record moved to
        /// `current`).
        change: ChangeSince,
    },
    /// A write that may only create found the file there (`FS_NOT_OBSERVED`: the caller has
    /// not seen that file).
    #[error(
        "{path} already exists, and this write may only create it; read it and expect its version to replace it"
    )]
    Exists {
        /// The path as shown.
        path: String,
    },
    /// The session is read-only.
    #[error("this session is read-only; {path} was not changed")]
    ReadOnly {
        /// The path as shown.
        path: String,
    },
    /// A deny rule (the daemon's or the session's) protects the path.
    #[error("{path} is protected: {} matching `{}` are denied by the {}'s rules", if denial.access == Access::Read { "reads" } else { "writes" }, denial.rule, if denial.origin == deny::Origin::Session { "session" } else { "daemon" })]
    Denied {
        /// The path as shown.
        path: String,
        /// The rule.
        denial: Denial,
    },
    /// A deny rule of this access applies to the session, and the file has several hard links:
    /// its other names cannot be checked against the rules, so it is neither read (nor shown by
    /// a search, nor its version given) nor written through this name.
    #[error("{path} has {links} hard links, and this session has deny rules for {}: {}. The daemon's owner can give the file a single name (copy it, then move the copy over it){}", if *access == Access::Read { "reads" } else { "writes" }, if *access == Access::Read { "a file with several names is not read, since another name may be denied; nothing was read" } else { "a write through this name would change the file under its other names too, which may be denied; nothing was written" }, if *access == Access::Read { "" } else { ", or run filectxd with no deny rules (deny_write = [])" })]
    Linked {
        /// The path as shown.
        path: String,
        /// Its hard links.
        links: u64,
        /// What was refused.
        access: Access,
    },
    /// A journal entry's content this session may not be shown: the file had several hard
    /// links at that version (or their count was not recorded) while deny rules for reads apply
    /// to the session, so the content may be another, denied name's.
    #[error(
        "entry {entry} of {path} holds content of a file with several hard links, not shown under deny rules for reads"
    )]
    Hidden {
        /// The path as shown.
        path: String,
        /// The entry's seq.
        entry: u64,
    },
    /// The request was cancelled while it ran (a search stops between files).
    #[error("the search under {path} was cancelled")]
    Cancelled {
        /// The path as shown.
        path: String,
    },
    /// The daemon runs without a journal (`journal = false`, or it could not open one).
    #[error(
        "the journal is off in this daemon (journal = false, or another filectxd holds it): nothing is recorded to list or restore"
    )]
    JournalOff,
    /// No journal entry of that id among the paths this session may read.
    #[error(
        "no journal entry {entry} among the files this session may read: list them with journal/list (filectx history)"
    )]
    NoEntry {
        /// The id asked for.
        entry: String,
    },
    /// The `undo` tool found no change of this owner to the file.
    #[error("you have made no change to {path} in this session that can be undone")]
    NothingToUndo {
        /// The path as shown.
        path: String,
    },
    /// The entry's content before is not kept (over `journal_max_file_bytes`, or lost).
    #[error(
        "{path}: entry {entry} cannot be restored: the content before it was not kept (it was over journal_max_file_bytes)"
    )]
    NotRestorable {
        /// The path as shown.
        path: String,
        /// The entry.
        entry: u64,
    },
    /// The file is no longer at the version the entry left; nothing was restored.
    #[error("{path} has changed since entry {entry}{}; nothing was restored: undo the later changes first, or restore with force to put back the content before entry {entry} anyway", match change {
        ChangeSince::Shown(_) => " (the change since is shown)",
        ChangeSince::TooLarge => " (the change since is too large to show)",
        ChangeSince::Unknown => "",
    })]
    Changed {
        /// The path as shown.
        path: String,
        /// The entry.
        entry: u64,
        /// The version now (`None`: no file).
        current: Option<Version>,
        /// The change from the version the entry left to now.
        change: ChangeSince,
    },
    /// A gate refused the write or edit; nothing was written.
    #[error("{path} was not changed: {refusal}")]
    GateRefused {
        /// The path as shown.
        path: String,
        /// Which gate, and why.
        refusal: super::gate::GateRefusal,
    },
}

impl From<ProviderError> for ContextError {
    /// A provider failure; a write the provider refused because the file has several names
    /// (it refuses them only for writes, when the context asked it to) is [`ContextError::Linked`].
    fn from(err: ProviderError) -> Self {
        match err {
            ProviderError::Linked { path, links } => Self::Linked { path, links, access: Access::Write },
            err => Self::File(err),
        }
    }
}

impl ContextError {
    /// The path the failure concerns.
    pub fn path(&self) -> &str {
        match self {
            Self::File(e) => e.path(),
            Self::NotObserved { path }
            | Self::Stale { path, .. }
            | Self::Exists { path }
            | Self::ReadOnly { path }
            | Self::Denied { path, .. }
            | Self::Linked { path, .. }
            | Self::Hidden { path, .. }
            | Self::Cancelled { path }
            | Self::NotRestorable { path, .. }
            | Self::NothingToUndo { path }
            | Self::Changed { path, .. }
            | Self::GateRefused { path, .. } => path,
            Self::NoEntry { entry } => entry,
            Self::JournalOff => "",
        }
    }
}

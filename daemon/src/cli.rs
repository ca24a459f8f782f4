//! Command-line interface of `filectxd`: flags, their help, and how they become a [`Config`]
//! and a socket path.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use filectx_protocol::socket::{SOCKET_ENV, default_socket_path};

use filectx_protocol::DEFAULT_MAX_FRAME_BYTES;

use crate::config::{
    Config, DEFAULT_MAX_BATCH_LEN, DEFAULT_MAX_CONCURRENT_REQUESTS, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_QUEUED_MESSAGES, DEFAULT_SHUTDOWN_GRACE_SECS,
};
use crate::listen::FolderPolicy;
use crate::provider::ProviderConfig;

const AFTER_HELP: &str = "\
Socket:
  Default path: $XDG_RUNTIME_DIR/filectx.sock, or /tmp/filectx-$UID/filectx.sock when
  XDG_RUNTIME_DIR is unset (that folder must be yours and mode 0700). The socket is created mode
  0600 and only processes of the daemon's own uid are served (SO_PEERCRED). A lock file next to
  the socket (<socket>.lock) keeps a second daemon from taking the same path; a socket file left
  by a crashed daemon is replaced.

Logging:
  Logs go to stderr. --log-level takes a level (error, warn, info, debug, trace) or a full
  tracing filter such as 'info,filectx_daemon=debug'; without it RUST_LOG is used, else 'info'.

Signals:
  SIGTERM or SIGINT: stop accepting connections, let in-flight requests finish (at most
  --shutdown-grace seconds), remove the socket file, exit 0.

Exit status:
  0  stopped cleanly after SIGTERM/SIGINT
  1  could not start (another daemon serves the socket, the folder is unsafe, bind failed)
  2  usage error";

/// filectxd: the per-user filectx daemon. Serves safe read/write/edit file tools to many agent
/// processes over one Unix socket (LSP Content-Length framing, JSON-RPC 2.0).
#[derive(Debug, Parser)]
#[command(name = "filectxd", version, about, long_about = None, after_help = AFTER_HELP)]
pub struct Args {
    /// Unix socket to listen on [default: $XDG_RUNTIME_DIR/filectx.sock]
    #[arg(long, value_name = "PATH", env = SOCKET_ENV)]
    pub socket: Option<PathBuf>,

    /// Log level or tracing filter (overrides RUST_LOG) [default: info]
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,

    /// Most connections (agent sessions) served at once; the next one is refused with error -32009
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Largest JSON-RPC message accepted or sent, in bytes; a bigger request is skipped unread and answered -32007
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_FRAME_BYTES as u64, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_frame_bytes: u64,

    /// Most entries in one JSON-RPC batch (a bigger batch is answered -32010)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_BATCH_LEN, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_batch: u32,

    /// Most requests of one connection served concurrently; beyond it the daemon stops reading that connection until one finishes
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONCURRENT_REQUESTS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_requests: u32,

    /// Most outgoing messages queued for one connection; a client that does not read stalls only itself, and its notifications are dropped
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_QUEUED_MESSAGES, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_queued_messages: u32,

    /// Largest file an edit loads and largest content a write accepts, in bytes (FS_TOO_LARGE beyond)
    #[arg(long, value_name = "BYTES", default_value_t = ProviderConfig::default().max_edit_bytes)]
    pub max_edit_bytes: u64,

    /// Seconds a write or edit waits for a file's locks (held by another request or another process's flock) before FS_BUSY
    #[arg(long, value_name = "SECS", default_value_t = ProviderConfig::default().lock_patience.as_secs_f64())]
    pub lock_timeout: f64,

    /// Do not fsync files and folders before acknowledging writes (faster; a power loss may lose acknowledged writes, though never half-write a file)
    #[arg(long)]
    pub no_fsync: bool,

    /// Seconds to wait for in-flight requests after SIGTERM/SIGINT before exiting anyway
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_SHUTDOWN_GRACE_SECS as f64)]
    pub shutdown_grace: f64,
}

impl Args {
    /// The runtime configuration these flags describe.
    pub fn config(&self) -> Config {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let seconds = |value: f64, fallback: Duration| {
            if value.is_finite() && value >= 0.0 {
                Duration::from_secs_f64(value.min(3600.0))
            } else {
                fallback
            }
        };
        let defaults = Config::default();
        let grace = seconds(self.shutdown_grace, defaults.shutdown_grace);
        Config {
            max_connections: size(self.max_connections.into()),
            max_frame_bytes: size(self.max_frame_bytes),
            max_batch_len: size(self.max_batch.into()),
            max_concurrent_requests: size(self.max_concurrent_requests.into()),
            max_queued_messages: size(self.max_queued_messages.into()),
            shutdown_grace: grace,
            provider: ProviderConfig {
                max_edit_bytes: self.max_edit_bytes,
                lock_patience: seconds(self.lock_timeout, defaults.provider.lock_patience),
                fsync: !self.no_fsync,
                ..defaults.provider.clone()
            },
            ..defaults
        }
    }

    /// The socket path to bind, and how strictly to check its folder: the `/tmp` fallback must
    /// be private; a folder the user named is used as given.
    pub fn socket(&self) -> (PathBuf, FolderPolicy) {
        if let Some(path) = &self.socket {
            return (path.clone(), FolderPolicy::AsGiven);
        }
        let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
        let uid = rustix::process::geteuid().as_raw();
        let path = default_socket_path(runtime.as_deref(), uid);
        let policy = if runtime.as_deref().is_some_and(|d| path.starts_with(d)) {
            FolderPolicy::AsGiven
        } else {
            FolderPolicy::Private
        };
        (path, policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_flag_has_help_and_defaults_match_config() {
        Args::command().debug_assert();
        for arg in Args::command().get_arguments() {
            assert!(arg.get_help().is_some(), "--{} has no help", arg.get_id());
        }
        let args = Args::parse_from(["filectxd"]);
        assert_eq!(args.config(), Config::default());
    }
}

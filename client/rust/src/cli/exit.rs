//! How a command ends: the exit codes, the one-line message for a failure, and writing the
//! output to stdout.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use filectx_client::ClientError;

use super::commands::ToolFailed;
use super::journal::UndoStopped;

/// Exit code: success.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code: a local failure (current folder unusable, output not writable, …).
pub(crate) const EXIT_FAILURE: u8 = 1;
/// Exit code: the command line is wrong (clap's own code for usage errors).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code: the daemon is not reachable (nothing answers and autostart is off or failed), or
/// the connection broke before it answered.
const EXIT_UNREACHABLE: u8 = 3;
/// Exit code: the daemon answered with an error (a failed tool call included), an answer that
/// could not be understood, or not in time.
const EXIT_REQUEST_FAILED: u8 = 4;
/// Exit code: the socket was refused because another user may control it (its folder is not
/// ours or others may write there, or the process serving it runs as another user). Not 3: a
/// retry, or starting a daemon, would not help; the socket or its folder must be fixed.
const EXIT_UNTRUSTED: u8 = 5;

/// The exit code and the one-line message for a failure; `autostart` says whether the command
/// was allowed to start the daemon.
pub(crate) fn describe(error: &anyhow::Error, socket: &Path, autostart: bool) -> (u8, String) {
    if let Some(failed) = error.downcast_ref::<ToolFailed>() {
        return (EXIT_REQUEST_FAILED, failed.to_string());
    }
    if let Some(stopped) = error.downcast_ref::<UndoStopped>() {
        return (EXIT_REQUEST_FAILED, stopped.to_string());
    }
    let Some(client_error) = error.downcast_ref::<ClientError>() else {
        return (EXIT_FAILURE, format!("{error:#}"));
    };
    let path = socket.display();
    match client_error {
        ClientError::Connect { source, .. } => {
            let message = match source.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused if autostart => {
                    format!("no daemon is listening at {path} (start one with: filectxd)")
                }
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                    format!("no daemon is listening at {path} (autostart is off; start one with: filectxd)")
                }
                std::io::ErrorKind::PermissionDenied => {
                    format!("permission denied connecting to the daemon at {path}")
                }
                _ => format!("cannot connect to the daemon at {path}: {source}"),
            };
            (EXIT_UNREACHABLE, message)
        }
        ClientError::Transport(reason) => {
            (EXIT_UNREACHABLE, format!("the connection to the daemon at {path} broke: {reason}"))
        }
        // It names the socket, what is wrong and how to fix it.
        ClientError::UntrustedSocket { .. } => (EXIT_UNTRUSTED, client_error.to_string()),
        // Both name the daemon binary, the socket and the log file.
        ClientError::Spawn { .. } | ClientError::AutostartTimeout { .. } => {
            (EXIT_UNREACHABLE, client_error.to_string())
        }
        ClientError::Rpc { code, message, .. } => match client_error.fs_code() {
            Some(fs) => (EXIT_REQUEST_FAILED, format!("{fs}: {message}")),
            None => (EXIT_REQUEST_FAILED, format!("the daemon answered error {code}: {message}")),
        },
        ClientError::StreamFailed { code, message, .. } => {
            (EXIT_REQUEST_FAILED, format!("{code}: {message}"))
        }
        other => (EXIT_REQUEST_FAILED, other.to_string()),
    }
}

/// Writes `output` to stdout; a closed pipe (`filectx tools | head -1`) is not an error.
pub(crate) fn print_stdout(output: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(output.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::from(EXIT_OK),
        Err(error) => {
            eprintln!("filectx: cannot write to stdout: {error}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::args::Cli;

    #[test]
    fn usage_exit_code_matches_clap() {
        let error = Cli::try_parse_from(["filectx", "frobnicate"]).err();
        assert_eq!(error.map(|e| e.exit_code()), Some(i32::from(EXIT_USAGE)));
    }
}

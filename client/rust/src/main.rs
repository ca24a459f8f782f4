//! `filectx`: the command-line client of the filectx daemon — shows the daemon's status and the
//! tools a session gets, reads, streams, writes, edits and stats files through the daemon, and
//! watches them for changes; serves MCP (`filectx mcp`) and reviews agents' writes as a write
//! gate (`filectx gate`); installs the daemon as a systemd user service (`filectx service`). Thin: every call goes through `filectx_client`, which starts the
//! daemon when none answers at the socket (unless `--no-autostart` or `FILECTX_NO_AUTOSTART`).

mod cli;

use std::process::ExitCode;

use clap::Parser as _;
use filectx_client::terminal::escape_text;

use crate::cli::args::{Cli, Command, check_usage};
use crate::cli::exit::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE, describe, print_stdout};
use crate::cli::gate::run_gate;
use crate::cli::run::{run, run_mcp};
use crate::cli::service::run_service;

fn main() -> ExitCode {
    let cli = match Cli::try_parse().and_then(check_usage) {
        Ok(cli) => cli,
        Err(error) => {
            // --help and --version print to stdout and succeed; anything else is a usage error.
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    if let Command::Service(args) = &cli.command {
        // No daemon, no runtime: files and systemctl.
        return match run_service(&args.action) {
            Ok(output) => print_stdout(&output),
            Err(error) => {
                eprintln!("filectx service: {}", escape_text(&format!("{error:#}")));
                ExitCode::from(EXIT_FAILURE)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("filectx: cannot start the async runtime: {error}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let socket = filectx_client::socket_path(cli.socket.clone());
    if let Command::Gate(args) = &cli.command {
        let result = runtime.block_on(run_gate(&cli, args, &socket));
        // Stdin is read by a blocking thread that cannot be interrupted: do not wait for it.
        runtime.shutdown_background();
        return match result {
            Ok(()) => ExitCode::from(EXIT_OK),
            Err(error) => {
                let (code, message) = describe(&error, &socket, !cli.no_autostart);
                eprintln!("filectx gate: {}", escape_text(&message));
                ExitCode::from(code)
            }
        };
    }
    if let Command::Mcp(args) = &cli.command {
        let result = runtime.block_on(run_mcp(&cli, args, &socket));
        // Stdin is read by a blocking thread that cannot be interrupted: do not wait for it.
        runtime.shutdown_background();
        return match result {
            Ok(()) => ExitCode::from(EXIT_OK),
            Err(error) => {
                let (code, message) = describe(&error, &socket, !cli.no_autostart);
                eprintln!("filectx mcp: {}", escape_text(&message));
                ExitCode::from(code)
            }
        };
    }
    match runtime.block_on(run(&cli, &socket)) {
        Ok(output) => print_stdout(&output),
        Err(error) => {
            let (code, message) = describe(&error, &socket, !cli.no_autostart);
            eprintln!("filectx: {}", escape_text(&message));
            ExitCode::from(code)
        }
    }
}

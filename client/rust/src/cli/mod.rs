//! The modules of the `filectx` binary (the library, `filectx_client`, is `lib.rs` and the
//! modules it declares): the command line, running a command, rendering answers, exit codes,
//! the systemd user service.

pub(crate) mod args;
pub(crate) mod commands;
pub(crate) mod exit;
pub(crate) mod gate;
pub(crate) mod help;
pub(crate) mod journal;
pub(crate) mod observe;
pub(crate) mod render;
pub(crate) mod run;
pub(crate) mod service;
pub(crate) mod values;
pub(crate) mod watch;

//! Command-line interface of `filectxd`: flags, the optional config file, and how both become a
//! [`crate::Config`] and a socket path. Precedence: a flag, then the config file, then the
//! default.
//!
//! - `args`: the one definition of every setting (flag, config key, help, unit), read by both
//!   clap and serde;
//! - `file`: where the config file is and reading it;
//! - `settings`: layering flags over the file over the defaults, checking each value once, and
//!   the result as [`Settings`] (what `--print-config` prints) and as the runtime `Config`;
//! - `error`: why that failed.

mod args;
mod error;
mod file;
mod rules;
mod settings;

pub use self::args::{Args, CONFIG_ENV, Settings};
pub use self::error::SettingsError;
pub use self::file::default_config_path;

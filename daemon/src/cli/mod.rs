//! Command-line interface of `filectxd`: flags, the optional config file, and how both become a
//! [`crate::Config`] and a socket path. Precedence: a flag, then the config file, then the
//! default.
//!
//! - `args`: the settings table, every setting one row (name, type, default, check, help, flag,
//!   env, config key), made into [`Args`] (read by clap and serde), [`Settings`] (what
//!   `--print-config` prints) and their merge;
//! - `rules`: each setting's check, and how a refusal names its key and origin;
//! - `file`: where the config file is and reading it;
//! - `settings`: gathering flags and the file into [`Settings`], and those as the runtime
//!   `Config`;
//! - `error`: why that failed.

mod args;
mod error;
mod file;
mod rules;
mod settings;

pub use self::args::{Args, CONFIG_ENV, Settings};
pub use self::error::SettingsError;
pub use self::file::default_config_path;

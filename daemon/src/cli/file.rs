//! The config file: where it is looked for, and reading it into the same [`Args`] the flags
//! fill (so its keys are the settings' own names).

use std::path::{Path, PathBuf};

use super::args::Args;
use super::error::SettingsError;

/// The default config file: `$XDG_CONFIG_HOME/filectx/config.toml`, else under `~/.config`.
pub fn default_config_path() -> Option<PathBuf> {
    Some(crate::xdg::base_dir("XDG_CONFIG_HOME", ".config")?.join("filectx").join("config.toml"))
}

/// The settings a config file gives (every key optional; an unknown key or a wrong type is an
/// error that names it and its line).
pub(super) fn read_config(path: &Path) -> Result<Args, SettingsError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| SettingsError::Read { path: path.to_owned(), source })?;
    toml::from_str(&text)
        .map_err(|e| SettingsError::Parse { path: path.to_owned(), message: e.to_string().trim().to_owned() })
}

/// The config file `--config` (or `FILECTX_CONFIG`) names, else the default one if it exists,
/// read; with its path. No file: no settings from one.
pub(super) fn config_file(named: Option<&Path>) -> Result<(Args, Option<PathBuf>), SettingsError> {
    match named {
        Some(path) => Ok((read_config(path)?, Some(path.to_owned()))),
        None => match default_config_path().filter(|p| p.exists()) {
            Some(path) => Ok((read_config(&path)?, Some(path))),
            None => Ok((Args::default(), None)),
        },
    }
}

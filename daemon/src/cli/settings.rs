//! The effective settings ([`Settings`], made by the settings table in `args.rs`): gathered from
//! the flags and the config file, and what they become: the runtime [`Config`], the socket
//! folder's policy, and the TOML `--print-config` prints.

use std::time::Duration;

use filectx_protocol::socket::default_socket_path;

use super::args::{Args, Settings};
use super::error::SettingsError;
use super::file::{config_file, default_config_path};
use crate::config::Config;
use crate::journal::JournalConfig;
use crate::listen::FolderPolicy;

impl Args {
    /// Merges flags, the config file and the defaults. A bad value is reported with its key and
    /// where it came from.
    pub fn settings(&self) -> Result<Settings, SettingsError> {
        let (file, config_file) = config_file(self.config.as_deref())?;
        let elsewhere = match self.config.clone().or_else(default_config_path) {
            Some(path) if path.exists() => format!("from the config file {}", path.display()),
            _ => "the default".to_owned(),
        };
        self.over(&file, &elsewhere, config_file)
    }
}

impl Settings {
    /// The runtime configuration.
    pub fn config(&self) -> Config {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let defaults = Config::default();
        Config {
            max_connections: size(self.max_connections),
            max_frame_bytes: size(self.max_frame_bytes),
            max_batch_len: size(self.max_batch),
            max_concurrent_requests: size(self.max_concurrent_requests),
            max_queued_messages: size(self.max_queued_messages),
            max_batch_response_bytes: size(self.max_batch_response_bytes),
            max_queued_bytes: size(self.max_queued_bytes),
            max_total_queued_bytes: size(self.max_total_queued_bytes),
            initialize_timeout: Duration::from_secs_f64(self.initialize_timeout),
            frame_timeout: Duration::from_secs_f64(self.frame_timeout),
            max_partial_frame_bytes: size(self.max_partial_frame_bytes),
            shutdown_grace: Duration::from_secs_f64(self.shutdown_grace),
            idle_exit: (self.idle_exit > 0.0).then(|| Duration::from_secs_f64(self.idle_exit)),
            files: crate::context::ProviderConfig {
                max_edit_bytes: self.max_edit_bytes,
                lock_patience: Duration::from_secs_f64(self.lock_timeout),
                fsync: !self.no_fsync,
                max_cached_files: size(self.max_cached_files),
                max_index_bytes: size(self.max_cache_bytes),
                max_mapped_bytes: size(self.max_mapped_bytes),
                max_open_files: size(self.max_open_files),
                idle_release: Duration::from_secs_f64(self.cache_idle),
                refuse_multi_link_writes: self.refuse_multi_link_writes,
                max_hash_bytes: self.max_hash_bytes,
                max_snapshot_bytes: size(self.max_snapshot_bytes),
                max_snapshot_file_bytes: size(self.max_snapshot_file_bytes),
                max_search_cache_bytes: size(self.max_search_cache_bytes),
                max_watches: size(self.max_watches),
                max_window_bytes: self.max_window_bytes,
                ..defaults.files.clone()
            },
            allowed_roots: self.allowed_roots.clone(),
            deny_read: self.deny_read.clone(),
            deny_write: self.deny_write.clone(),
            file_slots: size(self.file_slots),
            max_owners: size(self.max_owners),
            max_roots: size(self.max_roots),
            resume_grace: Duration::from_secs_f64(self.resume_grace),
            max_parked_sessions: size(self.max_parked_sessions),
            max_parked_bytes: size(self.max_parked_bytes),
            max_session_observed_bytes: size(self.max_session_observed_bytes),
            max_observed_bytes: size(self.max_observed_bytes),
            gates: !self.no_gates,
            max_gate_intents: size(self.max_gate_intents),
            gate_sessions: self.gate_sessions,
            read_max_bytes: self.read_max_bytes,
            search_slots: size(self.search_slots),
            search_timeout: Duration::from_secs_f64(self.search_timeout),
            search_regex_bytes: size(self.search_regex_bytes),
            lsp: crate::lsp::LspConfig {
                servers: self.language_server.clone(),
                builtins: !self.no_builtin_language_servers,
                wait: Duration::from_secs_f64(self.diagnostics_wait),
                wait_starting: Duration::from_secs_f64(self.diagnostics_wait_starting),
                settle: Duration::from_secs_f64(self.diagnostics_settle),
                idle: Duration::from_secs_f64(self.language_server_idle),
                document_idle: Duration::from_secs_f64(self.language_server_idle),
                max_servers: size(self.max_language_servers),
                max_memory: self.language_server_memory,
                warnings: self.diagnostics_warnings,
                path: std::env::var_os("PATH"),
            },
            journal: Some(self.journal_dir.clone())
                .filter(|dir| !self.no_journal && !dir.as_os_str().is_empty())
                .map(|dir| JournalConfig {
                    dir,
                    max_bytes: self.journal_max_bytes,
                    max_age: Duration::from_secs_f64(self.journal_max_age),
                    max_file_bytes: self.journal_max_file_bytes,
                    fsync: !self.no_fsync,
                }),
            search_index: Some(self.search_index_dir.clone())
                .filter(|dir| self.max_search_index_bytes > 0 && !dir.as_os_str().is_empty())
                .map(|dir| crate::listing::index::IndexConfig {
                    dir,
                    max_bytes: self.max_search_index_bytes,
                    fsync: !self.no_fsync,
                }),
            ..defaults
        }
    }

    /// How strictly to check the socket's folder: the `/tmp` fallback must be private; a folder
    /// the user named (or `$XDG_RUNTIME_DIR`) is used as given.
    pub fn folder_policy(&self) -> FolderPolicy {
        let uid = rustix::process::geteuid().as_raw();
        if self.socket == default_socket_path(None, uid) {
            FolderPolicy::Private
        } else {
            FolderPolicy::AsGiven
        }
    }

    /// The settings as TOML, for `--print-config`.
    pub fn to_toml(&self) -> String {
        let mut text = String::from("# filectxd effective configuration\n");
        match &self.config_file {
            Some(path) => text.push_str(&format!("# config file: {}\n", path.display())),
            None => text.push_str("# config file: none\n"),
        }
        match toml::to_string(self) {
            Ok(body) => text.push_str(&body),
            Err(err) => text.push_str(&format!("# cannot render: {err}\n")),
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::cli::Args;
    use crate::cli::rules::{
        DEFAULT_JOURNAL_MAX_AGE, DEFAULT_JOURNAL_MAX_BYTES, DEFAULT_JOURNAL_MAX_FILE_BYTES,
        DEFAULT_MAX_SEARCH_INDEX_BYTES,
    };
    use clap::CommandFactory;

    #[test]
    fn every_flag_has_help_and_defaults_match_config() {
        Args::command().debug_assert();
        for arg in Args::command().get_arguments() {
            assert!(arg.get_help().is_some(), "--{} has no help", arg.get_id());
        }
        let args = Args { config: Some(PathBuf::from("/dev/null")), ..Args::default() };
        let settings = args.settings().unwrap();
        // The library's default runs without a journal; the daemon's keeps one in the default
        // folder.
        let journal = crate::journal::default_dir().map(|dir| JournalConfig {
            dir,
            max_bytes: DEFAULT_JOURNAL_MAX_BYTES,
            max_age: Duration::from_secs_f64(DEFAULT_JOURNAL_MAX_AGE),
            max_file_bytes: DEFAULT_JOURNAL_MAX_FILE_BYTES,
            fsync: true,
        });
        // The library's default runs no language server; the daemon's looks on its PATH.
        let lsp =
            crate::lsp::LspConfig { builtins: true, path: std::env::var_os("PATH"), ..Default::default() };
        let search_index = crate::listing::index::default_dir().map(|dir| {
            crate::listing::index::IndexConfig { dir, max_bytes: DEFAULT_MAX_SEARCH_INDEX_BYTES, fsync: true }
        });
        assert_eq!(settings.config(), Config { journal, lsp, search_index, ..Config::default() });
    }

    #[test]
    fn flags_beat_the_file_and_the_file_beats_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "max_connections = 7\nfsync = false\nlock_timeout = 2.5\n").unwrap();
        let args = Args { config: Some(path.clone()), max_connections: Some(9), ..Args::default() };
        let settings = args.settings().unwrap();
        assert_eq!(settings.max_connections, 9);
        assert!(settings.no_fsync);
        assert_eq!(settings.config().files.lock_patience, Duration::from_millis(2500));
        let printed = settings.to_toml();
        assert!(printed.contains("max_connections = 9") && printed.contains("fsync = false"), "{printed}");
        assert!(printed.contains("deny_write = [\"**/.git/**\"]"), "{printed}");
    }

    #[test]
    fn sandbox_settings_come_from_flags_or_the_file_and_bad_globs_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "allowed_roots = [\"/srv\"]\ndeny_read = [\"**/*.pem\"]\nrefuse_multi_link_writes = true\n",
        )
        .unwrap();
        let args =
            Args { config: Some(path.clone()), deny_write: Some(vec!["*.lock".into()]), ..Args::default() };
        let settings = args.settings().unwrap();
        assert_eq!(settings.allowed_roots, vec![PathBuf::from("/srv")]);
        assert_eq!(
            (settings.deny_read.clone(), settings.deny_write.clone()),
            (vec!["**/*.pem".to_owned()], vec!["*.lock".to_owned()])
        );
        assert!(settings.config().files.refuse_multi_link_writes);
        let err = Args { config: Some(path.clone()), deny_read: Some(vec!["a/[".into()]), ..Args::default() }
            .settings()
            .unwrap_err();
        assert!(err.to_string().contains("deny_read"), "{err}");
        let err = Args { config: Some(path), allowed_roots: Some(vec!["rel".into()]), ..Args::default() }
            .settings()
            .unwrap_err();
        assert!(err.to_string().contains("allowed_roots"), "{err}");
    }

    #[test]
    fn a_bad_config_file_names_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "max_conections = 7\n").unwrap();
        let err = Args { config: Some(path.clone()), ..Args::default() }.settings().unwrap_err();
        assert!(err.to_string().contains("max_conections"), "{err}");
        std::fs::write(&path, "max_connections = \"many\"\n").unwrap();
        let err = Args { config: Some(path.clone()), ..Args::default() }.settings().unwrap_err();
        assert!(err.to_string().contains("max_connections"), "{err}");
        std::fs::write(&path, "max_batch = 0\n").unwrap();
        let err = Args { config: Some(path.clone()), ..Args::default() }.settings().unwrap_err();
        assert!(err.to_string().contains("max_batch"), "{err}");
        for bad in ["search_regex_bytes = 4096", "search_slots = 0", "search_timeout = 0"] {
            std::fs::write(&path, format!("{bad}\n")).unwrap();
            let err = Args { config: Some(path.clone()), ..Args::default() }.settings().unwrap_err();
            let key = bad.split(' ').next().unwrap();
            assert!(err.to_string().contains(key), "{bad}: {err}");
        }
        std::fs::write(&path, "search_slots = 3\nsearch_timeout = 2.5\nsearch_regex_bytes = 2097152\n")
            .unwrap();
        let config = Args { config: Some(path), ..Args::default() }.settings().unwrap().config();
        assert_eq!(
            (config.search_slots, config.search_timeout, config.search_regex_bytes),
            (3, Duration::from_millis(2500), 2 << 20)
        );
    }
}

//! Which language servers the daemon runs, as its owner chose them: the `[[language_server]]`
//! entries of the config file, and the built-in entries for basedpyright (or pyright),
//! typescript-language-server, rust-analyzer and gopls, each used only when its command is
//! found on the daemon's own `PATH` (absolute folders only). Nothing is ever downloaded.
//!
//! Servers may run the project's code (rust-analyzer's build scripts, proc macros and `cargo
//! check`; typescript-language-server's workspace TypeScript; a venv's python; gopls's `go`
//! commands). Each entry says whether it may (`project_code`); the built-ins default to no, and
//! are started with the options that keep them from it where the server has such options.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One `[[language_server]]` entry as the config file gives it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// The short name shown in answers and status (`basedpyright`, `typescript`). An entry with
    /// a built-in's name replaces that built-in.
    pub name: String,
    /// The program: an absolute path, or a name looked up on the daemon's `PATH`. Empty in an
    /// entry that names a built-in to change its `project_code`, `env`, `settings` or
    /// `initialization_options` only.
    #[serde(default)]
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// The file extensions it serves, with their dot (`[".py", ".pyi"]`).
    #[serde(default)]
    pub extensions: Vec<String>,
    /// File names that mark a project's root, in priority order (the first one found above a
    /// file wins); `NAME:TEXT` matches only a file holding TEXT (`"Cargo.toml:[workspace]"`).
    #[serde(default)]
    pub root_markers: Vec<String>,
    /// Environment variables added for it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `initializationOptions` of its `initialize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization_options: Option<toml::Value>,
    /// What it is told when it asks for `workspace/configuration` (a section name to a value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<toml::Value>,
    /// Whether it may run the project's own code (build scripts, the workspace's compiler or
    /// interpreter); default false.
    #[serde(default)]
    pub project_code: bool,
    /// Whether it checks only on save (it gets `didSave` after each change landed).
    #[serde(default)]
    pub did_save: bool,
    /// The LSP `languageId` of each extension (default: by the built-in table, else the
    /// extension without its dot).
    #[serde(default)]
    pub language_ids: BTreeMap<String, String>,
}

/// A marker of a project's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The file's name.
    pub file: String,
    /// Text the file must hold, if any.
    pub holding: Option<String>,
}

impl Marker {
    fn parse(spec: &str) -> Self {
        match spec.split_once(':') {
            Some((file, text)) => Self { file: file.to_owned(), holding: Some(text.to_owned()) },
            None => Self { file: spec.to_owned(), holding: None },
        }
    }
}

/// A server the daemon may run: an entry with its command found.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    /// Its short name.
    pub name: String,
    /// The program, absolute.
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extensions with their dot.
    pub extensions: Vec<String>,
    /// Root markers, in priority order.
    pub markers: Vec<Marker>,
    /// Environment added.
    pub env: Vec<(String, String)>,
    /// `initializationOptions` (JSON).
    pub initialization_options: Option<serde_json::Value>,
    /// `workspace/configuration` answers (JSON, by section).
    pub settings: Option<serde_json::Value>,
    /// Whether it may run the project's own code.
    pub project_code: bool,
    /// Whether it gets `didSave` after each change.
    pub did_save: bool,
    /// `languageId` by extension.
    pub language_ids: BTreeMap<String, String>,
    /// Whether the owner's config named it (then its command may lie inside a session's root).
    pub configured: bool,
}

impl Server {
    /// Whether it serves `path` (by its extension).
    pub fn serves(&self, path: &Path) -> bool {
        extension_of(path).is_some_and(|ext| self.extensions.iter().any(|e| e.eq_ignore_ascii_case(&ext)))
    }

    /// The `languageId` of `path`.
    pub fn language_id(&self, path: &Path) -> String {
        let ext = extension_of(path).unwrap_or_default();
        if let Some(id) = self.language_ids.get(&ext) {
            return id.clone();
        }
        default_language_id(&ext).unwrap_or_else(|| ext.trim_start_matches('.').to_owned())
    }
}

/// `.ext` of `path`, lowercase.
fn extension_of(path: &Path) -> Option<String> {
    path.extension().and_then(|e| e.to_str()).map(|e| format!(".{}", e.to_ascii_lowercase()))
}

fn default_language_id(ext: &str) -> Option<String> {
    let id = match ext {
        ".py" | ".pyi" => "python",
        ".ts" | ".mts" | ".cts" => "typescript",
        ".tsx" => "typescriptreact",
        ".js" | ".mjs" | ".cjs" => "javascript",
        ".jsx" => "javascriptreact",
        ".rs" => "rust",
        ".go" => "go",
        _ => return None,
    };
    Some(id.to_owned())
}

/// The settings of the language servers (part of the daemon's `Config`).
#[derive(Debug, Clone, PartialEq)]
pub struct LspConfig {
    /// The owner's `[[language_server]]` entries.
    pub servers: Vec<ServerSpec>,
    /// Whether the built-in entries apply (when their command is on `PATH`).
    pub builtins: bool,
    /// How long a write or edit waits for the diagnostics of what it wrote, from a server that
    /// is ready.
    pub wait: Duration,
    /// The same, from a server still starting (initializing, indexing).
    pub wait_starting: Duration,
    /// How long after the first publish following a change more publishes are waited for (a
    /// server that does not say which version it checked).
    pub settle: Duration,
    /// A server nobody used for this long is stopped.
    pub idle: Duration,
    /// A document nobody used for this long is closed.
    pub document_idle: Duration,
    /// Most servers running at once; the least recently used one stops first.
    pub max_servers: usize,
    /// Most bytes of memory (resident, summed over each server's whole process tree) the servers
    /// may use together.
    pub max_memory: u64,
    /// Whether warnings are shown too (else errors only).
    pub warnings: bool,
    /// The daemon's `PATH`, where commands are looked up.
    pub path: Option<std::ffi::OsString>,
}

impl Default for LspConfig {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            builtins: false,
            wait: Duration::from_secs(3),
            wait_starting: Duration::from_secs(20),
            settle: Duration::from_millis(100),
            idle: Duration::from_secs(600),
            document_idle: Duration::from_secs(600),
            max_servers: 4,
            max_memory: 4 << 30,
            warnings: false,
            path: None,
        }
    }
}

/// The built-in entries, each with the commands tried in order.
fn builtins() -> Vec<(ServerSpec, &'static [&'static str])> {
    let spec = |name: &str, extensions: &[&str], markers: &[&str], args: &[&str]| ServerSpec {
        name: name.to_owned(),
        command: String::new(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        extensions: extensions.iter().map(|e| (*e).to_owned()).collect(),
        root_markers: markers.iter().map(|m| (*m).to_owned()).collect(),
        ..ServerSpec::default()
    };
    vec![
        (
            spec("basedpyright", &[".py", ".pyi"], &["pyproject.toml", "pyrightconfig.json"], &["--stdio"]),
            &["basedpyright-langserver", "pyright-langserver"],
        ),
        (
            spec(
                "typescript",
                &[".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"],
                &["tsconfig.json", "jsconfig.json", "package.json"],
                &["--stdio"],
            ),
            &["typescript-language-server"],
        ),
        (
            ServerSpec {
                did_save: true,
                ..spec("rust-analyzer", &[".rs"], &["Cargo.toml:[workspace]", "Cargo.toml"], &[])
            },
            &["rust-analyzer"],
        ),
        (spec("gopls", &[".go"], &["go.work", "go.mod"], &[]), &["gopls"]),
    ]
}

/// What the daemon's `PATH` gave: the servers it may run, and the built-ins it did not find.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServersFound {
    /// The servers, the owner's entries first.
    pub servers: Vec<Server>,
    /// Built-ins whose command is not on `PATH` (with the commands looked for).
    pub missing: Vec<String>,
    /// Entries of the owner's whose command was not found (name and why).
    pub unusable: Vec<(String, String)>,
}

/// Looks the commands up: the owner's entries, then the built-ins not replaced by one.
pub fn find(config: &LspConfig) -> ServersFound {
    let dirs: Vec<PathBuf> = config
        .path
        .as_deref()
        .map(|p| std::env::split_paths(p).filter(|d| d.is_absolute()).collect())
        .unwrap_or_default();
    let mut found = ServersFound::default();
    let builtin_names: Vec<String> = builtins().into_iter().map(|(spec, _)| spec.name).collect();
    // An entry naming a built-in without a command only changes how the built-in runs.
    let tweaks: Vec<&ServerSpec> =
        config.servers.iter().filter(|s| s.command.is_empty() && builtin_names.contains(&s.name)).collect();
    for spec in config.servers.iter().filter(|s| !tweaks.iter().any(|t| std::ptr::eq(*t, *s))) {
        match lookup(&spec.command, &dirs) {
            Some(command) => found.servers.push(server(spec, command, true)),
            None => found.unusable.push((
                spec.name.clone(),
                format!("its command {:?} is not an executable file, nor on the daemon's PATH", spec.command),
            )),
        }
    }
    if !config.builtins {
        return found;
    }
    for (mut spec, commands) in builtins() {
        if config.servers.iter().any(|s| s.name == spec.name && !s.command.is_empty()) {
            continue;
        }
        let tweak = tweaks.iter().find(|t| t.name == spec.name);
        let Some((command, path)) = commands.iter().find_map(|c| lookup(c, &dirs).map(|p| (*c, p))) else {
            found.missing.push(format!("{} ({})", spec.name, commands.join(" or ")));
            continue;
        };
        if command == "pyright-langserver" {
            spec.name = "pyright".to_owned();
        }
        let mut server = server(&spec, path, false);
        server.initialization_options = builtin_options(&server);
        if let Some(tweak) = tweak {
            server.project_code = tweak.project_code;
            if server.project_code {
                server.initialization_options = None;
            }
            let own = self::server(tweak, PathBuf::new(), true);
            server.env.extend(own.env);
            server.settings = own.settings.or(server.settings);
            server.initialization_options = own.initialization_options.or(server.initialization_options);
        }
        if server.name == "gopls" && !server.project_code {
            // Nothing downloaded, go.mod never rewritten: only what is on disk.
            server.env.push(("GOFLAGS".to_owned(), "-mod=readonly".to_owned()));
            server.env.push(("GOPROXY".to_owned(), "off".to_owned()));
        }
        found.servers.push(server);
    }
    found
}

/// A built-in's `initializationOptions` that keep it from the project's own code.
fn builtin_options(server: &Server) -> Option<serde_json::Value> {
    match server.name.as_str() {
        // Build scripts, proc macros and `cargo check` run the project's code.
        "rust-analyzer" => Some(serde_json::json!({
            "cargo": {"buildScripts": {"enable": false}},
            "procMacro": {"enable": false},
            "checkOnSave": false,
        })),
        // The TypeScript installed beside the server, not the workspace's node_modules.
        "typescript" => {
            typescript_beside(&server.command).map(|lib| serde_json::json!({"tsserver": {"path": lib}}))
        }
        _ => None,
    }
}

/// The `typescript/lib` folder of the `node_modules` the server's command lives in (a global
/// npm install puts both there), if any.
fn typescript_beside(command: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(command).ok()?;
    let modules = real.ancestors().find(|a| a.file_name().is_some_and(|n| n == "node_modules"))?;
    let lib = modules.join("typescript/lib");
    lib.join("tsserver.js").is_file().then_some(lib)
}

fn server(spec: &ServerSpec, command: PathBuf, configured: bool) -> Server {
    let json = |v: &Option<toml::Value>| v.as_ref().and_then(|v| serde_json::to_value(v).ok());
    Server {
        name: spec.name.clone(),
        command,
        args: spec.args.clone(),
        extensions: spec.extensions.iter().map(|e| e.to_ascii_lowercase()).collect(),
        markers: spec.root_markers.iter().map(|m| Marker::parse(m)).collect(),
        env: spec.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        initialization_options: json(&spec.initialization_options),
        settings: json(&spec.settings),
        project_code: spec.project_code,
        did_save: spec.did_save,
        language_ids: spec.language_ids.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.clone())).collect(),
        configured,
    }
}

/// `command` as an absolute path to an executable file: itself when absolute, else the first
/// match in `dirs`.
fn lookup(command: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.is_empty() {
        return None;
    }
    let given = Path::new(command);
    if given.is_absolute() {
        return executable(given).then(|| given.to_path_buf());
    }
    if command.contains('/') {
        return None;
    }
    dirs.iter().map(|dir| dir.join(command)).find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_builtins_are_found_on_path_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for name in ["pyright-langserver", "my-server"] {
            std::fs::write(bin.join(name), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mine = ServerSpec {
            name: "mine".into(),
            command: "my-server".into(),
            extensions: vec![".X".into()],
            root_markers: vec!["Cargo.toml:[workspace]".into()],
            ..ServerSpec::default()
        };
        let config = LspConfig {
            servers: vec![mine],
            builtins: true,
            path: Some(std::env::join_paths([PathBuf::from("relative/bin"), bin.clone()]).unwrap()),
            ..LspConfig::default()
        };
        let found = find(&config);
        let names: Vec<&str> = found.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["mine", "pyright"], "pyright-langserver stands in for basedpyright");
        assert!(found.servers[0].configured && !found.servers[1].configured);
        assert_eq!(
            found.servers[0].markers[0],
            Marker { file: "Cargo.toml".into(), holding: Some("[workspace]".into()) }
        );
        assert!(
            found.servers[0].serves(Path::new("/a/b.x")) && !found.servers[0].serves(Path::new("/a/b.py"))
        );
        assert!(found.servers[1].serves(Path::new("/a/b.py")));
        assert_eq!(found.servers[1].language_id(Path::new("b.pyi")), "python");
        assert_eq!(found.missing.len(), 3, "{:?}", found.missing);
        assert!(found.missing.iter().any(|m| m.starts_with("rust-analyzer")));
        // No builtins, and an entry whose command is nowhere.
        let config = LspConfig {
            servers: vec![ServerSpec {
                name: "gone".into(),
                command: "nope".into(),
                ..ServerSpec::default()
            }],
            ..config
        };
        let config = LspConfig { builtins: false, ..config };
        let found = find(&config);
        assert!(found.servers.is_empty() && found.missing.is_empty());
        assert_eq!(found.unusable[0].0, "gone");
    }
}

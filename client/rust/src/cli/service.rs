//! `filectx service install | uninstall | status`: the systemd user units of `systemd/` (built
//! into the binary), written into `~/.config/systemd/user` with this installation's `filectxd`
//! and the installing user's PATH, then reloaded and the socket enabled; refused for a binary in
//! a place that will not last (npx's or uv's cache, a temp folder).

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use filectx_client::terminal::escape_text;
use filectx_client::{DAEMON_ENV, daemon_binary};

use super::args::ServiceAction;

/// The units as shipped in `systemd/`.
const SOCKET_UNIT: &str = include_str!("../../../../systemd/filectxd.socket");
const SERVICE_UNIT: &str = include_str!("../../../../systemd/filectxd.service");
const SOCKET_NAME: &str = "filectxd.socket";
const SERVICE_NAME: &str = "filectxd.service";

/// The first line of every unit this command writes.
const WRITTEN_BY: &str = "# Written by `filectx service install`";

/// How long `npm prefix -g`, `systemctl` or `loginctl` may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs the action; returns what to print on stdout.
pub(crate) fn run_service(action: &ServiceAction) -> anyhow::Result<String> {
    let places = Places::from_env();
    let folder = unit_folder(&places)?;
    match action {
        ServiceAction::Install => install(&places, &folder),
        ServiceAction::Uninstall => uninstall(&folder),
        ServiceAction::Status => status(&folder),
    }
}

/// The folders that tell a lasting installation from a passing one, from the environment.
#[derive(Debug, Default, Clone)]
pub(crate) struct Places {
    pub(crate) home: Option<PathBuf>,
    pub(crate) config_home: Option<PathBuf>,
    /// uv's cache: `UV_CACHE_DIR`, `$XDG_CACHE_HOME/uv`, `~/.cache/uv`.
    pub(crate) uv_caches: Vec<PathBuf>,
    /// npm's caches, whose `_npx` folder holds what `npx` runs: `npm_config_cache`, `~/.npm`.
    pub(crate) npm_caches: Vec<PathBuf>,
    /// Cache folders in general: `$XDG_CACHE_HOME`, `~/.cache`.
    pub(crate) caches: Vec<PathBuf>,
    /// Temp folders: `$TMPDIR`, `/tmp`, `/var/tmp`, `/dev/shm`.
    pub(crate) temps: Vec<PathBuf>,
}

impl Places {
    fn from_env() -> Self {
        let var = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|path| path.is_absolute());
        let home = std::env::home_dir().filter(|home| home.is_absolute());
        let cache_home = var("XDG_CACHE_HOME").or_else(|| home.as_ref().map(|home| home.join(".cache")));
        let mut places = Places {
            config_home: var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|home| home.join(".config"))),
            uv_caches: var("UV_CACHE_DIR").into_iter().collect(),
            npm_caches: var("npm_config_cache").into_iter().collect(),
            temps: var("TMPDIR").into_iter().collect(),
            ..Places::default()
        };
        places.uv_caches.extend(cache_home.as_ref().map(|cache| cache.join("uv")));
        places.uv_caches.extend(home.as_ref().map(|home| home.join(".cache/uv")));
        places.npm_caches.extend(home.as_ref().map(|home| home.join(".npm")));
        places.caches.extend(cache_home);
        places.caches.extend(home.as_ref().map(|home| home.join(".cache")));
        places.temps.extend(["/tmp", "/var/tmp", "/dev/shm"].map(PathBuf::from));
        places.home = home;
        places
    }
}

/// Why a binary's place will not last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Passing {
    /// In npx's cache (a folder `_npx`), which npm clears or replaces.
    Npx(PathBuf),
    /// In uv's cache, where `uvx` keeps its throwaway environments.
    Uv(PathBuf),
    /// In another cache folder.
    Cache(PathBuf),
    /// In a temp folder.
    Temp(PathBuf),
}

/// Whether `path` is in a place that will not last, judged on its real path and on the real
/// paths of the places (either may lead through links).
pub(crate) fn passing(path: &Path, places: &Places) -> Option<Passing> {
    let real = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let path = real(path);
    let under = |folders: &[PathBuf]| {
        folders.iter().map(|folder| real(folder)).find(|folder| path.starts_with(folder))
    };
    if let Some(at) = path.components().position(|part| part == Component::Normal("_npx".as_ref())) {
        return Some(Passing::Npx(path.components().take(at + 1).collect()));
    }
    if let Some(cache) = under(&places.npm_caches).filter(|cache| path.starts_with(cache.join("_npx"))) {
        return Some(Passing::Npx(cache.join("_npx")));
    }
    under(&places.uv_caches)
        .map(Passing::Uv)
        .or_else(|| under(&places.caches).map(Passing::Cache))
        .or_else(|| under(&places.temps).map(Passing::Temp))
}

/// The refusal for a daemon at a passing place: where it is, why that will not do, what to do.
fn refusal(daemon: &Path, why: &Passing) -> String {
    let daemon = daemon.display();
    let (place, install) = match why {
        Passing::Npx(folder) => (
            format!("npx's cache ({}), which npm clears and replaces", folder.display()),
            "npm install -g @filectx/cli",
        ),
        Passing::Uv(folder) => (
            format!("uv's cache ({}), where uvx keeps throwaway environments", folder.display()),
            "uv tool install filectx",
        ),
        Passing::Cache(folder) => (
            format!("a cache folder ({}), which may be cleared at any time", folder.display()),
            "uv tool install filectx, or npm install -g @filectx/cli",
        ),
        Passing::Temp(folder) => (
            format!("a temp folder ({}), which may be cleared at any time", folder.display()),
            "uv tool install filectx, or npm install -g @filectx/cli",
        ),
    };
    format!(
        "{daemon} is in {place}: a service started from there would stop working when it goes. \
         Install filectx to stay ({install}), then run `filectx service install` from that installation."
    )
}

/// `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`.
fn unit_folder(places: &Places) -> anyhow::Result<PathBuf> {
    let Some(config) = &places.config_home else {
        bail!("neither XDG_CONFIG_HOME nor a home folder is known, so there is no folder for user units");
    };
    Ok(config.join("systemd/user"))
}

/// The service unit of `systemd/` with `daemon` as its binary and `path` as its PATH.
pub(crate) fn service_unit(daemon: &Path, path: &str) -> anyhow::Result<String> {
    let mut unit = format!(
        "{WRITTEN_BY} (filectx {}) from the filectx source's systemd/{SERVICE_NAME}:\n\
         # ExecStart runs the filectxd of that installation, and PATH is the installing user's (for\n\
         # the language servers the daemon starts). Running it again rewrites this file;\n\
         # `filectx service uninstall` removes it.\n",
        env!("CARGO_PKG_VERSION")
    );
    let (mut exec, mut environment) = (false, false);
    for line in SERVICE_UNIT.lines() {
        if let Some(command) = line.strip_prefix("ExecStart=") {
            let arguments = command.split_once(' ').map_or("", |(_, arguments)| arguments);
            let _ = writeln!(unit, "ExecStart={} {arguments}", unit_word(daemon)?);
            exec = true;
        } else if line.starts_with("Environment=PATH=") {
            let _ = writeln!(unit, "Environment=\"PATH={}\"", quoted(path));
            environment = true;
        } else {
            let _ = writeln!(unit, "{line}");
        }
    }
    if !(exec && environment) {
        bail!("systemd/{SERVICE_NAME} as built in has no ExecStart= or no Environment=PATH= line");
    }
    Ok(unit)
}

/// The socket unit as written: the one of `systemd/` under this command's header.
pub(crate) fn socket_unit() -> String {
    format!(
        "{WRITTEN_BY} (filectx {}) from the filectx source's systemd/{SOCKET_NAME}.\n{SOCKET_UNIT}",
        env!("CARGO_PKG_VERSION")
    )
}

/// A path as one word of a unit's command line: specifiers and `$` escaped, quoted when it has
/// white space or quotes. A path that is not UTF-8 or has a control character is refused.
fn unit_word(path: &Path) -> anyhow::Result<String> {
    let text = path.to_str().with_context(|| format!("{} is not valid UTF-8", path.display()))?;
    if text.chars().any(char::is_control) {
        bail!("{} has a control character, which a unit file cannot hold", escape_text(text));
    }
    let escaped = text.replace('$', "$$");
    if escaped.chars().any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\') {
        Ok(format!("\"{}\"", quoted(&escaped)))
    } else {
        Ok(escaped.replace('%', "%%"))
    }
}

/// `text` for the inside of a quoted unit value: backslashes, quotes and specifiers escaped.
fn quoted(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('%', "%%")
}

/// The daemon's PATH: the installing user's, without folders that will not last (npx's and uv's
/// throwaway environments, temp folders) or that a unit cannot hold, then `~/.local/bin`, npm's
/// global bin folder and `~/.cargo/bin` when missing, where language servers are installed.
pub(crate) fn daemon_path(user_path: &str, npm_bin: Option<&Path>, places: &Places) -> String {
    let mut folders: Vec<PathBuf> = Vec::new();
    let lasting = |folder: &Path| {
        folder.is_absolute()
            && folder.to_str().is_some_and(|text| !text.chars().any(char::is_control))
            && !folder.ends_with("node_modules/.bin")
            && passing(folder, places).is_none()
    };
    for folder in std::env::split_paths(user_path) {
        if lasting(&folder) && !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    let home = places.home.as_deref();
    let extra = [
        home.map(|home| home.join(".local/bin")),
        npm_bin.map(Path::to_owned),
        home.map(|h| h.join(".cargo/bin")),
    ];
    for folder in extra.into_iter().flatten() {
        if lasting(&folder) && !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    std::env::join_paths(&folders).map(|joined| joined.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Runs `program args…` with a deadline; `Ok((success, stdout, stderr))`, or why it could not run.
fn run_tool(program: &str, args: &[&str]) -> Result<(bool, String, String), String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run {program}: {error}"))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < TOOL_TIMEOUT => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{program} {} did not finish within {TOOL_TIMEOUT:?}", args.join(" ")));
            }
            Err(error) => return Err(format!("cannot wait for {program}: {error}")),
        }
    }
    let output =
        child.wait_with_output().map_err(|error| format!("cannot read {program}'s output: {error}"))?;
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_owned();
    Ok((output.status.success(), text(&output.stdout), text(&output.stderr)))
}

/// npm's global bin folder (`npm prefix -g`, then `bin`), when npm is on PATH and answers.
fn npm_global_bin() -> Option<PathBuf> {
    match run_tool("npm", &["prefix", "-g"]) {
        Ok((true, prefix, _)) if Path::new(&prefix).is_absolute() => Some(Path::new(&prefix).join("bin")),
        _ => None,
    }
}

/// `systemctl --user ARGS…`: `Ok(stdout)`, or the error with what systemctl said.
fn systemctl(args: &[&str]) -> anyhow::Result<String> {
    let mut all = vec!["--user"];
    all.extend_from_slice(args);
    let shown = format!("systemctl {}", all.join(" "));
    match run_tool("systemctl", &all) {
        Ok((true, stdout, _)) => Ok(stdout),
        Ok((false, stdout, stderr)) => {
            let said = if stderr.is_empty() { stdout } else { stderr };
            bail!("{shown} failed: {}", escape_text(&said))
        }
        Err(why) => bail!("{shown}: {why}"),
    }
}

/// One word of `systemctl --user is-enabled|is-active UNIT` (which exits non-zero for "disabled",
/// "inactive", …), or why it is unknown.
fn unit_state(query: &str, unit: &str) -> String {
    match run_tool("systemctl", &["--user", query, unit]) {
        Ok((_, stdout, _)) if !stdout.is_empty() => escape_text(&stdout).into_owned(),
        Ok((_, _, stderr)) => format!("unknown ({})", escape_text(&stderr)),
        Err(why) => format!("unknown ({why})"),
    }
}

/// Whether a daemon answers at the units' socket, `$XDG_RUNTIME_DIR/filectx.sock`.
fn daemon_answers() -> bool {
    let Some(runtime) =
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|dir| dir.is_absolute())
    else {
        return false;
    };
    std::os::unix::net::UnixStream::connect(runtime.join("filectx.sock")).is_ok()
}

/// The user's name for loginctl: `$USER`, `$LOGNAME`, else the uid.
fn user_name() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|name| !name.is_empty() && !name.chars().any(char::is_control))
        .unwrap_or_else(|| rustix::process::getuid().as_raw().to_string())
}

/// What to say about lingering: without it, systemd stops the user's services at logout.
fn linger_advice() -> String {
    let user = user_name();
    let enable = format!("loginctl enable-linger {user}");
    match run_tool("loginctl", &["show-user", &user, "--property=Linger", "--value"]) {
        Ok((true, linger, _)) if linger == "yes" => {
            format!("Lingering is on for {user}: your services run without a login, from boot on.\n")
        }
        Ok((true, linger, _)) if linger == "no" => format!(
            "Lingering is off for {user}: systemd stops your services when you log out. For agents that \
             run while you are logged out (and to start at boot): {enable}\n"
        ),
        Ok((_, _, said)) => format!(
            "Cannot tell whether lingering is on for {user} (loginctl: {}). Without it, systemd stops your \
             services when you log out; to keep them: {enable}\n",
            escape_text(&said)
        ),
        Err(why) => format!(
            "Cannot tell whether lingering is on for {user} ({why}). Without it, systemd stops your services \
             when you log out; to keep them: {enable}\n"
        ),
    }
}

/// Writes `text` to `path` unless it holds it already (through a temp file and a rename, mode
/// 0644); whether it changed anything.
fn put(path: &Path, text: &str) -> anyhow::Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    let fresh = path.with_extension("filectx-new");
    std::fs::write(&fresh, text).with_context(|| format!("cannot write {}", fresh.display()))?;
    std::fs::rename(&fresh, path)
        .with_context(|| format!("cannot rename {} to {}", fresh.display(), path.display()))?;
    Ok(true)
}

fn install(places: &Places, folder: &Path) -> anyhow::Result<String> {
    let requested = std::env::var_os(DAEMON_ENV).filter(|v| !v.is_empty());
    let daemon = daemon_binary(requested.as_deref().map(Path::new))
        .context("cannot find filectxd, the daemon the service runs")?;
    if let Some(why) = passing(&daemon, places) {
        bail!("{}", escape_text(&refusal(&daemon, &why)));
    }
    let user_path = std::env::var("PATH").unwrap_or_default();
    let path = daemon_path(&user_path, npm_global_bin().as_deref(), places);
    let service = service_unit(&daemon, &path)?;
    std::fs::create_dir_all(folder).with_context(|| format!("cannot create {}", folder.display()))?;
    let socket_changed = put(&folder.join(SOCKET_NAME), &socket_unit())?;
    let service_changed = put(&folder.join(SERVICE_NAME), &service)?;
    let mut out = String::new();
    let shown = escape_text(&folder.display().to_string()).into_owned();
    if socket_changed || service_changed {
        let _ = writeln!(out, "Wrote {SOCKET_NAME} and {SERVICE_NAME} in {shown}.");
    } else {
        let _ = writeln!(out, "{SOCKET_NAME} and {SERVICE_NAME} in {shown} are already as they should be.");
    }
    let _ = writeln!(out, "filectxd: {}", escape_text(&daemon.display().to_string()));
    let _ = writeln!(out, "Its PATH: {}", escape_text(&path));
    // Asked before systemd takes the socket: a daemon `filectx` started holds its lock.
    let running = daemon_answers() && unit_state("is-active", SERVICE_NAME) != "active";
    systemctl(&["daemon-reload"])?;
    systemctl(&["enable", "--now", SOCKET_NAME])?;
    let _ = writeln!(
        out,
        "Enabled and started {SOCKET_NAME}: systemd starts filectxd on the first connection to \
         $XDG_RUNTIME_DIR/filectx.sock, and it exits after 10 idle minutes."
    );
    if running {
        let _ = writeln!(
            out,
            "A filectxd that systemd did not start (filectx starts one when none answers) serves \
             $XDG_RUNTIME_DIR/filectx.sock and holds its lock, so the service cannot start until it is \
             gone: stop it (`filectx status` shows its pid), then: systemctl --user restart {SOCKET_NAME}"
        );
    } else if service_changed && unit_state("is-active", SERVICE_NAME) == "active" {
        let _ = writeln!(
            out,
            "A filectxd of the previous unit is still running; it goes on until it exits, or: \
             systemctl --user restart {SERVICE_NAME}"
        );
    }
    out.push_str(&linger_advice());
    Ok(out)
}

fn uninstall(folder: &Path) -> anyhow::Result<String> {
    let units = [folder.join(SOCKET_NAME), folder.join(SERVICE_NAME)];
    if units.iter().all(|unit| !unit.exists()) {
        return Ok(format!(
            "No filectx units in {}: nothing to uninstall.\n",
            escape_text(&folder.display().to_string())
        ));
    }
    let mut out = String::new();
    // Stopped before their files go, so systemd still knows what it stops. Without a reachable
    // systemd the files go all the same: it finds them gone when it next loads its units.
    let stopped = systemctl(&["disable", "--now", SOCKET_NAME, SERVICE_NAME]);
    for unit in &units {
        match std::fs::remove_file(unit) {
            Ok(()) => {
                let _ = writeln!(out, "Removed {}", escape_text(&unit.display().to_string()));
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).with_context(|| format!("cannot remove {}", unit.display())),
        }
    }
    match stopped.and_then(|_| systemctl(&["daemon-reload"])) {
        Ok(_) => out.push_str(
            "Stopped and disabled filectxd.socket and filectxd.service; `filectx` starts a daemon itself \
             again when none answers.\n",
        ),
        Err(error) => {
            let _ = writeln!(
                out,
                "{error:#}: the units are removed; systemd forgets them when it next loads its units."
            );
        }
    }
    Ok(out)
}

/// The ExecStart binary of an installed service unit.
fn installed_daemon(unit: &str) -> Option<String> {
    let command = unit.lines().find_map(|line| line.strip_prefix("ExecStart="))?;
    let word = match command.strip_prefix('"') {
        Some(rest) => {
            let mut word = String::new();
            let mut chars = rest.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => word.extend(chars.next()),
                    c => word.push(c),
                }
            }
            word
        }
        None => command.split(' ').next().unwrap_or_default().to_owned(),
    };
    Some(word.replace("%%", "%").replace("$$", "$"))
}

fn status(folder: &Path) -> anyhow::Result<String> {
    let mut out = String::new();
    let service = std::fs::read_to_string(folder.join(SERVICE_NAME)).ok();
    let shown = escape_text(&folder.display().to_string()).into_owned();
    match &service {
        None => {
            let _ = writeln!(
                out,
                "Not installed: no {SERVICE_NAME} in {shown} (filectx service install writes it)."
            );
        }
        Some(unit) => {
            let by = if unit.starts_with(WRITTEN_BY) {
                "written by filectx service install"
            } else {
                "written by hand"
            };
            let _ = writeln!(out, "Units: {SOCKET_NAME} and {SERVICE_NAME} in {shown} ({by})");
            if let Some(daemon) = installed_daemon(unit) {
                let missing =
                    if Path::new(&daemon).is_file() { "" } else { " (missing: install filectx again)" };
                let _ = writeln!(out, "filectxd: {}{missing}", escape_text(&daemon));
            }
        }
    }
    for (query, unit) in
        [("is-enabled", SOCKET_NAME), ("is-active", SOCKET_NAME), ("is-active", SERVICE_NAME)]
    {
        let _ = writeln!(out, "{unit} {}: {}", query.trim_start_matches("is-"), unit_state(query, unit));
    }
    if service.is_some() {
        out.push_str(&linger_advice());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(root: &Path) -> Places {
        Places {
            home: Some(root.join("home")),
            config_home: Some(root.join("home/.config")),
            uv_caches: vec![root.join("home/.cache/uv")],
            npm_caches: vec![root.join("home/.npm")],
            caches: vec![root.join("home/.cache")],
            temps: vec![root.join("tmp")],
        }
    }

    #[test]
    fn places_that_will_not_last_are_told_apart() {
        let root = Path::new("/r");
        let places = places(root);
        let npx = "/r/home/.npm/_npx/1a2b/node_modules/@filectx/cli-linux-x64/bin/filectxd";
        assert_eq!(passing(Path::new(npx), &places), Some(Passing::Npx(PathBuf::from("/r/home/.npm/_npx"))));
        // A custom npm cache is still npx's by its `_npx` folder.
        let other = Path::new("/srv/cache/_npx/9f/node_modules/.bin/filectxd");
        assert_eq!(passing(other, &places), Some(Passing::Npx(PathBuf::from("/srv/cache/_npx"))));
        let uv = Path::new("/r/home/.cache/uv/archive-v0/abc/bin/filectxd");
        assert_eq!(passing(uv, &places), Some(Passing::Uv(PathBuf::from("/r/home/.cache/uv"))));
        let cache = Path::new("/r/home/.cache/pip/x/filectxd");
        assert_eq!(passing(cache, &places), Some(Passing::Cache(PathBuf::from("/r/home/.cache"))));
        assert_eq!(
            passing(Path::new("/r/tmp/build/filectxd"), &places),
            Some(Passing::Temp(PathBuf::from("/r/tmp")))
        );
        for lasting in [
            "/r/home/.local/bin/filectxd",
            "/r/home/.local/share/uv/tools/filectx/bin/filectxd",
            "/usr/local/bin/filectxd",
        ] {
            assert_eq!(passing(Path::new(lasting), &places), None, "{lasting}");
        }
    }

    #[test]
    fn the_refusal_names_the_place_and_the_way_out() {
        let refused =
            refusal(Path::new("/h/.npm/_npx/1/filectxd"), &Passing::Npx(PathBuf::from("/h/.npm/_npx")));
        assert_eq!(
            refused,
            "/h/.npm/_npx/1/filectxd is in npx's cache (/h/.npm/_npx), which npm clears and replaces: a service \
             started from there would stop working when it goes. Install filectx to stay (npm install -g \
             @filectx/cli), then run `filectx service install` from that installation."
        );
        let refused =
            refusal(Path::new("/h/.cache/uv/a/filectxd"), &Passing::Uv(PathBuf::from("/h/.cache/uv")));
        assert!(
            refused.contains("uv's cache (/h/.cache/uv)") && refused.contains("uv tool install filectx"),
            "{refused}"
        );
    }

    #[test]
    fn the_service_unit_runs_this_daemon_with_this_path() -> anyhow::Result<()> {
        let unit = service_unit(Path::new("/opt/filectx/bin/filectxd"), "/usr/bin:/bin")?;
        assert!(unit.starts_with(WRITTEN_BY), "{unit}");
        assert!(unit.contains("\nExecStart=/opt/filectx/bin/filectxd --idle-exit 600\n"), "{unit}");
        assert!(unit.contains("\nEnvironment=\"PATH=/usr/bin:/bin\"\n"), "{unit}");
        assert_eq!(unit.matches("ExecStart=").count(), 1);
        assert_eq!(unit.matches("Environment=\"PATH=").count(), 1);
        // Everything else as shipped.
        assert!(unit.contains("\nType=notify\n") && unit.contains("\nWantedBy=default.target\n"));
        Ok(())
    }

    #[test]
    fn odd_paths_are_escaped_for_systemd_or_refused() -> anyhow::Result<()> {
        assert_eq!(unit_word(Path::new("/a b/100%/$x/filectxd"))?, "\"/a b/100%%/$$x/filectxd\"");
        assert_eq!(unit_word(Path::new("/opt/50%/filectxd"))?, "/opt/50%%/filectxd");
        assert!(unit_word(Path::new("/a\nb/filectxd")).is_err());
        let unit = service_unit(Path::new("/a b/filectxd"), "/x y:/100%")?;
        assert!(unit.contains("\nExecStart=\"/a b/filectxd\" --idle-exit 600\n"), "{unit}");
        assert!(unit.contains("\nEnvironment=\"PATH=/x y:/100%%\"\n"), "{unit}");
        assert_eq!(installed_daemon(&unit).as_deref(), Some("/a b/filectxd"));
        Ok(())
    }

    #[test]
    fn the_daemon_path_keeps_the_users_lasting_folders_and_adds_where_tools_go() {
        let places = places(Path::new("/r"));
        let user = "/r/home/.npm/_npx/1/node_modules/.bin:/usr/bin:/r/tmp/x/bin:/proj/node_modules/.bin:relative:/bin:/usr/bin:/r/home/.cargo/bin";
        let path = daemon_path(user, Some(Path::new("/opt/npm-global/bin")), &places);
        assert_eq!(path, "/usr/bin:/bin:/r/home/.cargo/bin:/r/home/.local/bin:/opt/npm-global/bin");
        assert_eq!(daemon_path("", None, &places), "/r/home/.local/bin:/r/home/.cargo/bin");
    }
}

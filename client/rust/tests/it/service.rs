//! `filectx service install | uninstall | status`, run as a user would: the binaries in a home's
//! `~/.local/bin` (hard links of the built ones, in a folder under cargo's target, or under
//! `~/.local/share` when the checkout is in a temp folder), `systemctl`, `loginctl` and `npm` as stand-ins on PATH that record their calls
//! (CI runs no user systemd), and the written units checked with `systemd-analyze verify`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::skip::skip;
use crate::support::{TestResult, daemon_bin, text, write_script};

const BIN: &str = env!("CARGO_BIN_EXE_filectx");

/// A home folder with the binaries installed in `bin` and the stand-ins on PATH.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    /// Where `filectx` and `filectxd` are.
    bin: PathBuf,
    stand_ins: PathBuf,
    calls: PathBuf,
}

/// A folder `filectx service` takes for a lasting installation: cargo's target folder, unless
/// the checkout is in a temp folder (a clone in `mktemp -d`), where the command would rightly
/// refuse it; then `~/.local/share` (each test's folder in it is removed when it ends).
fn lasting_folder() -> TestResult<PathBuf> {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let real = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let mut temps: Vec<PathBuf> = ["/tmp", "/var/tmp", "/dev/shm"].map(PathBuf::from).into();
    temps.extend(std::env::var_os("TMPDIR").map(PathBuf::from));
    let in_temp = |path: &Path| temps.iter().any(|temp| real(path).starts_with(real(temp)));
    if !in_temp(&target) {
        return Ok(target);
    }
    match std::env::home_dir().map(|home| home.join(".local/share")) {
        Some(share) if !in_temp(&share) => {
            std::fs::create_dir_all(&share)?;
            Ok(share)
        }
        _ => Ok(target),
    }
}

impl Home {
    /// The binaries go in `~/<bin>`; `systemctl` answers as [`SYSTEMCTL`] does.
    fn new(bin: &str) -> TestResult<Self> {
        Self::with_systemctl(bin, SYSTEMCTL)
    }

    /// [`Home::new`] with `systemctl` answering as the shell script `systemctl` says.
    fn with_systemctl(bin: &str, systemctl: &str) -> TestResult<Self> {
        let dir = tempfile::Builder::new().prefix("filectx-service-").tempdir_in(lasting_folder()?)?;
        let home = dir.path().join("home");
        let stand_ins = dir.path().join("stand-ins");
        std::fs::create_dir_all(&stand_ins)?;
        let calls = dir.path().join("calls.log");
        let record = format!("echo \"$(basename \"$0\") $*\" >> '{}'", calls.display());
        write_script(&stand_ins.join("systemctl"), &format!("{record}\n{systemctl}"))?;
        write_script(&stand_ins.join("loginctl"), &format!("{record}\necho no"))?;
        write_script(&stand_ins.join("npm"), &format!("{record}\necho /opt/npm-global"))?;
        let this = Home { home: home.clone(), bin: home.join(bin), stand_ins, calls, _dir: dir };
        this.install_binaries(&this.bin)?;
        Ok(this)
    }

    /// Hard links of the built binaries in `folder` (no descriptor of them is opened here), or
    /// copies when `folder` is on another filesystem.
    fn install_binaries(&self, folder: &Path) -> TestResult {
        std::fs::create_dir_all(folder)?;
        for (from, name) in [(PathBuf::from(BIN), "filectx"), (daemon_bin()?, "filectxd")] {
            match std::fs::hard_link(&from, folder.join(name)) {
                Err(error) if error.kind() == std::io::ErrorKind::CrossesDevices => {
                    std::fs::copy(&from, folder.join(name))?;
                }
                linked => linked?,
            }
        }
        Ok(())
    }

    fn units(&self) -> PathBuf {
        self.home.join(".config/systemd/user")
    }

    /// `BIN/filectx service ACTION` with this home, the stand-ins first on PATH.
    fn service(&self, bin: &Path, action: &str, env: &[(&str, &Path)]) -> TestResult<Output> {
        let path = format!(
            "{}:{}:/usr/bin:/bin",
            self.stand_ins.display(),
            self.home.join("node_modules/.bin").display()
        );
        let mut command = Command::new(bin.join("filectx"));
        command
            .args(["service", action])
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", path)
            .env("USER", "tester");
        for (key, value) in env {
            command.env(key, value);
        }
        Ok(command.stdin(Stdio::null()).output()?)
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.calls).unwrap_or_default().lines().map(str::to_owned).collect()
    }
}

/// `systemctl` that succeeds, answering queries as systemd does for a unit that is not running.
const SYSTEMCTL: &str = r#"case "$2" in
  is-enabled) echo enabled ;;
  is-active) echo inactive; exit 3 ;;
esac
exit 0"#;

#[test]
fn install_writes_the_units_with_this_daemon_and_path_then_enables_the_socket() -> TestResult {
    let home = Home::new(".local/bin")?;
    let out = home.service(&home.bin, "install", &[])?;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let service = std::fs::read_to_string(home.units().join("filectxd.service"))?;
    let socket = std::fs::read_to_string(home.units().join("filectxd.socket"))?;
    let daemon = home.bin.join("filectxd");
    assert!(service.contains(&format!("\nExecStart={} --idle-exit 600\n", daemon.display())), "{service}");
    // The user's PATH (its lasting folders), then where pip, npm and cargo put tools.
    let path = format!(
        "{}:/usr/bin:/bin:{}:/opt/npm-global/bin:{}",
        home.stand_ins.display(),
        home.home.join(".local/bin").display(),
        home.home.join(".cargo/bin").display()
    );
    assert!(service.contains(&format!("\nEnvironment=\"PATH={path}\"\n")), "{service}");
    assert!(socket.contains("\nListenStream=%t/filectx.sock\n"), "{socket}");
    assert_eq!(
        home.calls(),
        [
            "npm prefix -g",
            "systemctl --user daemon-reload",
            "systemctl --user enable --now filectxd.socket",
            "systemctl --user is-active filectxd.service",
            "loginctl show-user tester --property=Linger --value",
        ]
    );
    assert!(stdout.contains(&format!("filectxd: {}", daemon.display())), "{stdout}");
    assert!(stdout.contains("loginctl enable-linger tester"), "{stdout}");

    // Twice: the same files, said so, and systemd told again (no running daemon to ask about).
    let again = home.service(&home.bin, "install", &[])?;
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("already as they should be"), "{}", text(&again.stdout));
    assert_eq!(std::fs::read_to_string(home.units().join("filectxd.service"))?, service);
    assert_eq!(home.calls().len(), 9);
    Ok(())
}

#[test]
fn the_written_units_pass_systemd_analyze_verify() -> TestResult {
    let home = Home::new(".local/bin")?;
    let out = home.service(&home.bin, "install", &[])?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let units = home.units();
    let verify = match Command::new("systemd-analyze")
        .arg("verify")
        .arg(units.join("filectxd.socket"))
        .arg(units.join("filectxd.service"))
        .current_dir(&units)
        .stdin(Stdio::null())
        .output()
    {
        Ok(verify) => verify,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            skip("systemd-analyze is not installed (apt-get install systemd)");
            return Ok(());
        }
        Err(error) => return Err(error.into()),
    };
    // It exits 0 on unknown keys and the like: any word at all is a failure.
    assert!(
        verify.status.success() && verify.stdout.is_empty() && verify.stderr.is_empty(),
        "{:?}\n{}{}",
        verify.status,
        text(&verify.stdout),
        text(&verify.stderr)
    );
    Ok(())
}

#[test]
fn a_daemon_in_npx_or_uv_cache_or_a_temp_folder_is_refused_and_nothing_is_written() -> TestResult {
    let home = Home::new(".local/bin")?;
    let npx = home.home.join(".npm/_npx/5f3a/node_modules/@filectx/cli-linux-x64/bin");
    let uv = home.home.join(".cache/uv/archive-v0/Xy12/bin");
    let temp = home.home.join("scratch/tmp");
    for (folder, said) in
        [(&npx, "is in npx's cache"), (&uv, "is in uv's cache"), (&temp, "is in a temp folder")]
    {
        home.install_binaries(folder)?;
        let out = home.service(folder, "install", &[("TMPDIR", &temp)])?;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&format!("{} {said}", folder.join("filectxd").display())), "{stderr}");
        assert!(stderr.contains("then run `filectx service install` from that installation"), "{stderr}");
    }
    assert!(!home.units().exists());
    assert_eq!(home.calls(), Vec::<String>::new());
    Ok(())
}

#[test]
fn a_systemd_that_cannot_be_reached_fails_the_install_with_its_words() -> TestResult {
    let home =
        Home::with_systemctl(".local/bin", "echo 'Failed to connect to bus: No medium found' >&2; exit 1")?;
    let out = home.service(&home.bin, "install", &[])?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("systemctl --user daemon-reload failed: Failed to connect to bus: No medium found"),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn uninstall_removes_the_units_even_when_systemd_cannot_be_reached() -> TestResult {
    let home =
        Home::with_systemctl(".local/bin", "echo 'Failed to connect to bus: No medium found' >&2; exit 1")?;
    std::fs::create_dir_all(home.units())?;
    std::fs::write(home.units().join("filectxd.socket"), "[Socket]\n")?;
    std::fs::write(home.units().join("filectxd.service"), "[Service]\n")?;
    let out = home.service(&home.bin, "uninstall", &[])?;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        !home.units().join("filectxd.service").exists() && !home.units().join("filectxd.socket").exists()
    );
    assert!(stdout.contains("Failed to connect to bus: No medium found: the units are removed"), "{stdout}");
    Ok(())
}

#[test]
fn install_says_when_a_daemon_filectx_started_holds_the_socket() -> TestResult {
    let home = Home::new(".local/bin")?;
    let runtime = home.home.join("run");
    std::fs::create_dir_all(&runtime)?;
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    let socket = runtime.join("filectx.sock");
    let mut daemon = Command::new(daemon_bin()?)
        .arg("--socket")
        .arg(&socket)
        .arg("--no-fsync")
        .env("XDG_STATE_HOME", home.home.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let started = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        if started.elapsed() > std::time::Duration::from_secs(10) {
            let _ = daemon.kill();
            return Err("the daemon did not listen within 10 s".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = home.service(&home.bin, "install", &[("XDG_RUNTIME_DIR", &runtime)]);
    let _ = daemon.kill();
    let _ = daemon.wait();
    let out = out?;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("A filectxd that systemd did not start"), "{stdout}");
    assert!(stdout.contains("systemctl --user restart filectxd.socket"), "{stdout}");
    // Without one there, install says nothing of it.
    let quiet = home.service(&home.bin, "install", &[("XDG_RUNTIME_DIR", &runtime)])?;
    assert!(!text(&quiet.stdout).contains("systemd did not start"), "{}", text(&quiet.stdout));
    Ok(())
}

#[test]
fn status_shows_the_units_and_uninstall_removes_them_once() -> TestResult {
    let home = Home::new(".local/bin")?;
    let before = home.service(&home.bin, "status", &[])?;
    assert!(before.status.success());
    assert!(
        text(&before.stdout).starts_with("Not installed: no filectxd.service in "),
        "{}",
        text(&before.stdout)
    );
    assert!(home.service(&home.bin, "install", &[])?.status.success());

    let status = home.service(&home.bin, "status", &[])?;
    let shown = text(&status.stdout);
    assert!(status.status.success(), "{}", text(&status.stderr));
    assert!(shown.contains("(written by filectx service install)"), "{shown}");
    assert!(shown.contains(&format!("filectxd: {}\n", home.bin.join("filectxd").display())), "{shown}");
    assert!(shown.contains("filectxd.socket enabled: enabled\n"), "{shown}");
    assert!(shown.contains("filectxd.service active: inactive\n"), "{shown}");

    let calls = home.calls().len();
    let out = home.service(&home.bin, "uninstall", &[])?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !home.units().join("filectxd.service").exists() && !home.units().join("filectxd.socket").exists()
    );
    assert_eq!(
        home.calls()[calls..],
        ["systemctl --user disable --now filectxd.socket filectxd.service", "systemctl --user daemon-reload"]
    );
    let again = home.service(&home.bin, "uninstall", &[])?;
    assert!(again.status.success());
    assert!(text(&again.stdout).contains("nothing to uninstall"), "{}", text(&again.stdout));
    Ok(())
}

//! The daemon's own files out of every session's reach, whatever its roots: sessions rooted at
//! the journal's folder, at the state folder holding it, or above a custom journal folder; a
//! hard link to the gate token made inside a root; grep, glob, read, write and stat of each.

use std::path::{Path, PathBuf};

use filectx_tests::{Daemon, Raw, fs_error, gate_token_file, ok, root_of, rpc, tool_err, tool_ok};
use serde_json::{Value, json};

/// A session rooted at `root`, or the daemon's refusal of it.
fn open(daemon: &Daemon, root: &Path) -> Result<Raw, Value> {
    let mut raw = Raw::connect(&daemon.socket);
    let params = json!({
        "roots": [root],
        "clientInfo": {"name": "private"},
        "tools": ["read", "write", "edit", "glob", "grep"],
    });
    let answer = rpc(&mut raw, "initialize", params);
    match answer.get("error") {
        Some(_) => Err(answer),
        None => Ok(raw),
    }
}

/// A daemon whose journal is the folder `journal`, holding `TOPSECRET` from a session's write.
fn with_secret_journal(journal: &Path) -> (Daemon, PathBuf) {
    let daemon = Daemon::start(&["--no-fsync", "--journal-dir", &journal.display().to_string()]);
    let project = root_of(&daemon).join("project");
    std::fs::create_dir_all(&project).unwrap();
    let mut writer = open(&daemon, &project).unwrap();
    let secret = project.join("secret.txt");
    tool_ok(&mut writer, "write", json!({"file_path": secret, "content": "TOPSECRET one\n"}));
    tool_ok(&mut writer, "write", json!({"file_path": secret, "content": "TOPSECRET two\n"}));
    (daemon, project)
}

/// Every way a session could reach the daemon's files under `root` finds nothing, and every
/// named private path is refused.
fn nothing_reachable(raw: &mut Raw, root: &Path, named: &[PathBuf]) {
    for mode in ["files_with_matches", "content", "count"] {
        let text = tool_ok(raw, "grep", json!({"pattern": "TOPSECRET", "path": root, "output_mode": mode}));
        assert!(
            !text.contains("objects") && !text.contains("log-"),
            "grep {mode} found the journal:\n{text}"
        );
    }
    let text = tool_ok(raw, "glob", json!({"pattern": "**/*", "path": root}));
    for private in ["objects/", "log-0", "/lock", "/ids", "gate-token", "staging-token"] {
        assert!(!text.contains(private), "glob listed {private}:\n{text}");
    }
    for path in named {
        let (code, text) = tool_err(raw, "read", json!({"file_path": path}));
        assert_eq!(code, "FS_PERMISSION_DENIED", "read {}: {text}", path.display());
        assert!(text.contains("filectxd's own"), "{text}");
        let refused = rpc(raw, "file/stat", json!({"path": path}));
        assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "stat {}: {refused}", path.display());
        let refused = rpc(raw, "fs/readText", json!({"path": path}));
        assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "fs/readText {}: {refused}", path.display());
    }
}

/// The journal's own folder as a root is refused at `initialize`; so is any folder inside it.
#[test]
fn a_root_at_or_inside_the_journal_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let journal = base.path().canonicalize().unwrap().join("j");
    let (daemon, _) = with_secret_journal(&journal);
    for root in [journal.clone(), journal.join("objects")] {
        let Err(refused) = open(&daemon, &root) else { panic!("{root:?} was accepted as a root") };
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("filectxd's own private folders"), "{root:?}: {refused}");
    }
}

/// A root above a custom journal folder (its parent, so no rule made of the folder's last two
/// names matches anything under the root): the journal is neither searched, read nor written.
#[test]
fn a_root_above_a_custom_journal_folder_reaches_nothing_of_it() {
    let base = tempfile::tempdir().unwrap();
    let parent = base.path().canonicalize().unwrap();
    let journal = parent.join("jdir");
    let (daemon, _) = with_secret_journal(&journal);
    let mut raw = open(&daemon, &parent).unwrap();
    let lock = journal.join("lock");
    let log = std::fs::read_dir(&journal)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("log-"))
        .unwrap()
        .path();
    nothing_reachable(&mut raw, &parent, &[lock, log, journal.join("objects")]);
    // A new file in it is refused, and so is a folder made through it.
    for path in [journal.join("log-99999999999999999999"), journal.join("objects/zz/new")] {
        let (code, text) = tool_err(&mut raw, "write", json!({"file_path": path, "content": "{}\n"}));
        assert_eq!(code, "FS_PERMISSION_DENIED", "{}: {text}", path.display());
        assert!(!path.exists());
    }
    // Through a symlink inside the root that points into it.
    std::os::unix::fs::symlink(&journal, parent.join("alias")).unwrap();
    let (code, _) = tool_err(&mut raw, "read", json!({"file_path": parent.join("alias/lock")}));
    assert_eq!(code, "FS_PERMISSION_DENIED");
    // The journal still works.
    let status = daemon.status();
    assert!(status["journalEntries"].as_u64().unwrap() >= 2, "{status}");
}

/// A root at the state folder (`$XDG_STATE_HOME/filectx`, which holds the default journal):
/// refused as a root, since it is one of the daemon's own folders; a root above it reaches
/// nothing of it.
#[test]
fn the_state_folder_and_what_is_in_it_are_out_of_reach() {
    let daemon = Daemon::start_configured(&["--no-fsync"], |dir, mut command| {
        // The default journal, in the state folder.
        let args: Vec<_> = command.get_args().map(std::ffi::OsStr::to_owned).collect();
        let mut fresh = std::process::Command::new(command.get_program());
        let mut skip = false;
        for arg in args {
            if skip {
                skip = false;
                continue;
            }
            if arg == "--journal-dir" {
                skip = true;
                continue;
            }
            fresh.arg(arg);
        }
        command = fresh;
        command.env("XDG_STATE_HOME", dir.join("state")).env_remove("HOME");
        command
    });
    let state = root_of(&daemon).join("state/filectx");
    let mut writer = daemon.session();
    let project = root_of(&daemon).join("project");
    std::fs::create_dir_all(&project).unwrap();
    tool_ok(&mut writer, "write", json!({"file_path": project.join("s.txt"), "content": "TOPSECRET\n"}));
    assert!(state.join("journal").is_dir(), "the default journal is in the state folder");
    assert!(open(&daemon, &state).is_err(), "a root at the state folder");
    let above = root_of(&daemon).join("state");
    let mut raw = open(&daemon, &above).unwrap();
    nothing_reachable(
        &mut raw,
        &above,
        &[state.join("staging-token"), state.join("journal/lock"), state.join("journal")],
    );
}

/// A hard link to the gate token made inside a root (a process there can) is the token by
/// identity: never read, stat'd, searched or written through, whatever its name.
#[test]
fn a_hard_link_to_the_gate_token_is_refused_by_identity() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = root_of(&daemon);
    let token = gate_token_file(&daemon.socket);
    assert!(token.exists());
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let link = project.join("innocent.txt");
    std::fs::hard_link(&token, &link).unwrap();
    let secret = std::fs::read_to_string(&token).unwrap();
    let mut raw = open(&daemon, &project).unwrap();
    let (code, text) = tool_err(&mut raw, "read", json!({"file_path": link}));
    assert_eq!(code, "FS_PERMISSION_DENIED", "{text}");
    assert!(!text.contains(&secret));
    let refused = rpc(&mut raw, "file/stat", json!({"path": link}));
    assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "{refused}");
    let grep = tool_ok(&mut raw, "grep", json!({"pattern": &secret[..16], "output_mode": "content"}));
    assert!(!grep.contains(&secret[..16]) && !grep.contains("could not be read"), "{grep}");
    let edit = rpc(
        &mut raw,
        "fs/editText",
        json!({"path": link, "oldString": &secret[..8], "newString": "x", "expectedVersion": "0"}),
    );
    assert_eq!(fs_error(&edit), "FS_PERMISSION_DENIED", "{edit}");
    let write =
        rpc(&mut raw, "fs/writeText", json!({"path": link, "content": "x", "expect": {"kind": "any"}}));
    assert_eq!(fs_error(&write), "FS_PERMISSION_DENIED", "{write}");
    assert_eq!(std::fs::read_to_string(&token).unwrap(), secret, "the token was written through a link");
    // A file that only shares the token's name elsewhere is an ordinary file.
    std::fs::write(project.join("filectx.sock.gate-token"), "mine\n").unwrap();
    let text = tool_ok(&mut raw, "read", json!({"file_path": project.join("filectx.sock.gate-token")}));
    assert!(text.contains("mine"), "{text}");
    let _ = ok(&mut raw, "daemon/status", json!({}));
}

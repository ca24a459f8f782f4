//! Crash safety: the daemon is killed with SIGKILL at points inside writes and edits (fail
//! points compiled into test builds only). After every kill the file holds exactly the old or
//! exactly the new content, a restarted daemon serves, and its first write in the folder
//! removes the temporary file the dead daemon left.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use filectx_tests::{Daemon, ok};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    /// `file/edit` of a marker in an existing file.
    Edit,
    /// `file/write` over an existing file.
    Overwrite,
    /// `file/write` of a new file.
    Create,
}

/// Where each operation is killed, and whether the new content is in place by then.
const KILLS: &[(Op, &str, bool)] = &[
    (Op::Edit, "provider::edit::matched", false),
    (Op::Edit, "provider::stage::created", false),
    (Op::Edit, "provider::stage::half_written", false),
    (Op::Edit, "provider::stage::written", false),
    (Op::Edit, "provider::replace::renamed", true),
    (Op::Overwrite, "provider::stage::created", false),
    (Op::Overwrite, "provider::stage::half_written", false),
    (Op::Overwrite, "provider::stage::written", false),
    (Op::Overwrite, "provider::replace::renamed", true),
    (Op::Create, "provider::stage::created", false),
    (Op::Create, "provider::stage::half_written", false),
    (Op::Create, "provider::stage::written", false),
    (Op::Create, "provider::create::renamed", true),
];

/// 64 KiB of old content with one marker in the middle.
fn old_content() -> String {
    let line = "the old content of this file, line after line, all the same\n";
    let half = line.repeat(64 * 1024 / line.len() / 2);
    format!("{half}MARKER-OLD\n{half}")
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("list the folder")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".filectx-") && name.ends_with(".tmp"))
        .collect()
}

#[test]
fn a_daemon_killed_inside_a_write_leaves_old_or_new_content_and_a_restart_cleans_up() {
    let project = tempfile::tempdir().unwrap();
    let root = project.path().canonicalize().unwrap();
    let old = old_content();
    let new_edit = old.replace("MARKER-OLD", "MARKER-NEW");
    let new_write = "entirely new content\n".repeat(3000);
    let mut survived = 0;
    for (n, &(op, point, lands)) in KILLS.iter().enumerate() {
        let folder = root.join(format!("kill-{n}"));
        std::fs::create_dir(&folder).unwrap();
        let file = folder.join("target.txt");
        if op != Op::Create {
            std::fs::write(&file, &old).unwrap();
        }

        let mut daemon = Daemon::start_failing(&format!("{point}=return"));
        let mut raw = daemon.session_with(json!({"roots": [root]}));
        if op != Op::Create {
            ok(&mut raw, "file/read", json!({"path": file, "limit": 1}));
        }
        let (method, params, new) = match op {
            Op::Edit => (
                "file/edit",
                json!({"path": file, "oldString": "MARKER-OLD", "newString": "MARKER-NEW"}),
                new_edit.as_str(),
            ),
            Op::Overwrite | Op::Create => {
                ("file/write", json!({"path": file, "content": new_write}), new_write.as_str())
            }
        };
        raw.send_request(method, Some(params));
        let answer = raw.recv_within(Duration::from_secs(20));
        assert!(answer.is_none(), "{point}: the request was answered: {answer:?}\n{}", daemon.log_text());
        let status = daemon.wait_exit();
        assert_eq!(status.signal(), Some(9), "{point}: the daemon did not die by SIGKILL: {status:?}");
        let log = daemon.log_text();
        assert!(
            log.contains(&format!("crash point {point}")),
            "{point}: the crash point was not reached:\n{log}"
        );

        // Entirely the old content (or still no file), or entirely the new.
        let content = std::fs::read_to_string(&file).ok();
        let expected = if lands {
            Some(new)
        } else if op == Op::Create {
            None
        } else {
            Some(old.as_str())
        };
        assert!(
            content.as_deref() == expected,
            "{op:?} killed at {point}: the file holds neither the old nor the new content"
        );
        let left = leftovers(&folder);
        assert!(left.len() <= 1, "{point}: {left:?}");
        if point.starts_with("provider::stage::") {
            assert_eq!(left.len(), 1, "{point}: the kill should have left its temporary file");
        }

        // A restarted daemon serves, and its first write in the folder removes the leftover.
        let restarted = Daemon::start(&[]);
        let mut raw = restarted.session_with(json!({"roots": [root]}));
        let after = if let Some(content) = &content {
            ok(&mut raw, "file/read", json!({"path": file}));
            format!("{content}after the crash\n")
        } else {
            "created after the crash\n".to_owned()
        };
        ok(&mut raw, "file/write", json!({"path": file, "content": after}));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), after);
        assert!(leftovers(&folder).is_empty(), "{point}: left behind: {:?}", leftovers(&folder));
        survived += 1;
    }
    eprintln!("crash safety: {survived} kills survived, each file old or new, every leftover removed");
    assert_eq!(survived, KILLS.len());
}

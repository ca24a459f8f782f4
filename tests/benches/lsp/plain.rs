//! The language-server bench's side without the daemon: one server driven by a plain LSP
//! client (`filectx_tests::lsp::LspClient`), as an agent's own client (OpenCode) runs it, taking
//! diagnostics by the rule the daemon takes them by; and the memory of a process tree.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use filectx_daemon::lsp::tree;
use filectx_tests::lsp::{LspClient, uri};
use serde_json::{Value, json};

use super::project::Lang;

/// The daemon's default `diagnostics_settle`.
const SETTLE: Duration = Duration::from_millis(100);

/// One server of one agent, driven by a plain LSP client.
pub struct Plain {
    lang: Lang,
    client: LspClient,
    /// Open documents: version and text.
    docs: HashMap<PathBuf, (i64, String)>,
}

impl Plain {
    /// Starts `program --stdio` in `project` and initializes it there with `options`, as the
    /// daemon initializes its servers.
    pub fn start(lang: Lang, program: &Path, options: &Value, project: &Path) -> Plain {
        let mut command = Command::new(program);
        command.arg("--stdio").current_dir(project).stderr(Stdio::null());
        let mut client = LspClient::spawn(command);
        client.answer_requests = true;
        client.initialize(project, options.clone());
        Plain { lang, client, docs: HashMap::new() }
    }

    /// Opens `path` (its text from disk) and waits for its first diagnostics: their errors.
    pub fn open(&mut self, path: &Path, patience: Duration) -> Option<usize> {
        let text = std::fs::read_to_string(path).unwrap();
        self.client.open(&uri(path), self.lang.language_id(), 1, &text);
        self.docs.insert(path.to_path_buf(), (1, text));
        self.errors(path, 1, patience)
    }

    /// Sends `path`'s new `text` and waits for its diagnostics: when it was sent, how long it
    /// took, and their errors (`None`: none came within `patience`).
    pub fn change(
        &mut self,
        path: &Path,
        text: &str,
        patience: Duration,
    ) -> (Instant, Duration, Option<usize>) {
        let doc = self.docs.get_mut(path).expect("an open document");
        doc.0 += 1;
        doc.1 = text.to_owned();
        let version = doc.0;
        let start = Instant::now();
        self.client.change(&uri(path), version, text);
        let errors = self.errors(path, version, patience);
        (start, start.elapsed(), errors)
    }

    /// The errors of `path` at `version`, by the rule the daemon accepts diagnostics by.
    pub fn errors(&mut self, path: &Path, version: i64, patience: Duration) -> Option<usize> {
        let uri = uri(path);
        let deadline = Instant::now() + patience;
        let is_error = |d: &Value| d["severity"] == 1 || d["category"] == "error";
        match self.lang {
            // The publish of that version, then quiet for the settle with no work in progress
            // (what came last is the answer): the daemon's rule for pushes.
            Lang::Python => {
                let mut errors = None;
                let mut progress = std::collections::HashSet::new();
                let mut last = Instant::now();
                loop {
                    let quiet = errors.is_some() && progress.is_empty();
                    let wait = if quiet { SETTLE.saturating_sub(last.elapsed()) } else { Duration::MAX };
                    let left = deadline.checked_duration_since(Instant::now())?.min(wait);
                    let Some(message) = self.client.next_within(left) else {
                        if quiet {
                            return errors;
                        }
                        return None;
                    };
                    let params = &message["params"];
                    match message["method"].as_str() {
                        Some("textDocument/publishDiagnostics") => {
                            last = Instant::now();
                            if params["uri"] == uri
                                && params["version"].as_i64().is_some_and(|v| v >= version)
                            {
                                errors = Some(
                                    params["diagnostics"].as_array()?.iter().filter(|d| is_error(d)).count(),
                                );
                            }
                        }
                        Some("window/workDoneProgress/create") => {
                            last = Instant::now();
                            progress.insert(params["token"].to_string());
                        }
                        Some("$/progress") => {
                            last = Instant::now();
                            if params["value"]["kind"] == "end" {
                                progress.remove(&params["token"].to_string());
                            } else {
                                progress.insert(params["token"].to_string());
                            }
                        }
                        _ => {}
                    }
                }
            }
            // The other open documents asked of tsserver first (at most 16), then this one:
            // the daemon's rule.
            Lang::TypeScript => {
                let ask = |uri: &str, kind: &str| json!({"command": "typescript.tsserverRequest", "arguments": [kind, {"file": uri}]});
                let others: Vec<String> = self
                    .docs
                    .keys()
                    .filter(|p| p.as_path() != path)
                    .take(16)
                    .map(|p| filectx_tests::lsp::uri(p))
                    .collect();
                let mut ids = Vec::new();
                for other in others.iter().chain(std::iter::once(&uri)) {
                    for kind in ["syntacticDiagnosticsSync", "semanticDiagnosticsSync"] {
                        ids.push((
                            other == &uri,
                            self.client.ask("workspace/executeCommand", ask(other, kind)),
                        ));
                    }
                }
                let mut errors = 0;
                let mut answered = 0;
                while answered < ids.len() {
                    let left = deadline.checked_duration_since(Instant::now())?;
                    let message = self.client.next_within(left)?;
                    let Some((mine, _)) = ids.iter().find(|(_, id)| message["id"] == json!(id)) else {
                        continue;
                    };
                    if message.get("method").is_some() {
                        continue;
                    }
                    answered += 1;
                    if *mine {
                        errors +=
                            message["result"]["body"].as_array()?.iter().filter(|d| is_error(d)).count();
                    }
                }
                Some(errors)
            }
        }
    }

    /// Reads what comes for `period` (drops it): the server finishing what a change started.
    /// When the last `publishDiagnostics` among it came.
    pub fn drain(&mut self, period: Duration) -> Option<Instant> {
        let until = Instant::now() + period;
        let mut last = None;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.client.next_within(left) {
                Some(message) if message["method"] == "textDocument/publishDiagnostics" => {
                    last = Some(Instant::now());
                }
                Some(_) => {}
                None => break,
            }
        }
        last
    }

    pub fn pid(&self) -> u32 {
        self.client.pid()
    }
}

/// Resident and proportional bytes of `pid`'s whole process tree.
pub fn tree_memory(pid: u32) -> (u64, u64) {
    let pss: u64 = std::iter::once(pid)
        .chain(tree::descendants(pid))
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")).ok())
        .filter_map(|text| {
            let line = text.lines().find(|l| l.starts_with("Pss:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum();
    (tree::resident_bytes(pid), pss * 1024)
}

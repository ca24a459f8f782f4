//! Readable text for the daemon's answers: `status` and `stat` as aligned `key: value` lines,
//! `tools` with their parameters, `watch` notices, sizes and durations for people, and file
//! content for stdout. Every path, name and id in them is shown escaped
//! (`filectx_client::terminal`): agents choose them.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::IsTerminal as _;

use filectx_client::terminal::{escape_field, escape_text};
use filectx_protocol::{
    DaemonStatus, FileDidChange, FileKind, FileStatResult, GateInfo, GateOnTimeout, SearchIndexInfo,
    ToolsListResult,
};
use serde_json::Value;

/// File content for stdout: escaped on a terminal (a person reads it), as it is otherwise.
pub(crate) fn content(text: &str) -> Cow<'_, str> {
    if std::io::stdout().is_terminal() { escape_text(text) } else { Cow::Borrowed(text) }
}

/// How many characters of a version `watch` shows.
const VERSION_SHOWN: usize = 12;

/// `changed PATH (version 0123456789ab)` or `deleted PATH`, and a newline.
pub(crate) fn render_change(change: &FileDidChange) -> String {
    match &change.version {
        Some(version) => {
            let shown = version
                .char_indices()
                .nth(VERSION_SHOWN)
                .map_or(version.as_str(), |(end, _)| &version[..end]);
            format!("changed {} (version {})\n", escape_field(&change.display_path), escape_field(shown))
        }
        None => format!("deleted {}\n", escape_field(&change.display_path)),
    }
}

/// `file/stat` as aligned `key: value` lines; size and version only when the daemon gave them.
pub(crate) fn render_stat(stat: &FileStatResult) -> String {
    let kind = match stat.kind {
        FileKind::File => "file",
        FileKind::Directory => "directory",
        FileKind::Other => "other",
        FileKind::None => "none",
    };
    let mut rows = vec![
        ("path", escape_field(&stat.display_path).into_owned()),
        ("exists", if stat.exists { "yes" } else { "no" }.to_owned()),
        ("kind", kind.to_owned()),
    ];
    if let Some(size) = stat.size {
        rows.push(("size", human_bytes(size)));
    }
    if let Some(version) = &stat.version {
        rows.push(("version", escape_field(version).into_owned()));
    }
    aligned(&rows)
}

/// Aligned `key: value` lines.
pub(crate) fn render_status(status: &DaemonStatus, socket: &std::path::Path) -> String {
    let rows = [
        ("daemon", format!("filectxd {}", status.version)),
        ("pid", status.pid.to_string()),
        ("socket", escape_field(&socket.display().to_string()).into_owned()),
        ("uptime", human_duration(status.uptime_ms)),
        ("sessions", format!("{} (max {})", status.sessions, status.max_sessions)),
        ("refused connections", status.refused_connections.to_string()),
        ("requests", status.requests.to_string()),
        ("cached files", status.cached_files.to_string()),
        ("line indexes", human_bytes(status.index_bytes)),
        ("mapped bytes", human_bytes(status.mapped_bytes)),
        ("open files", status.open_files.to_string()),
        (
            "descriptors",
            format!(
                "{} open, limit {} ({} kept in reserve), {} for session roots",
                status.open_descriptors,
                status.descriptor_limit,
                status.descriptor_reserve,
                status.roots_held
            ),
        ),
        ("watched paths", status.watched_paths.to_string()),
        ("inotify watches", format!("{} (max {})", status.watches_held, status.watches_cap)),
        ("snapshots", format!("{} ({})", status.snapshots, human_bytes(status.snapshot_bytes))),
        (
            "search listings",
            format!(
                "{} ({}; {} files, filters {}{})",
                status.cached_listings,
                human_bytes(status.cached_listing_bytes),
                status.cached_listed_files,
                human_bytes(status.cached_filter_bytes),
                if status.cached_filters_building { ", building" } else { "" }
            ),
        ),
        ("search indexes", search_index_summary(status)),
        (
            "observed records",
            format!(
                "{}; caps {} a session, {} in all; {} evicted",
                human_bytes(status.observed_bytes),
                human_bytes(status.max_session_observed_bytes),
                human_bytes(status.max_observed_bytes),
                status.observations_evicted
            ),
        ),
        (
            "searches",
            format!(
                "{} of {} running, {} waiting (memory bound {})",
                status.search_slots_busy,
                status.search_slots,
                status.search_slots_waiting,
                human_bytes(status.search_memory_bytes)
            ),
        ),
        ("dropped notifications", status.notifications_dropped.to_string()),
        ("journal", journal_summary(status)),
        ("gates", gate_count(status)),
        ("language servers", language_servers(status)),
        ("unmatched responses", status.unmatched_responses.to_string()),
    ];
    let mut out = aligned(&rows);
    for gate in &status.gates {
        out.push_str(&render_gate(gate));
    }
    for index in &status.search_indexes {
        out.push_str(&render_search_index(index));
    }
    for server in &status.language_servers {
        let _ = writeln!(
            out,
            "  {} {}: {}, pid {}, {}, {} open, {} sessions, {} restarts",
            escape_field(&server.name),
            escape_field(&server.root),
            escape_field(&server.state),
            server.pid.map_or_else(|| "-".to_owned(), |p| p.to_string()),
            human_bytes(server.rss_bytes),
            server.open_documents,
            server.sessions,
            server.restarts
        );
    }
    if !status.language_servers_missing.is_empty() {
        let missing: Vec<String> =
            status.language_servers_missing.iter().map(|m| escape_field(m).into_owned()).collect();
        let _ = writeln!(out, "  not found: {}", missing.join(", "));
        if let Some(path) = &status.language_server_path {
            let _ = writeln!(out, "  PATH searched: {}", escape_field(path));
        }
    }
    out
}

/// How many language servers run (the list follows, one a line).
fn language_servers(status: &DaemonStatus) -> String {
    match status.language_servers.len() {
        0 if status.language_servers_missing.is_empty() && status.language_server_path.is_none() => {
            "none configured".to_owned()
        }
        0 => "none running".to_owned(),
        n => format!("{n} running"),
    }
}

/// `2, 20.1 MiB (21076000) on disk`, or `none`.
fn search_index_summary(status: &DaemonStatus) -> String {
    if status.search_indexes.is_empty() {
        return "none".to_owned();
    }
    let bytes: u64 = status.search_indexes.iter().map(|index| index.bytes).sum();
    format!("{}, {} on disk", status.search_indexes.len(), human_bytes(bytes))
}

/// One root's search index of `filectx status`: `  index of /src/app: loaded from disk
/// (validated in 42ms, 3 files re-read); 20.1 MiB (21076000)`.
fn render_search_index(index: &SearchIndexInfo) -> String {
    let origin = if index.loaded {
        format!(
            "loaded from disk (validated in {}, {} file{} re-read)",
            human_duration(index.validation_ms),
            index.reread_files,
            if index.reread_files == 1 { "" } else { "s" }
        )
    } else {
        "built by a walk".to_owned()
    };
    let bytes = if index.bytes == 0 { "not written yet".to_owned() } else { human_bytes(index.bytes) };
    format!("  index of {}: {origin}; {bytes}\n", escape_field(&index.root))
}

/// `on, 12 entries (4.0 KiB (4096))`, or `off` and why (the daemon runs with `journal = false`,
/// or its journal could not be opened or loaded).
fn journal_summary(status: &DaemonStatus) -> String {
    if let Some(problem) = &status.journal_problem {
        return format!("off: {} (changes are written without it)", escape_field(problem));
    }
    if !status.journal {
        return "off (journal = false or --no-journal; `filectx history --help`)".to_owned();
    }
    let plural = if status.journal_entries == 1 { "y" } else { "ies" };
    format!("on, {} entr{plural} ({})", status.journal_entries, human_bytes(status.journal_bytes))
}

/// How many gates are listed, and how many other sessions' the daemon did not show.
fn gate_count(status: &DaemonStatus) -> String {
    match status.other_gates {
        0 => status.gates.len().to_string(),
        others => format!("{} (and {others} of other sessions, not shown)", status.gates.len()),
    }
}

/// One gate of `filectx status`: `  gate-1 "review" (session s-2): /p, /q; create, edit; 50s,
/// then deny; 1 in flight, 0 waiting`.
fn render_gate(gate: &GateInfo) -> String {
    let name = gate.name.as_ref().map(|name| format!(" \"{}\"", escape_field(name))).unwrap_or_default();
    let paths: Vec<_> = gate.paths.iter().map(|path| escape_field(path)).collect();
    let operations: Vec<&str> = gate.operations.iter().map(|operation| operation.as_str()).collect();
    let on_timeout = match gate.on_timeout {
        GateOnTimeout::Deny => "deny",
        GateOnTimeout::Allow => "allow",
    };
    format!(
        "  {}{name} (session {}): {}; {}; {}, then {on_timeout}; {} in flight, {} waiting\n",
        escape_field(&gate.gate_id),
        escape_field(&gate.session_id),
        paths.join(", "),
        operations.join(", "),
        human_duration(gate.timeout_ms),
        gate.in_flight,
        gate.waiting
    )
}

fn aligned(rows: &[(&str, String)]) -> String {
    let width = rows.iter().map(|(key, _)| key.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (key, value) in rows {
        let _ = writeln!(out, "{:<width$} {value}", format!("{key}:"));
    }
    out
}

/// `2h 3m 4s`; days when over 24 hours; milliseconds under one second.
fn human_duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let total = ms / 1000;
    let (days, hours, minutes, seconds) = (total / 86_400, total / 3600 % 24, total / 60 % 60, total % 60);
    if days > 0 {
        format!("{days}d {hours}h {minutes}m {seconds}s")
    } else if hours > 0 {
        format!("{hours}h {minutes}m {seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m {seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `1.5 MiB (1572864)`, or plain bytes under 1 KiB.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // Display only: the precision lost converting to f64 does not show at one decimal.
    #[allow(clippy::cast_precision_loss)]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {} ({bytes})", UNITS[unit])
}

/// Each tool: its name and first sentence, then its parameters (name, type, required or not).
pub(crate) fn render_tools(list: &ToolsListResult) -> String {
    let mut out = String::new();
    for (index, tool) in list.tools.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "{}: {}", tool.name, first_sentence(&tool.description));
        let params = parameters(&tool.input_schema);
        if params.is_empty() {
            let _ = writeln!(out, "  (no parameters)");
            continue;
        }
        let name_width = params.iter().map(|p| p.name.len()).max().unwrap_or(0);
        let type_width = params.iter().map(|p| p.kind.len()).max().unwrap_or(0);
        for p in &params {
            let presence = if p.required { "required" } else { "optional" };
            let line = format!("  {:<name_width$}  {:<type_width$}  {presence}{}", p.name, p.kind, p.note);
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    out
}

/// The text up to and including the first `.` that ends a sentence (followed by whitespace or
/// the end), on one line.
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let end = text
        .char_indices()
        .find(|&(i, c)| c == '.' && text[i + 1..].chars().next().is_none_or(char::is_whitespace))
        .map_or(text.len(), |(i, _)| i + 1);
    text[..end].split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Param {
    name: String,
    kind: String,
    required: bool,
    note: String,
}

/// The properties of a JSON Schema object: required ones first (in `required` order), then the
/// others (in the order the schema lists them).
fn parameters(schema: &Value) -> Vec<Param> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let describe = |name: &str, spec: &Value| {
        let kind = match spec.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|"),
            _ => "any".to_owned(),
        };
        let note = spec.get("default").map(|default| format!(" (default {default})")).unwrap_or_default();
        Param { name: name.to_owned(), kind, required: required.contains(&name), note }
    };
    let mut params: Vec<Param> =
        required.iter().filter_map(|name| properties.get(*name).map(|spec| describe(name, spec))).collect();
    params.extend(
        properties.iter().filter(|(name, _)| !required.contains(&name.as_str())).map(|(n, s)| describe(n, s)),
    );
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_2h_3m_4s() {
        assert_eq!(human_duration(250), "250ms");
        assert_eq!(human_duration(4_000), "4s");
        assert_eq!(human_duration(184_000), "3m 4s");
        assert_eq!(human_duration((2 * 3600 + 3 * 60 + 4) * 1000 + 999), "2h 3m 4s");
        assert_eq!(human_duration((86_400 + 5) * 1000), "1d 0h 0m 5s");
    }

    #[test]
    fn bytes_are_human() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1536), "1.5 KiB (1536)");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.0 MiB (3145728)");
    }

    #[test]
    fn first_sentence_stops_at_a_sentence_end() {
        assert_eq!(first_sentence("Read a text file. Returns lines."), "Read a text file.");
        assert_eq!(first_sentence("Uses `a.b` names.\nMore."), "Uses `a.b` names.");
        assert_eq!(first_sentence("No full stop"), "No full stop");
    }

    #[test]
    fn status_lines_are_aligned() {
        let status = DaemonStatus {
            version: "0.1.0".to_owned(),
            pid: 42,
            uptime_ms: 7_384_000,
            sessions: 1,
            max_sessions: 64,
            refused_connections: 0,
            cached_files: 3,
            index_bytes: 2048,
            mapped_bytes: 0,
            open_files: 2,
            watched_paths: 2,
            requests: 9,
            notifications_dropped: 0,
            hashed_bytes: 0,
            file_slots: 8,
            file_slots_busy: 0,
            file_slots_waiting: 0,
            owners: 0,
            parked_sessions: 0,
            parked_bytes: 0,
            snapshots: 2,
            snapshot_bytes: 2048,
            cached_listings: 1,
            cached_listing_bytes: 512,
            cached_listed_files: 3,
            cached_filter_bytes: 192,
            cached_filters_building: true,
            search_indexes: vec![SearchIndexInfo {
                root: "/src/app".to_owned(),
                loaded: true,
                reread_files: 3,
                bytes: 2048,
                validation_ms: 42,
            }],
            gates: Vec::new(),
            unmatched_responses: 0,
            other_gates: 0,
            observed_bytes: 4096,
            max_observed_bytes: 1 << 28,
            max_session_observed_bytes: 1 << 25,
            observations_evicted: 3,
            open_descriptors: 21,
            descriptor_limit: 1024,
            descriptor_reserve: 128,
            roots_held: 1,
            search_slots: 2,
            search_slots_busy: 1,
            search_slots_waiting: 0,
            search_regex_bytes: 16 << 20,
            search_memory_bytes: 96 << 20,
            watches_held: 3,
            watches_cap: 16384,
            journal: true,
            journal_entries: 12,
            journal_bytes: 4096,
            journal_problem: None,
            language_servers: vec![filectx_protocol::LanguageServerInfo {
                name: "basedpyright".into(),
                root: "/p".into(),
                pid: Some(7),
                state: "ready".into(),
                rss_bytes: 200 << 20,
                open_documents: 2,
                sessions: 1,
                restarts: 0,
            }],
            language_servers_missing: vec!["gopls (gopls)".into()],
            language_server_path: Some("/usr/bin:/bin".into()),
        };
        let text = render_status(&status, std::path::Path::new("/run/user/1/filectx.sock"));
        assert!(text.contains("uptime:                2h 3m 4s\n"), "{text}");
        assert!(text.contains("dropped notifications: 0\n"), "{text}");
        // Every value starts in the same column, right after the longest key.
        assert!(
            text.contains("search listings:       1 (512 B; 3 files, filters 192 B, building)\n"),
            "{text}"
        );
        assert!(text.contains("line indexes:          2.0 KiB (2048)\n"), "{text}");
        assert!(text.contains("gates:                 0\n"), "{text}");
        assert!(
            text.contains(
                "observed records:      4.0 KiB (4096); caps 32.0 MiB (33554432) a session, 256.0 MiB \
                 (268435456) in all; 3 evicted\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "descriptors:           21 open, limit 1024 (128 kept in reserve), 1 for session roots\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "searches:              1 of 2 running, 0 waiting (memory bound 96.0 MiB (100663296))\n"
            ),
            "{text}"
        );
        assert!(text.contains("inotify watches:       3 (max 16384)\n"), "{text}");
        assert!(text.contains("journal:               on, 12 entries (4.0 KiB (4096))\n"), "{text}");
        assert!(text.contains("search indexes:        1, 2.0 KiB (2048) on disk\n"), "{text}");
        assert!(
            text.contains(
                "  index of /src/app: loaded from disk (validated in 42ms, 3 files re-read); 2.0 KiB (2048)\n"
            ),
            "{text}"
        );
        assert!(text.contains("language servers:      1 running\n"), "{text}");
        assert!(
            text.contains(
                "  basedpyright /p: ready, pid 7, 200.0 MiB (209715200), 2 open, 1 sessions, 0 restarts\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("  not found: gopls (gopls)\n  PATH searched: /usr/bin:/bin\n"), "{text}");
        let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with("  ")).collect();
        assert_eq!(rows.len(), 24);
        assert!(rows.iter().all(|l| l.get(22..23) == Some(" ") && l.get(23..24) != Some(" ")), "{text}");
    }

    #[test]
    fn gates_are_listed_below_the_status() {
        let gate = GateInfo {
            gate_id: "gate-1".to_owned(),
            name: Some("review".to_owned()),
            session_id: "s-2".to_owned(),
            paths: vec!["/p".to_owned(), "/q".to_owned()],
            operations: vec![filectx_protocol::GateOperation::Create, filectx_protocol::GateOperation::Edit],
            timeout_ms: 50_000,
            on_timeout: GateOnTimeout::Deny,
            in_flight: 1,
            waiting: 0,
        };
        assert_eq!(
            render_gate(&gate),
            "  gate-1 \"review\" (session s-2): /p, /q; create, edit; 50s, then deny; 1 in flight, 0 waiting\n"
        );
    }

    #[test]
    fn tools_show_name_sentence_and_parameters() {
        let list = ToolsListResult {
            tools: filectx_protocol::ToolName::ALL
                .into_iter()
                .map(filectx_protocol::tools::descriptor)
                .collect(),
        };
        let text = render_tools(&list);
        assert!(text.starts_with("read: Read a text file.\n  file_path  string   required\n"), "{text}");
        assert!(text.contains("  limit      integer  optional\n"), "{text}");
        assert!(text.contains("write: Write a text file, replacing its whole content.\n"), "{text}");
        assert!(text.contains("  replace_all  boolean  optional (default false)\n"), "{text}");
        assert!(text.contains("  old_string   string   required\n"), "{text}");
    }

    #[test]
    fn stat_lines_leave_out_what_the_daemon_did_not_give() {
        let stat = FileStatResult {
            exists: true,
            kind: FileKind::Directory,
            display_path: "src".to_owned(),
            size: Some(96),
            version: None,
            observed_version: None,
            fresh: false,
        };
        assert_eq!(render_stat(&stat), "path:   src\nexists: yes\nkind:   directory\nsize:   96 B\n");
    }

    #[test]
    fn changes_show_the_display_path_and_the_start_of_the_version() {
        let change = |version: Option<&str>| FileDidChange {
            path: "/home/me/project/src/lib.rs".to_owned(),
            display_path: "src/lib.rs".to_owned(),
            version: version.map(str::to_owned),
            owner: None,
        };
        let long = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_eq!(render_change(&change(Some(long))), "changed src/lib.rs (version 0123456789ab)\n");
        assert_eq!(render_change(&change(Some("b3-1"))), "changed src/lib.rs (version b3-1)\n");
        // Cut at a character, never inside one.
        assert_eq!(
            render_change(&change(Some("ééééééééééééé"))),
            "changed src/lib.rs (version éééééééééééé)\n"
        );
        assert_eq!(render_change(&change(None)), "deleted src/lib.rs\n");
    }
}

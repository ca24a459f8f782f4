//! The read projection and the whole lines below it, over the socket: the `read` tool's text
//! (the session's `readMaxBytes` budget, the three footers, lines cut at 2000 characters with
//! the design's suffix, a capped `limit`, paging from the footer's offset without losing or
//! repeating a line), and the canonical layers (`file/read`, `fs/readText`, `fs/streamText`)
//! returning lines whole, bounded by `--max-window-bytes` (a window stops before it; one longer
//! line is `FS_TOO_LARGE`; `file/read` cuts only with `maxLineChars`). An offset past the end is
//! `FS_NOT_FOUND` at every layer.

use std::fs;
use std::path::Path;
use std::time::Duration;

use filectx_protocol::{ReadResult, TextChunk};
use filectx_tests::{Daemon, Raw, fs_error, ok, root_of, rpc};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The design's cut suffix.
const SUFFIX: &str = "... (line truncated to 2000 chars)";

/// Room the projection keeps for its footer: no read's text stops further than this (plus the
/// next line) below its budget.
const FOOTER_SLACK: usize = 200;

fn s(path: &Path) -> String {
    path.display().to_string()
}

/// A `read` tool call: `(isError, text, error code)`.
fn tool_read(raw: &mut Raw, arguments: Value) -> (bool, String, Option<String>) {
    let result = ok(raw, "tools/call", json!({"name": "read", "arguments": arguments}));
    let text = result["content"].as_array().unwrap().iter().map(|b| b["text"].as_str().unwrap()).collect();
    (result["isError"] == true, text, result["error"]["code"].as_str().map(str::to_owned))
}

/// The text of a `read` tool call that must succeed.
fn read_text(raw: &mut Raw, arguments: Value) -> String {
    let (failed, text, code) = tool_read(raw, arguments.clone());
    assert!(!failed, "read {arguments}: {code:?} {text}");
    text
}

fn read_result(raw: &mut Raw, method: &str, params: Value) -> ReadResult {
    serde_json::from_value(ok(raw, method, params)).unwrap()
}

/// A line as the read tool shows it.
fn projected(line: &str) -> String {
    match line.char_indices().nth(2000) {
        Some((at, _)) => format!("{}{SUFFIX}", &line[..at]),
        None => line.to_owned(),
    }
}

/// What one line costs in the tool's text: number column, tab, text, newline.
fn cost(n: u64, line: &str) -> usize {
    n.to_string().len().max(6) + 2 + projected(line).len()
}

/// A tool text's rows (number, text) and its footer.
fn parse(text: &str) -> (Vec<(u64, String)>, String) {
    let (body, footer) = match text.strip_prefix('\n') {
        Some(footer) => ("", footer),
        None => text.rsplit_once("\n\n").unwrap_or_else(|| panic!("no footer: {text:?}")),
    };
    let rows = body
        .lines()
        .map(|row| {
            let (n, line) = row.split_once('\t').unwrap_or_else(|| panic!("no tab in {row:?}"));
            (n.trim_start().parse().unwrap_or_else(|_| panic!("bad number in {row:?}")), line.to_owned())
        })
        .collect();
    (rows, footer.to_owned())
}

/// Subscribes to `fs/streamText`: the subscription id, or the whole error response.
fn subscribe(raw: &mut Raw, params: Value) -> Result<Value, Value> {
    let id = raw.send_request("fs/streamText", Some(params));
    loop {
        let frame = raw.recv();
        if frame.get("id") == Some(&json!(id)) {
            return match frame.get("error") {
                Some(_) => Err(frame),
                None => Ok(frame["result"].clone()),
            };
        }
    }
}

/// Every chunk of a stream up to its last.
fn chunks(raw: &mut Raw, sub: &Value) -> Vec<TextChunk> {
    let mut chunks = Vec::new();
    loop {
        let frame = raw.recv();
        if frame["method"] != "fs/textChunk" {
            continue;
        }
        assert_eq!(&frame["params"]["subscription"], sub, "{frame}");
        let chunk: TextChunk = serde_json::from_value(frame["params"]["result"].clone()).unwrap();
        let done = chunk.done;
        chunks.push(chunk);
        if done {
            return chunks;
        }
    }
}

/// Deterministic lines of every length: mostly code-sized, some empty, some non-ASCII, one in
/// 97 over the tool's 2000 characters; about `bytes` bytes in all.
fn varied_lines(bytes: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut size = 0;
    let mut i = 0u64;
    while size < bytes {
        let line = match i {
            _ if i % 97 == 13 => format!("{i} {}", "ü".repeat(2400)),
            _ if i.is_multiple_of(11) => String::new(),
            _ => format!("{i} {}", "let x = compute(y); ✓ ".repeat((i * 7919 % 13) as usize)),
        };
        size += line.len() + 1;
        lines.push(line);
        i += 1;
    }
    lines
}

// ---------------------------------------------------------------------------------------------
// Whole lines below the projection, cut lines in it
// ---------------------------------------------------------------------------------------------

/// A 5,000-character line comes back whole from `fs/readText`, `file/read` and `fs/streamText`;
/// the `read` tool cuts it with the exact suffix; `file/read` cuts it only with `maxLineChars`.
#[test]
fn a_long_line_is_whole_below_the_projection_and_cut_by_the_tool() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let long = format!("{}{}", "a".repeat(2000), "é".repeat(3000));
    fs::write(root.join("long.txt"), format!("short\n{long}\nend\n")).unwrap();
    let mut raw = daemon.session();
    let all = ["short".to_owned(), long.clone(), "end".to_owned()];

    for method in ["fs/readText", "file/read"] {
        let read = read_result(&mut raw, method, json!({"path": "long.txt"}));
        assert!(read.lines == all, "{method}: lines come whole");
        assert_eq!((read.truncated_lines.len(), read.truncated_by_bytes, read.partial), (0, false, false));
    }
    let sub = subscribe(&mut raw, json!({"path": "long.txt"})).unwrap();
    let streamed: Vec<String> = chunks(&mut raw, &sub).into_iter().flat_map(|c| c.lines).collect();
    assert!(streamed == all, "a stream carries it whole");

    let text = read_text(&mut raw, json!({"file_path": "long.txt"}));
    assert_eq!(
        text,
        format!("1\tshort\n2\t{}{SUFFIX}\n3\tend\n\n(End of file - total 3 lines)", "a".repeat(2000))
    );

    let read = read_result(&mut raw, "file/read", json!({"path": "long.txt", "maxLineChars": 2001}));
    assert_eq!(read.lines[1], format!("{}é", "a".repeat(2000)), "cut at characters, not bytes");
    assert_eq!(read.truncated_lines, [2]);
    let read = read_result(&mut raw, "file/read", json!({"path": "long.txt", "maxLineChars": 5000}));
    assert_eq!((read.lines[1].clone(), read.truncated_lines), (long, vec![]), "not cut when it fits");
    for (method, params) in [
        ("file/read", json!({"path": "long.txt", "maxLineChars": 0})),
        ("fs/readText", json!({"path": "long.txt", "maxLineChars": 100})),
    ] {
        let response = rpc(&mut raw, method, params.clone());
        assert_eq!(fs_error(&response), "FS_INVALID_ARGUMENT", "{method} {params}: {response}");
    }
}

/// A window of whole lines stops before `--max-window-bytes` and says so; paging on from where it
/// stopped, and a stream's chunks, cover the file exactly.
#[test]
fn windows_of_whole_lines_stop_before_the_cap_and_continue_exactly() {
    let daemon = Daemon::start(&["--max-window-bytes", "4096"]);
    let root = root_of(&daemon);
    let lines: Vec<String> = (0..300).map(|i| format!("{i:03} {}", "x".repeat(i % 150))).collect();
    fs::write(root.join("w.txt"), lines.join("\n")).unwrap();
    let mut raw = Raw::connect(&daemon.socket);
    let init = raw.call("initialize", Some(json!({"roots": [root]})));
    assert_eq!(init["limits"]["maxWindowBytes"], 4096, "{init}");

    for method in ["fs/readText", "file/read"] {
        let mut offset = 1;
        let mut seen = Vec::new();
        while offset <= lines.len() as u64 {
            let read = read_result(&mut raw, method, json!({"path": "w.txt", "offset": offset}));
            let bytes: usize = read.lines.iter().map(String::len).sum();
            assert!(bytes <= 4096, "{method} at {offset}: {bytes} bytes");
            let next = offset + read.lines.len() as u64;
            if next <= lines.len() as u64 {
                assert!(read.truncated_by_bytes && read.partial, "{method} at {offset}");
                assert!(bytes + lines[next as usize - 1].len() > 4096, "{method} stopped early at {offset}");
            } else {
                assert!(!read.truncated_by_bytes, "{method}: the last window reached the end");
            }
            seen.extend(read.lines);
            offset = next;
        }
        assert!(seen == lines, "{method}: every line once, in order");
    }

    let sub = subscribe(&mut raw, json!({"path": "w.txt", "chunkLines": 2000})).unwrap();
    let chunks = chunks(&mut raw, &sub);
    assert!(chunks.len() > 3, "chunks end early before the cap: {}", chunks.len());
    for chunk in &chunks {
        assert!(chunk.lines.iter().map(String::len).sum::<usize>() <= 4096);
        assert!(chunk.error.is_none(), "{:?}", chunk.error);
    }
    let streamed: Vec<String> = chunks.into_iter().flat_map(|c| c.lines).collect();
    assert!(streamed == lines, "the chunks reassemble to the file");
}

/// A minified file (one line of 6 MiB, mapped): the tool answers under its budget with the
/// line's first 2000 characters; the layers below answer `FS_TOO_LARGE` (with the line, its
/// size and the cap) rather than a line over `--max-window-bytes`, and `file/read` with
/// `maxLineChars` reads it. A stream that reaches such a line ends with an `FS_TOO_LARGE` item.
#[test]
fn a_minified_file_is_cut_by_the_tool_and_too_large_below_it() {
    const CAP: u64 = 1 << 20;
    let daemon = Daemon::start(&["--max-window-bytes", &CAP.to_string()]);
    let root = root_of(&daemon);
    let size = 6 << 20;
    let line = "m".repeat(size);
    fs::write(root.join("min.js"), &line).unwrap();
    fs::write(root.join("two.js"), format!("// header\n{line}\n")).unwrap();
    let mut raw = daemon.session();

    let text = read_text(&mut raw, json!({"file_path": "min.js"}));
    assert!(text.len() <= 51_200, "{} bytes", text.len());
    assert_eq!(text, format!("1\t{}{SUFFIX}\n\n(End of file - total 1 lines)", "m".repeat(2000)));
    let status = raw.call("daemon/status", None);
    assert!(status["mappedBytes"].as_u64().unwrap() >= size as u64, "read from its mapping: {status}");
    // Again, warm, and quickly: nothing of the line beyond its prefix is copied.
    let started = std::time::Instant::now();
    for _ in 0..20 {
        assert!(read_text(&mut raw, json!({"file_path": "min.js"})).len() <= 51_200);
    }
    assert!(started.elapsed() < Duration::from_secs(5), "20 warm reads took {:?}", started.elapsed());

    for method in ["fs/readText", "file/read"] {
        let response = rpc(&mut raw, method, json!({"path": "min.js"}));
        assert_eq!(fs_error(&response), "FS_TOO_LARGE", "{method}: {response}");
        let data = &response["error"]["data"];
        assert_eq!(
            (data["line"].as_u64(), data["size"].as_u64(), data["limit"].as_u64()),
            (Some(1), Some(size as u64), Some(CAP))
        );
    }
    let read = read_result(&mut raw, "file/read", json!({"path": "min.js", "maxLineChars": 100}));
    assert_eq!((read.lines, read.truncated_lines), (vec!["m".repeat(100)], vec![1]));

    // A huge second line: a window stops before it; a window that starts at it is refused.
    let read = read_result(&mut raw, "fs/readText", json!({"path": "two.js"}));
    assert_eq!(
        (read.lines, read.truncated_by_bytes, read.partial),
        (vec!["// header".to_owned()], true, true)
    );
    let response = rpc(&mut raw, "fs/readText", json!({"path": "two.js", "offset": 2}));
    assert_eq!(fs_error(&response), "FS_TOO_LARGE", "{response}");
    let text = read_text(&mut raw, json!({"file_path": "two.js"}));
    assert_eq!(
        text,
        format!("1\t// header\n2\t{}{SUFFIX}\n\n(End of file - total 2 lines)", "m".repeat(2000))
    );

    let sub = subscribe(&mut raw, json!({"path": "two.js"})).unwrap();
    let chunks = chunks(&mut raw, &sub);
    assert_eq!(chunks.len(), 2, "{chunks:?}");
    assert_eq!(chunks[0].lines, ["// header"]);
    assert!(!chunks[0].done);
    let error = chunks[1].error.as_ref().expect("an error item");
    assert_eq!(error.code.as_str(), "FS_TOO_LARGE");
    assert!(chunks[1].done && chunks[1].lines.is_empty() && chunks[1].start_line == 2, "{chunks:?}");
}

// ---------------------------------------------------------------------------------------------
// The read tool's budget
// ---------------------------------------------------------------------------------------------

/// A 4 MB file through the tool: every answer is under 50 KiB, stops at the last whole line that
/// fits, and names the offset to continue at; reading from each named offset covers the file
/// with no line lost or repeated.
#[test]
fn a_4_mb_file_pages_under_the_budget_without_losing_or_repeating_a_line() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let lines = varied_lines(4_000_000);
    fs::write(root.join("big.txt"), lines.join("\n") + "\n").unwrap();
    let total = lines.len() as u64;
    let mut raw = daemon.session();

    let mut offset = 1u64;
    let mut pages = 0;
    loop {
        let text = read_text(&mut raw, json!({"file_path": "big.txt", "offset": offset}));
        pages += 1;
        assert!(text.len() <= 51_200, "page at {offset}: {} bytes", text.len());
        let (rows, footer) = parse(&text);
        assert!(!rows.is_empty(), "page at {offset} shows no line");
        let last = offset + rows.len() as u64 - 1;
        for (i, (n, shown)) in rows.iter().enumerate() {
            let n_expected = offset + i as u64;
            assert_eq!(*n, n_expected, "page at {offset}: numbering");
            assert!(*shown == projected(&lines[*n as usize - 1]), "line {n} as the tool shows it");
        }
        if last == total {
            assert_eq!(footer, format!("(End of file - total {total} lines)"));
            break;
        }
        assert_eq!(
            footer,
            format!("(Output capped. Showing lines {offset}-{last}. Use offset={} to continue.)", last + 1)
        );
        let next = cost(last + 1, &lines[last as usize]);
        assert!(
            text.len() + next > 51_200 - FOOTER_SLACK,
            "page at {offset} stopped early: {} bytes",
            text.len()
        );
        offset = last + 1;
        assert!(pages < 500, "paging does not end");
    }
    assert!(pages > 60, "a 4 MB file takes many 50 KiB pages: {pages}");
}

/// `readMaxBytes` in `initialize` sets the session's budget (reported in `limits`), within
/// 1024..=maxWindowBytes; `--read-max-bytes` sets the daemon's default.
#[test]
fn a_session_gets_the_budget_it_asks_for() {
    let daemon = Daemon::start(&["--read-max-bytes", "8192"]);
    let root = root_of(&daemon);
    let lines: Vec<String> = (1..=20_000).map(|i| format!("line {i} {}", "z".repeat(100 + i % 40))).collect();
    fs::write(root.join("f.txt"), lines.join("\n")).unwrap();

    for (asked, budget) in [(None, 8192usize), (Some(4096), 4096), (Some(200_000), 200_000)] {
        let mut params = json!({"roots": [root]});
        if let Some(asked) = asked {
            params["readMaxBytes"] = json!(asked);
        }
        let mut raw = Raw::connect(&daemon.socket);
        let init = raw.call("initialize", Some(params));
        assert_eq!(init["limits"]["readMaxBytes"], budget, "{init}");
        let features = init["capabilities"]["features"].as_array().unwrap();
        assert!(
            features.contains(&json!("readMaxBytes")) && features.contains(&json!("wholeLines")),
            "{init}"
        );
        let text = read_text(&mut raw, json!({"file_path": "f.txt"}));
        assert!(text.len() <= budget, "{asked:?}: {} bytes", text.len());
        assert!(text.len() > budget - FOOTER_SLACK - 60, "{asked:?}: only {} bytes", text.len());
        assert!(text.contains("(Output capped. Showing lines 1-"), "{asked:?}");
    }

    for bad in [0u64, 1023, 8 * 1024 * 1024 + 1] {
        let mut raw = Raw::connect(&daemon.socket);
        let response = raw.request("initialize", Some(json!({"roots": [root], "readMaxBytes": bad})));
        assert_eq!(fs_error(&response), "FS_INVALID_ARGUMENT", "{bad}: {response}");
    }
}

/// The three footers exactly, the clause a capped `limit` adds, and a first line cut shorter
/// than 2000 characters to fit a small budget.
#[test]
fn the_three_footers_exactly() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    fs::write(root.join("five.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
    let hundred: String = (1..=40).map(|i| format!("{i:02} {}\n", "w".repeat(96))).collect();
    fs::write(root.join("wide.txt"), &hundred).unwrap();
    fs::write(root.join("long.txt"), (1..=2500).map(|i| format!("{i}\n")).collect::<String>()).unwrap();
    fs::write(root.join("one.txt"), "x".repeat(3000)).unwrap();
    let mut raw = daemon.session_with(json!({"roots": [root], "readMaxBytes": 1024}));

    assert_eq!(
        read_text(&mut raw, json!({"file_path": "five.txt", "offset": 4})),
        "4\tfour\n5\tfive\n\n(End of file - total 5 lines)"
    );
    assert_eq!(
        read_text(&mut raw, json!({"file_path": "five.txt", "offset": 2, "limit": 2})),
        "2\ttwo\n3\tthree\n\n(Showing lines 2-3 of 5. Use offset=4 to continue.)"
    );
    // 1024 bytes: lines of 107 bytes each, eight of them and the footer.
    let text = read_text(&mut raw, json!({"file_path": "wide.txt"}));
    let expected: String = (1..=8).map(|i| format!("{i}\t{i:02} {}\n", "w".repeat(96))).collect();
    assert_eq!(text, format!("{expected}\n(Output capped. Showing lines 1-8. Use offset=9 to continue.)"));
    assert!(text.len() <= 1024);
    let text = read_text(&mut raw, json!({"file_path": "wide.txt", "offset": 9}));
    assert!(text.starts_with("9\t09 ") && text.ends_with("Use offset=17 to continue.)"), "{text}");

    // A first line longer than the budget is cut shorter to fit, and says how much it kept.
    let text = read_text(&mut raw, json!({"file_path": "one.txt"}));
    let (rows, footer) = parse(&text);
    assert!(text.len() <= 1024, "{} bytes", text.len());
    let kept = rows[0].1.len() - "... (line truncated to 000 chars)".len();
    assert_eq!(rows[0].1, format!("{}... (line truncated to {kept} chars)", "x".repeat(kept)));
    assert!(kept > 700, "{kept}");
    assert_eq!(footer, "(End of file - total 1 lines)");

    // A limit over 2000 is capped, and the footer says so.
    let mut raw = daemon.session();
    let text = read_text(&mut raw, json!({"file_path": "long.txt", "limit": 5000}));
    assert!(
        text.ends_with(
            "\n\n(Showing lines 1-2000 of 2500. Use offset=2001 to continue. Limit capped at 2000 lines.)"
        ),
        "{}",
        &text[text.len() - 120..]
    );
    let text = read_text(&mut raw, json!({"file_path": "long.txt", "limit": 2000}));
    assert!(text.ends_with("\n\n(Showing lines 1-2000 of 2500. Use offset=2001 to continue.)"));
    let text = read_text(&mut raw, json!({"file_path": "long.txt", "offset": 2001, "limit": 5000}));
    assert!(text.ends_with("\n\n(End of file - total 2500 lines)"), "capping changed nothing");

    // The schema no longer states a maximum the daemon does not enforce by refusing.
    let tools = raw.call("tools/list", None);
    let read = tools["tools"].as_array().unwrap().iter().find(|t| t["name"] == "read").unwrap();
    assert!(read["inputSchema"]["properties"]["limit"].get("maximum").is_none(), "{read}");
}

/// An offset past the end is `FS_NOT_FOUND` at every layer, with `totalLines` and `offset`; the
/// tool's text says how many lines the file has. An empty file reads fine at offset 1.
#[test]
fn offset_past_the_end_is_not_found_at_every_layer() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    fs::write(root.join("three.txt"), "a\nb\nc\n").unwrap();
    fs::write(root.join("empty.txt"), "").unwrap();
    let mut raw = daemon.session();

    let (failed, text, code) = tool_read(&mut raw, json!({"file_path": "three.txt", "offset": 4}));
    assert!(failed);
    assert_eq!(code.as_deref(), Some("FS_NOT_FOUND"));
    assert!(text.contains("has 3 lines"), "{text}");
    for method in ["file/read", "fs/readText"] {
        let response = rpc(&mut raw, method, json!({"path": "three.txt", "offset": 4}));
        assert_eq!(fs_error(&response), "FS_NOT_FOUND", "{method}: {response}");
        assert_eq!(
            (&response["error"]["data"]["totalLines"], &response["error"]["data"]["offset"]),
            (&json!(3), &json!(4))
        );
    }
    let response = subscribe(&mut raw, json!({"path": s(&root.join("three.txt")), "offset": 9})).unwrap_err();
    assert_eq!(fs_error(&response), "FS_NOT_FOUND", "{response}");
    assert_eq!(response["error"]["data"]["totalLines"], 3);

    assert_eq!(
        read_text(&mut raw, json!({"file_path": "empty.txt", "offset": 1})),
        "\n(End of file - total 0 lines)"
    );
    let read = read_result(&mut raw, "file/read", json!({"path": "empty.txt", "offset": 1}));
    assert_eq!((read.lines.len(), read.total_lines), (0, 0));
    let (failed, text, code) = tool_read(&mut raw, json!({"file_path": "empty.txt", "offset": 2}));
    assert!(failed && code.as_deref() == Some("FS_NOT_FOUND"), "{text}");
    assert!(text.contains("empty (0 lines)"), "{text}");
}

/// `filectx cat` prints long lines whole (byte for byte), and stops with `FS_TOO_LARGE` (exit 4)
/// at a line longer than the daemon's window cap, after the lines before it.
#[test]
fn filectx_cat_prints_long_lines_whole() {
    let daemon = Daemon::start(&["--max-window-bytes", "1048576"]);
    let root = root_of(&daemon);
    let text = format!("short\n{}\nend\n", "é".repeat(5000));
    fs::write(root.join("long.txt"), &text).unwrap();
    fs::write(root.join("huge.txt"), format!("first\n{}\n", "h".repeat(2 << 20))).unwrap();
    let cat = |name: &str| {
        std::process::Command::new(filectx_tests::bin("filectx"))
            .env("FILECTX_NO_AUTOSTART", "1")
            .arg("--socket")
            .arg(&daemon.socket)
            .args(["cat", "--root", &s(&root), &s(&root.join(name))])
            .output()
            .unwrap()
    };
    let out = cat("long.txt");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == text.as_bytes(), "the file, byte for byte");
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));

    let out = cat("huge.txt");
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(out.stdout, b"first\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("filectx: FS_TOO_LARGE: line 2 is 2097152 bytes"), "{stderr}");
}

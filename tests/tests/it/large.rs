//! Large files through the real socket: windowed reads of a memory-mapped file that another
//! process truncates and regrows in place while several sessions read it (the SIGBUS guard, torn
//! reads and their retries), `fs/streamText` (reassembly, chunk sizes, cancel, a change
//! mid-stream, errors before the start, a reader that stops reading), and what `daemon/status`
//! says about mapped files.
//!
//! Every file here is at least the daemon's map threshold (4 MiB) unless a test says otherwise.
//! The heavy tests take a process-wide lock so that they do not run at the same time (the CI
//! machine has two cores, and some of them measure time and memory).

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use filectx_protocol::tools::{READ_LINE_LIMIT, READ_LINE_MAX_CHARS};
use filectx_protocol::{FsErrorCode, STREAM_CHUNK_LINES, TextChunk};
use filectx_tests::versus::Rng;
use filectx_tests::{Daemon, Raw, fs_error, ok, rpc};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Held by the heavy tests so that they run one at a time.
static HEAVY: Mutex<()> = Mutex::new(());

fn heavy() -> MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(PoisonError::into_inner)
}

fn s(path: &Path) -> String {
    path.display().to_string()
}

/// Chunks the daemon produces ahead of a stream's connection (its `STREAM_BUFFER_CHUNKS`).
const STREAM_BUFFER_CHUNKS: usize = 4;

fn seed() -> u64 {
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    println!("seed {seed}");
    seed
}

// ----- Generation files: every line names its generation and its number ----------------------
//
// Line `n` of generation `g` is `g{g:06} l{n:08} ` followed by padding that depends on `n`, 63
// characters in all, then `\n`: every line is 64 bytes, so line `n` starts at byte
// `(n - 1) * 64`, a file of `B` bytes has `ceil(B / 64)` lines, and any state of the file while
// it is truncated or regrown is fully described by (generation, length).

const LINE_BYTES: u64 = 64;
const LINE_CHARS: usize = 63;
const HEAD_CHARS: usize = 18;
const PAD: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-";

/// Line `n` of generation `generation`, without its newline.
fn line_text(generation: u32, n: u64) -> String {
    let mut line = format!("g{generation:06} l{n:08} ");
    let k = (n % 64) as usize;
    line.extend((0..LINE_CHARS - HEAD_CHARS).map(|i| PAD[(k + i) % 64] as char));
    line
}

/// Lines `first..first + buf.len() / 64` of `generation`, written into `buf` (newlines included).
fn fill_lines(buf: &mut [u8], generation: u32, first: u64) {
    let templates: Vec<Vec<u8>> = (0..64u64)
        .map(|k| {
            let mut line = line_text(generation, k).into_bytes();
            line.push(b'\n');
            line
        })
        .collect();
    for (i, line) in buf.chunks_exact_mut(LINE_BYTES as usize).enumerate() {
        let n = first + i as u64;
        line.copy_from_slice(&templates[(n % 64) as usize]);
        let mut rest = n;
        for at in (9..17).rev() {
            line[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
    }
}

/// The whole content of a generation of `lines` lines.
fn generation_bytes(generation: u32, lines: u64) -> Vec<u8> {
    let mut buf = vec![0u8; (lines * LINE_BYTES) as usize];
    fill_lines(&mut buf, generation, 1);
    buf
}

/// Rewrites the generation digits of every line of `buf` in place.
fn set_generation(buf: &mut [u8], generation: u32) {
    let digits = format!("{generation:06}");
    for line in buf.chunks_exact_mut(LINE_BYTES as usize) {
        line[1..7].copy_from_slice(digits.as_bytes());
    }
}

/// Writes a generation file of `lines` lines without holding it all in memory.
fn write_generation_file(path: &Path, generation: u32, lines: u64) {
    let mut file = File::create(path).unwrap();
    let block = 64 * 1024u64;
    let mut buf = vec![0u8; (block * LINE_BYTES) as usize];
    let mut first = 1;
    while first <= lines {
        let n = block.min(lines - first + 1);
        let bytes = &mut buf[..(n * LINE_BYTES) as usize];
        fill_lines(bytes, generation, first);
        file.write_all(bytes).unwrap();
        first += n;
    }
    file.sync_data().ok();
}

/// Checks one line against the generation file's shape; returns its generation when the line
/// is long enough to tell. `may_be_cut`: the file's last line, which a truncation may cut.
fn check_line(line: &str, n: u64, may_be_cut: bool) -> Result<Option<u32>, String> {
    let bytes = line.as_bytes();
    if bytes.is_empty() || bytes.len() > LINE_CHARS || (!may_be_cut && bytes.len() != LINE_CHARS) {
        return Err(format!("line {n} has {} bytes: {line:?}", bytes.len()));
    }
    let template = line_text(0, n);
    for (i, (&got, &want)) in bytes.iter().zip(template.as_bytes()).enumerate() {
        let ok = if (1..7).contains(&i) { got.is_ascii_digit() } else { got == want };
        if !ok {
            return Err(format!("line {n} is wrong at byte {i}: {line:?} (the shape is {template:?})"));
        }
    }
    Ok((bytes.len() >= 7).then(|| line[1..7].parse().unwrap()))
}

/// Checks a window `lines` starting at `start` of a file version with `total` lines, asked for
/// with `offset`/`limit`, against the generation files: the right line numbers, the right
/// length, one generation throughout, a cut line only at the end of the file. Returns the
/// generation when some line tells it.
fn check_window(
    offset: u64,
    limit: u64,
    start: u64,
    lines: &[String],
    total: u64,
    max_lines: u64,
) -> Result<Option<u32>, String> {
    if start != offset {
        return Err(format!("asked for line {offset}, got a window starting at {start}"));
    }
    if total > max_lines {
        return Err(format!("{total} lines, more than the {max_lines} the file ever has"));
    }
    let expected_len = if total == 0 { 0 } else { limit.min(total + 1 - start) };
    if lines.len() as u64 != expected_len {
        return Err(format!(
            "{} lines for offset {offset} limit {limit} of a {total}-line version (expected {expected_len})",
            lines.len()
        ));
    }
    let mut generation = None;
    for (i, line) in lines.iter().enumerate() {
        let n = start + i as u64;
        if let Some(g) = check_line(line, n, n == total)? {
            match generation {
                None => generation = Some(g),
                Some(seen) if seen != g => {
                    return Err(format!("a mix of generations {seen} and {g} (line {n}: {line:?})"));
                }
                Some(_) => {}
            }
        }
    }
    Ok(generation)
}

// ----- JSON-RPC helpers ------------------------------------------------------------------------

/// The parts of a `read` tool text: first line number, lines, total lines of the file (`None`
/// when the footer says the output was capped, which does not name the total).
type ToolRead = (Option<u64>, Vec<String>, Option<u64>);

/// Splits a `read` tool text into its [`ToolRead`] parts.
fn parse_tool_read(text: &str) -> Result<ToolRead, String> {
    let (body, footer) = match text.strip_prefix("\n(") {
        Some(footer) => ("", footer),
        None => text.rsplit_once("\n\n(").ok_or_else(|| format!("no footer in {text:?}"))?,
    };
    let mut first = None;
    let mut lines = Vec::new();
    for (i, row) in body.lines().enumerate() {
        let (number, line) = row.split_once('\t').ok_or_else(|| format!("no tab in row {row:?}"))?;
        let number: u64 = number.trim().parse().map_err(|_| format!("bad line number in {row:?}"))?;
        let first = *first.get_or_insert(number);
        if number != first + i as u64 {
            return Err(format!("row {i} is numbered {number}, after a window starting at {first}"));
        }
        lines.push(line.to_owned());
    }
    if footer.starts_with("Output capped. Showing lines ") {
        return Ok((first, lines, None));
    }
    let total = if let Some(rest) = footer.strip_prefix("End of file - total ") {
        rest.split_whitespace().next()
    } else if let Some(rest) = footer.strip_prefix("Showing lines ") {
        rest.split(" of ").nth(1).and_then(|r| r.split('.').next())
    } else {
        None
    };
    let total = total.and_then(|t| t.parse().ok()).ok_or_else(|| format!("unreadable footer {footer:?}"))?;
    Ok((first, lines, Some(total)))
}

// ----- Streams ---------------------------------------------------------------------------------

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
        assert!(
            frame.get("id").is_none() && frame["method"] != "fs/textChunk",
            "a chunk (or another answer) arrived before the subscription id: {frame}"
        );
    }
}

/// The `TextChunk` of a `fs/textChunk` frame of subscription `sub`, or `None` for any other
/// notification.
fn chunk_of(frame: &Value, sub: &Value) -> Option<TextChunk> {
    if frame["method"] != "fs/textChunk" {
        assert!(frame.get("id").is_none(), "unexpected response while streaming: {frame}");
        return None;
    }
    assert_eq!(&frame["params"]["subscription"], sub, "{frame}");
    Some(serde_json::from_value(frame["params"]["result"].clone()).unwrap())
}

/// The next chunk of `sub`.
fn next_chunk(raw: &mut Raw, sub: &Value) -> TextChunk {
    loop {
        if let Some(chunk) = chunk_of(&raw.recv(), sub) {
            return chunk;
        }
    }
}

/// Every remaining chunk of `sub`, through the one marked `done`; then checks that nothing
/// else of it follows.
fn rest_of_stream(raw: &mut Raw, sub: &Value) -> Vec<TextChunk> {
    let mut chunks = Vec::new();
    loop {
        let chunk = next_chunk(raw, sub);
        let done = chunk.done;
        chunks.push(chunk);
        if done {
            break;
        }
    }
    while let Some(frame) = raw.recv_within(Duration::from_millis(200)) {
        assert!(chunk_of(&frame, sub).is_none(), "a chunk after the one marked done: {frame}");
    }
    chunks
}

/// Checks the invariants of a complete stream (one version, consecutive chunks, `done` only on
/// the last) and returns its lines.
fn reassemble(chunks: &[TextChunk], offset: u64, chunk_lines: u64) -> Vec<String> {
    assert!(!chunks.is_empty());
    let version = &chunks[0].version;
    let total = chunks[0].total_lines;
    let mut next = offset;
    let mut lines = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        assert_eq!(&chunk.version, version, "chunk {i}: one version throughout");
        assert_eq!(chunk.total_lines, total, "chunk {i}");
        assert_eq!(chunk.start_line, next, "chunk {i} starts where the previous one ended");
        assert!(chunk.error.is_none(), "chunk {i}: {:?}", chunk.error);
        assert_eq!(chunk.done, last, "chunk {i} of {}: done only on the last", chunks.len());
        if last {
            assert!(chunk.lines.len() as u64 <= chunk_lines, "last chunk has {} lines", chunk.lines.len());
        } else {
            assert_eq!(chunk.lines.len() as u64, chunk_lines, "chunk {i} has chunkLines lines");
        }
        next += chunk.lines.len() as u64;
        lines.extend(chunk.lines.iter().cloned());
    }
    assert_eq!(next, total.max(offset - 1) + 1, "the stream ends at the end of the file");
    lines
}

// ---------------------------------------------------------------------------------------------
// Chaos: truncate and regrow a mapped file in place while sessions read windows of it
// ---------------------------------------------------------------------------------------------

/// Lines of the chaos file: 64 MiB when the tests are optimized (about 30 reads in the 5 s on
/// two cores); 6 MiB in debug builds (what CI runs), where the daemon hashes and indexes about
/// twenty times slower (memchr's vector code is not inlined). Every read hashes the whole file
/// again, since a file that keeps changing is never trusted on its fingerprint; at 6 MiB the
/// sessions get about a hundred reads in. Either way above the 4 MiB from which files are mapped.
const CHAOS_LINES: u64 = if cfg!(debug_assertions) { 6 << 14 } else { 1 << 20 };
/// How long the writer keeps changing the file.
const CHAOS_FOR: Duration = Duration::from_secs(5);

/// What the answers with one version said about it; two answers with the same version must
/// agree.
#[derive(Debug, Default, Clone)]
struct Seen {
    generation: Option<u32>,
    total: u64,
    /// The file's last line, when a window included it.
    last_line: Option<String>,
    answers: u64,
}

#[derive(Default)]
struct Tally {
    counts: BTreeMap<String, u64>,
    versions: HashMap<String, Seen>,
}

impl Tally {
    fn count(&mut self, what: &str) {
        *self.counts.entry(what.to_owned()).or_default() += 1;
    }

    fn version(&mut self, version: &str, generation: Option<u32>, total: u64, last_line: Option<String>) {
        let seen =
            self.versions.entry(version.to_owned()).or_insert_with(|| Seen { total, ..Seen::default() });
        assert_eq!(seen.total, total, "two answers of version {version} disagree on the line count");
        match (seen.generation, generation) {
            (Some(a), Some(b)) => {
                assert_eq!(a, b, "two answers of version {version} show different generations")
            }
            (None, Some(b)) => seen.generation = Some(b),
            _ => {}
        }
        match (&seen.last_line, last_line) {
            (Some(a), Some(b)) => {
                assert_eq!(a, &b, "two answers of version {version} disagree on the last line")
            }
            (None, Some(b)) => seen.last_line = Some(b),
            _ => {}
        }
        seen.answers += 1;
    }
}

/// Error codes a read may answer while the file is being truncated and regrown. `FS_NOT_TEXT`
/// is not one of them: a generation file cut anywhere is still ASCII text, so it would mean
/// the daemon hashed zeros from past the end of a truncated mapping.
const CHAOS_ERRORS: &[&str] = &["FS_BUSY", "FS_STALE_VERSION", "FS_NOT_FOUND"];

/// One random read through `file/read` or the `read` tool, checked and tallied.
fn chaos_read(raw: &mut Raw, path: &str, rng: &mut Rng, tally: &Mutex<Tally>) {
    // Mostly windows near the start, which a truncated version usually still has; some
    // anywhere, some at the very end (past the end of any truncated version).
    let offset = match rng.below(8) {
        0 => None,
        1 => Some(CHAOS_LINES - rng.below(3000)),
        2 | 3 => Some(1 + rng.below(CHAOS_LINES)),
        _ => Some(1 + rng.below(CHAOS_LINES / 8)),
    };
    let limit = [1, 7, 64, 500, 2000][rng.below(5) as usize];
    let asked = offset.unwrap_or(1);
    if rng.below(4) == 0 {
        let mut arguments = json!({"file_path": path, "limit": limit});
        if let Some(offset) = offset {
            arguments["offset"] = json!(offset);
        }
        let result = ok(raw, "tools/call", json!({"name": "read", "arguments": arguments}));
        let text: String =
            result["content"].as_array().unwrap().iter().map(|b| b["text"].as_str().unwrap()).collect();
        if result["isError"] == true {
            let code = result["error"]["code"].as_str().unwrap_or_else(|| panic!("{result}"));
            assert!(CHAOS_ERRORS.contains(&code), "read tool, offset {asked} limit {limit}: {result}");
            tally.lock().unwrap().count(&format!("error {code} (read tool)"));
            return;
        }
        let (first, lines, total) = parse_tool_read(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        let start = first.unwrap_or(asked);
        let checked = match total {
            Some(total) => check_window(asked, limit, start, &lines, total, CHAOS_LINES),
            // Capped by the output budget: whole lines, at least one, no more than asked, and
            // more of the file after them.
            None if !lines.is_empty() && lines.len() as u64 <= limit => {
                let shown = lines.len() as u64;
                check_window(asked, shown, start, &lines, start + shown, CHAOS_LINES)
            }
            None => Err(format!("{} lines in a capped answer for limit {limit}", lines.len())),
        };
        if let Err(why) = checked {
            panic!("read tool, offset {asked} limit {limit}: {why}\n{text}");
        }
        let total = total.unwrap_or(CHAOS_LINES);
        let mut tally = tally.lock().unwrap();
        tally.count("ok (read tool)");
        if total < CHAOS_LINES {
            tally.count("ok of a truncated or regrowing version");
        }
        return;
    }
    let mut params = json!({"path": path, "limit": limit});
    if let Some(offset) = offset {
        params["offset"] = json!(offset);
    }
    let response = rpc(raw, "file/read", params.clone());
    if response.get("error").is_some() {
        let code = fs_error(&response);
        assert!(CHAOS_ERRORS.contains(&code), "file/read {params}: {response}");
        if code == "FS_NOT_FOUND" {
            let total = response["error"]["data"]["totalLines"].as_u64();
            assert!(total.is_some_and(|t| t < asked), "only an offset past the end is not found: {response}");
        }
        tally.lock().unwrap().count(&format!("error {code} (file/read)"));
        return;
    }
    let result = &response["result"];
    let lines: Vec<String> = serde_json::from_value(result["lines"].clone()).unwrap();
    let start = result["startLine"].as_u64().unwrap();
    let total = result["totalLines"].as_u64().unwrap();
    let version = result["version"].as_str().unwrap();
    let generation = check_window(asked, limit, start, &lines, total, CHAOS_LINES)
        .unwrap_or_else(|why| panic!("file/read {params}: {why} (version {version}, {total} lines)"));
    let shown_last = start + lines.len() as u64 - 1;
    let partial = total > 0 && (start > 1 || shown_last < total);
    assert_eq!(result["partial"], partial, "{params}: partial");
    assert_eq!(result["truncatedLines"], json!([]), "{params}");
    let last_line = (total > 0 && shown_last == total).then(|| lines.last().unwrap().clone());
    let mut tally = tally.lock().unwrap();
    tally.version(version, generation, total, last_line);
    tally.count("ok (file/read)");
    if total < CHAOS_LINES {
        tally.count("ok of a truncated or regrowing version");
    }
}

/// Whether `version` is the version (the daemon's documented encoding: lowercase hex of the
/// blake3 hash) of some state of the file with these lines: generation `generation` cut to any
/// length that gives `seen.total` lines (and ends with `seen.last_line` when known).
fn version_matches_a_state(version: &str, generation: u32, seen: &Seen, base: &mut [u8]) -> bool {
    set_generation(base, generation);
    let total = seen.total;
    if total == 0 {
        return blake3::hash(b"").to_hex().as_str() == version;
    }
    let before = ((total - 1) * LINE_BYTES) as usize;
    let mut prefix = blake3::Hasher::new();
    prefix.update(&base[..before]);
    let lengths: Vec<usize> = match &seen.last_line {
        Some(last) if last.len() < LINE_CHARS => vec![last.len()],
        Some(_) => vec![LINE_CHARS, LINE_CHARS + 1],
        None => (1..=LINE_BYTES as usize).collect(),
    };
    lengths.into_iter().any(|len| {
        let mut hasher = prefix.clone();
        hasher.update(&base[before..before + len]);
        hasher.finalize().to_hex().as_str() == version
    })
}

#[test]
fn chaos_truncate_and_regrow_in_place_under_concurrent_readers() {
    let _heavy = heavy();
    let daemon = Daemon::start(&[]);
    let path = daemon.dir.path().join("chaos.txt");
    let mut content = generation_bytes(0, CHAOS_LINES);
    fs::write(&path, &content).unwrap();
    let path_text = s(&path);
    let seed = seed();

    // What one whole scan of the file costs this daemon: the writer's pauses are drawn around
    // it, so that reads sometimes fit between two changes and sometimes are cut by one.
    let mut raw = daemon.session();
    let timed = Instant::now();
    ok(&mut raw, "file/read", json!({"path": path_text, "limit": 1}));
    let scan = timed.elapsed().clamp(Duration::from_millis(5), Duration::from_millis(400));
    println!(
        "chaos: {} MiB file; one read of it (hash + index) took {scan:?}",
        (CHAOS_LINES * LINE_BYTES) >> 20
    );

    let stop = AtomicBool::new(false);
    let tally = Mutex::new(Tally::default());
    let started = Instant::now();
    let (generations, truncations) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut rng = Rng::new(seed);
            let pause = |rng: &mut Rng, scans: u32| {
                let max = (scan * scans).as_micros() as u64;
                std::thread::sleep(Duration::from_micros(rng.below(max)));
            };
            let file = OpenOptions::new().write(true).open(&path).unwrap();
            let full = content.len() as u64;
            let (mut generation, mut truncations) = (0u32, 0u64);
            while started.elapsed() < CHAOS_FOR {
                // Truncate in place to a random length (often mid-line), and leave it so a while.
                file.set_len(rng.below(full)).unwrap();
                truncations += 1;
                pause(&mut rng, 3);
                // Regrow in place with the next generation, 1 MiB at a time. Emptying the file
                // first means every state it passes through is a prefix of one generation:
                // overwriting the old bytes directly would make real mixed states, which no
                // reader could be blamed for showing.
                generation += 1;
                set_generation(&mut content, generation);
                file.set_len(0).unwrap();
                for (i, piece) in content.chunks(1 << 20).enumerate() {
                    file.write_all_at(piece, (i as u64) << 20).unwrap();
                }
                pause(&mut rng, 4);
            }
            stop.store(true, Ordering::SeqCst);
            (generation, truncations)
        });
        for reader in 0..4u64 {
            let (daemon, stop, tally, path) = (&daemon, &stop, &tally, &path_text);
            scope.spawn(move || {
                let mut raw = daemon.session();
                let mut rng = Rng::new(seed ^ (reader + 1).wrapping_mul(0xA24B_AED4_963E_E407));
                // The deadline only matters if the writer died.
                while !stop.load(Ordering::SeqCst) && started.elapsed() < 3 * CHAOS_FOR {
                    chaos_read(&mut raw, path, &mut rng, tally);
                }
            });
        }
        writer.join().unwrap()
    });
    let chaos_time = started.elapsed();

    // The file now rests at its last generation: reads of it are whole and current.
    let read = ok(&mut raw, "file/read", json!({"path": path_text, "offset": CHAOS_LINES - 9}));
    let lines: Vec<String> = serde_json::from_value(read["lines"].clone()).unwrap();
    assert_eq!(read["totalLines"], CHAOS_LINES);
    let expected: Vec<String> = (CHAOS_LINES - 9..=CHAOS_LINES).map(|n| line_text(generations, n)).collect();
    assert_eq!(lines, expected, "after the chaos, the last generation");

    let status = raw.call("daemon/status", None);
    assert!(status["uptimeMs"].is_u64(), "{status}");
    let mut daemon = daemon;
    assert!(daemon.child.try_wait().unwrap().is_none(), "the daemon is alive");
    let log = daemon.log_text();
    assert!(!log.contains("panicked"), "the daemon panicked:\n{log}");

    // Every version answered is the hash of one complete state of the file.
    let tally = tally.into_inner().unwrap();
    let mut base = generation_bytes(0, CHAOS_LINES);
    let mut checked = 0;
    for (version, seen) in tally.versions.iter().take(64) {
        let Some(generation) = seen.generation else { continue };
        assert!(
            version_matches_a_state(version, generation, seen, &mut base),
            "version {version} is not the hash of generation {generation} cut to {} lines ({seen:?})",
            seen.total
        );
        checked += 1;
    }

    let reads: u64 = tally.counts.iter().filter(|(k, _)| !k.starts_with("ok of")).map(|(_, v)| v).sum();
    println!(
        "chaos: {chaos_time:.1?}, {generations} generations, {truncations} truncations, {reads} reads by 4 sessions"
    );
    for (what, n) in &tally.counts {
        println!("  {what}: {n}");
    }
    println!(
        "  distinct versions answered: {}, of which {checked} checked against blake3 of a whole state",
        tally.versions.len()
    );
    assert!(reads >= 10, "too few reads to mean anything: {:?}", tally.counts);
    let successes: u64 = tally.counts.iter().filter(|(k, _)| k.starts_with("ok (")).map(|(_, v)| v).sum();
    assert!(successes > 0, "no read succeeded during the chaos: {:?}", tally.counts);
}

// ---------------------------------------------------------------------------------------------
// fs/streamText
// ---------------------------------------------------------------------------------------------

/// Lines of the big stream files: 64 MiB.
const BIG_LINES: u64 = 1 << 20;

/// A text file of about 6 MiB (mapped): varied lines, empty ones, non-ASCII ones, lines over
/// the read tool's character cap, no final newline. Returns the lines (streams show them whole)
/// and the numbers of those over the tool's cap.
fn varied_file(path: &Path) -> (Vec<String>, Vec<u64>) {
    let mut lines = Vec::new();
    for i in 0..80_000u64 {
        let line = match i {
            _ if i % 9973 == 5 => "é".repeat(2500),
            _ if i % 17 == 0 => String::new(),
            _ => format!("{i} {}", "lorem ipsum ✓ dolor ".repeat((i % 7) as usize)),
        };
        lines.push(line);
    }
    fs::write(path, lines.join("\n")).unwrap();
    assert!(fs::metadata(path).unwrap().len() > 4 << 20, "over the map threshold");
    let long = (1..=lines.len() as u64)
        .filter(|&n| lines[n as usize - 1].chars().count() > READ_LINE_MAX_CHARS as usize)
        .collect();
    (lines, long)
}

#[test]
fn stream_reassembles_a_large_file_exactly_in_chunks_of_the_asked_size() {
    let _heavy = heavy();
    let daemon = Daemon::start(&[]);
    let path = daemon.dir.path().join("varied.txt");
    let (expected, long) = varied_file(&path);
    let mut raw = daemon.session();
    let version = ok(&mut raw, "fs/stat", json!({"path": s(&path)}))["version"].clone();

    for (offset, chunk_lines, asked) in [
        (1, 777, json!(777)),
        (1, STREAM_CHUNK_LINES, Value::Null),
        (12_345, u64::from(READ_LINE_LIMIT), json!(5000)),
        (80_000, 3, json!(3)),
    ] {
        let mut params = json!({"path": s(&path), "offset": offset});
        if !asked.is_null() {
            params["chunkLines"] = asked;
        }
        let sub = subscribe(&mut raw, params.clone()).unwrap_or_else(|e| panic!("{params}: {e}"));
        let chunks = rest_of_stream(&mut raw, &sub);
        let lines = reassemble(&chunks, offset, chunk_lines);
        assert_eq!(json!(chunks[0].version), version, "{params}: the file's version");
        assert_eq!(chunks[0].total_lines, expected.len() as u64);
        assert!(lines == expected[offset as usize - 1..], "{params}: the lines reassemble to the file's");
        // Lines over the read tool's 2000 characters come whole in a stream.
        for &n in long.iter().filter(|&&n| n >= offset) {
            assert_eq!(lines[(n - offset) as usize].chars().count(), 2500, "{params}: line {n} is whole");
        }
        assert!(long.iter().any(|&n| n >= offset) || offset == 80_000, "{params}: a long line is streamed");
        if offset == 1 && chunk_lines == 777 {
            assert!(chunks.len() > 100, "a multi-chunk stream");
        }
    }
}

#[test]
fn stream_of_an_empty_file_is_one_done_chunk() {
    let daemon = Daemon::start(&[]);
    let path = daemon.dir.path().join("empty.txt");
    fs::write(&path, "").unwrap();
    let mut raw = daemon.session();
    let sub = subscribe(&mut raw, json!({"path": s(&path)})).unwrap();
    let chunks = rest_of_stream(&mut raw, &sub);
    assert_eq!(chunks.len(), 1, "{chunks:?}");
    let chunk = &chunks[0];
    assert!(chunk.done && chunk.error.is_none() && chunk.lines.is_empty(), "{chunk:?}");
    assert_eq!((chunk.start_line, chunk.total_lines), (1, 0));
    let version = ok(&mut raw, "fs/stat", json!({"path": s(&path)}))["version"].clone();
    assert_eq!(json!(chunk.version), version);
}

#[test]
fn stream_cancel_stops_it() {
    let _heavy = heavy();
    let daemon = Daemon::start(&["--max-queued-messages", "16"]);
    let path = daemon.dir.path().join("big.txt");
    write_generation_file(&path, 0, BIG_LINES);
    let chunk_lines = 100;
    let total_chunks = BIG_LINES.div_ceil(chunk_lines) as usize;
    let mut raw = daemon.session();
    let sub = subscribe(&mut raw, json!({"path": s(&path), "chunkLines": chunk_lines})).unwrap();
    let mut received = 0usize;
    for _ in 0..5 {
        let chunk = next_chunk(&mut raw, &sub);
        assert!(!chunk.done);
        received += 1;
    }

    let cancel = raw.send_request("fs/streamCancel", Some(json!([sub])));
    let mut before_answer = 0usize;
    let answer = loop {
        let frame = raw.recv();
        if frame.get("id") == Some(&json!(cancel)) {
            break frame;
        }
        if let Some(chunk) = chunk_of(&frame, &sub) {
            assert!(!chunk.done, "the stream finished before the cancel was answered");
            before_answer += 1;
        }
    };
    assert_eq!(answer["result"], true, "{answer}");
    let mut after_answer = 0usize;
    let quiet_by = Instant::now() + Duration::from_secs(5);
    while let Some(frame) = raw.recv_within(Duration::from_millis(500)) {
        if chunk_of(&frame, &sub).is_some() {
            after_answer += 1;
        }
        assert!(Instant::now() < quiet_by, "chunks keep coming after the cancel: {after_answer} so far");
    }
    received += before_answer + after_answer;
    println!(
        "cancel: {before_answer} chunks in flight before the answer, {after_answer} after it, \
         {received} of {total_chunks} delivered"
    );
    // In flight when the cancel arrives: the connection's queue (16), the stream's buffer, the
    // chunk being produced, the writer's batch and the socket buffer (chunks are ~7 KB).
    assert!(before_answer <= 16 + STREAM_BUFFER_CHUNKS + 2 + 64, "{before_answer} chunks after the cancel");
    // After the answer: the answer skips the connection's subscription channel (16 chunks, the
    // daemon's SINK_CAPACITY), so what sat there still follows it; on a loaded machine the
    // channel is not drained before the answer goes out (7 were seen in a CI run).
    assert!(
        after_answer <= 16 + STREAM_BUFFER_CHUNKS + 1,
        "{after_answer} chunks after the cancel was answered"
    );
    assert!(received < total_chunks / 10);
    // The connection is still in use, and a new stream on it works.
    assert!(raw.call("daemon/status", None)["sessions"].as_u64().unwrap() >= 1);
    let sub2 =
        subscribe(&mut raw, json!({"path": s(&path), "offset": BIG_LINES - 150, "chunkLines": 100})).unwrap();
    assert_ne!(sub2, sub);
    let chunks = rest_of_stream(&mut raw, &sub2);
    assert_eq!(reassemble(&chunks, BIG_LINES - 150, 100).len(), 151);
}

/// Streams a 64 MiB generation-0 file slowly, calls `change` mid-way, and checks that the
/// stream ends with an `FS_STALE_VERSION` item after chunks that are all generation 0.
fn stream_then_change(daemon: &Daemon, name: &str, change: impl FnOnce(&Path)) {
    let path = daemon.dir.path().join(name);
    write_generation_file(&path, 0, BIG_LINES);
    let mut raw = daemon.session();
    let chunk_lines = 100;
    let sub = subscribe(&mut raw, json!({"path": s(&path), "chunkLines": chunk_lines})).unwrap();
    let mut chunks = vec![next_chunk(&mut raw, &sub), next_chunk(&mut raw, &sub)];
    // The reader dawdles: the daemon stops producing once its bounded buffers are full.
    std::thread::sleep(Duration::from_millis(300));
    change(&path);
    let changed_at = Instant::now();
    chunks.extend(rest_of_stream(&mut raw, &sub));
    let last = chunks.pop().unwrap();
    let error = last.error.as_ref().unwrap_or_else(|| {
        panic!(
            "{name}: the stream ended without an error after a change: {} chunks, last {last:?}",
            chunks.len()
        )
    });
    assert_eq!(error.code, FsErrorCode::StaleVersion, "{name}: {last:?}");
    assert!(last.done && last.lines.is_empty(), "{name}: {last:?}");
    assert!(!error.message.is_empty());
    let mut next = 1;
    for (i, chunk) in chunks.iter().enumerate() {
        assert!(!chunk.done && chunk.error.is_none(), "{name}: chunk {i}");
        assert_eq!(
            (chunk.start_line, chunk.version.as_str()),
            (next, last.version.as_str()),
            "{name}: chunk {i}"
        );
        assert_eq!(chunk.lines.len() as u64, chunk_lines);
        for (j, line) in chunk.lines.iter().enumerate() {
            let n = next + j as u64;
            assert_eq!(line, &line_text(0, n), "{name}: every chunk before the error is the old version");
        }
        next += chunk_lines;
    }
    assert_eq!(last.start_line, next, "{name}: the error item comes right after the last chunk");
    assert!(next < BIG_LINES / 4, "{name}: the stream ended early, at line {next}");
    println!(
        "{name}: {} chunks (2 read before the change) then FS_STALE_VERSION, {:?} after the change",
        chunks.len(),
        changed_at.elapsed()
    );
}

#[test]
fn stream_ends_stale_when_the_file_changes_in_place() {
    let _heavy = heavy();
    let daemon = Daemon::start(&["--max-queued-messages", "16"]);
    // Same length, new bytes, same inode.
    stream_then_change(&daemon, "rewritten.txt", |path| {
        let file = OpenOptions::new().write(true).open(path).unwrap();
        file.write_all_at(&generation_bytes(1, BIG_LINES), 0).unwrap();
    });
    // Cut to half: pages past the new end of the mapping fault (SIGBUS), the daemon survives.
    stream_then_change(&daemon, "truncated.txt", |path| {
        let file = OpenOptions::new().write(true).open(path).unwrap();
        file.set_len(BIG_LINES * LINE_BYTES / 2 + 17).unwrap();
    });
    let mut raw = daemon.session();
    raw.call("daemon/status", None);
    assert!(!daemon.log_text().contains("panicked"));
}

#[test]
fn stream_ends_stale_when_the_file_is_replaced() {
    let _heavy = heavy();
    let daemon = Daemon::start(&["--max-queued-messages", "16"]);
    // How editors and the daemon's own write change a file: a new inode renamed over the path.
    stream_then_change(&daemon, "replaced.txt", |path| {
        let temp = path.with_extension("new");
        write_generation_file(&temp, 1, BIG_LINES);
        fs::rename(&temp, path).unwrap();
    });
}

#[test]
fn stream_errors_before_the_start_are_errors_of_the_request() {
    let daemon = Daemon::start(&[]);
    let small = daemon.dir.path().join("three.txt");
    fs::write(&small, "a\nb\nc\n").unwrap();
    let binary = daemon.dir.path().join("binary.bin");
    fs::write(&binary, b"ab\0cd\n").unwrap();
    let outside_dir = tempfile::tempdir().unwrap();
    let outside = outside_dir.path().join("secret.txt");
    fs::write(&outside, "secret\n").unwrap();
    let mut raw = daemon.session();
    let cases = [
        (json!({"path": s(&daemon.dir.path().join("missing.txt"))}), "FS_NOT_FOUND"),
        (json!({"path": s(&outside)}), "FS_OUTSIDE_ROOT"),
        (json!({"path": s(&small), "offset": 5}), "FS_NOT_FOUND"),
        (json!({"path": s(&small), "offset": 0}), "FS_INVALID_ARGUMENT"),
        (json!({"path": s(&small), "chunkLines": 0}), "FS_INVALID_ARGUMENT"),
        (json!({"path": s(daemon.dir.path())}), "FS_NOT_REGULAR_FILE"),
        (json!({"path": s(&binary)}), "FS_NOT_TEXT"),
    ];
    for (params, code) in cases {
        let response = subscribe(&mut raw, params.clone()).expect_err(&format!("{params} must fail"));
        assert_eq!(fs_error(&response), code, "{params}: {response}");
        if params.get("offset") == Some(&json!(5)) {
            assert_eq!(response["error"]["data"]["totalLines"], 3, "{response}");
        }
    }
    assert!(raw.recv_within(Duration::from_millis(300)).is_none(), "no chunk follows a refused stream");
    // The session goes on.
    let sub = subscribe(&mut raw, json!({"path": s(&small), "offset": 3})).unwrap();
    let chunks = rest_of_stream(&mut raw, &sub);
    assert_eq!(reassemble(&chunks, 3, STREAM_CHUNK_LINES), ["c"]);
}

/// Sleeps until the file is older than the daemon's racy window (2 s), so that the version the
/// daemon computes next is trusted on the file's fingerprint afterwards.
fn let_settle(path: &Path) {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(path).unwrap();
    let changed = std::time::UNIX_EPOCH
        + Duration::new(meta.mtime().max(meta.ctime()) as u64, 0)
        + Duration::from_nanos(meta.mtime_nsec().max(meta.ctime_nsec()) as u64);
    let age = std::time::SystemTime::now().duration_since(changed).unwrap_or_default();
    std::thread::sleep(Duration::from_millis(2200).saturating_sub(age));
}

/// What a stream that nobody reads costs the daemon.
struct Stall {
    /// Growth of the daemon's anonymous resident memory, at its peak, in KiB.
    anon_growth_kib: u64,
    /// The slowest round of requests of another session meanwhile.
    slowest: Duration,
}

/// Subscribes to `big` (a generation file of `lines` lines) and reads nothing for three
/// seconds, while another session reads `small`, windows of `big` and the status; then checks
/// that the stream is intact and cancels it.
fn stall(daemon: &Daemon, big: &Path, chunk_lines: u64, check_line: impl Fn(&str, u64) -> bool) -> Stall {
    let small = daemon.dir.path().join("small.txt");
    fs::write(&small, "one\ntwo\n").unwrap();
    let mut other = daemon.session();
    other.call("daemon/status", None);
    let (anon_before, rss_before) = (daemon.rss_anon_kib(), daemon.rss_kib());

    let mut stalled = daemon.session();
    let subscribed = Instant::now();
    let sub = subscribe(&mut stalled, json!({"path": s(big), "chunkLines": chunk_lines})).unwrap();
    let subscribe_time = subscribed.elapsed();
    let total =
        ok(&mut other, "file/read", json!({"path": s(big), "limit": 1}))["totalLines"].as_u64().unwrap();

    let mut slowest = Duration::ZERO;
    let mut anon_peak = anon_before;
    let mut rounds = 0;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let t = Instant::now();
        other.call("daemon/status", None);
        let read = ok(&mut other, "file/read", json!({"path": s(&small)}));
        assert_eq!(read["lines"], json!(["one", "two"]));
        let n = total / 2 + rounds;
        let window = ok(&mut other, "file/read", json!({"path": s(big), "offset": n, "limit": 20}));
        assert!(check_line(window["lines"][0].as_str().unwrap(), n), "line {n}: {window}");
        slowest = slowest.max(t.elapsed());
        rounds += 1;
        anon_peak = anon_peak.max(daemon.rss_anon_kib());
        std::thread::sleep(Duration::from_millis(100));
    }
    let rss_after = daemon.rss_kib();
    println!(
        "stalled stream of a {} MiB file, {chunk_lines} lines a chunk: subscribe took {subscribe_time:?}; \
         daemon anonymous RSS {anon_before} KiB before, peak {anon_peak} KiB (+{} KiB); total RSS \
         {rss_before} -> {rss_after} KiB (mapped file pages included); {rounds} rounds of another \
         session's requests, slowest {slowest:?}",
        fs::metadata(big).unwrap().len() >> 20,
        anon_peak - anon_before,
    );

    // The stalled stream is intact: its first chunk is line 1; then it is cancelled.
    let Some(frame) = stalled.recv_within(Duration::from_secs(10)) else {
        panic!("the stalled stream delivered nothing within 10 s once its reader read again");
    };
    let first = chunk_of(&frame, &sub).unwrap();
    assert_eq!(first.start_line, 1);
    assert!(check_line(&first.lines[0], 1), "{:?}", first.lines[0]);
    // (`false` when the daemon had already produced the whole stream and closed it.)
    let cancel = stalled.send_request("fs/streamCancel", Some(json!([sub])));
    loop {
        let frame = stalled.recv();
        if frame.get("id") == Some(&json!(cancel)) {
            assert!(frame["result"].is_boolean(), "{frame}");
            break;
        }
    }
    Stall { anon_growth_kib: anon_peak - anon_before, slowest }
}

#[test]
fn a_stream_nobody_reads_keeps_daemon_memory_bounded_and_others_served() {
    let _heavy = heavy();
    let daemon = Daemon::start(&[]);
    let big = daemon.dir.path().join("huge.txt");
    write_generation_file(&big, 0, 200 * 1024 * 1024 / LINE_BYTES);
    let_settle(&big);
    let stall = stall(&daemon, &big, STREAM_CHUNK_LINES, |line, n| line == line_text(0, n));
    assert!(
        stall.anon_growth_kib <= 48 * 1024,
        "a reader that reads nothing made the daemon buffer {} KiB",
        stall.anon_growth_kib
    );
    assert!(stall.slowest < Duration::from_secs(2), "another session waited {:?}", stall.slowest);
}

/// Line `n` of the long-line file: its number, then padding to 2000 characters.
fn long_line(n: u64) -> String {
    let mut line = format!("{n:08} ");
    line.extend((0..2000 - 9).map(|i| PAD[(n as usize + i) % 64] as char));
    line
}

/// The same with the largest chunks a client may ask for (2000 lines of 2000 characters, 4 MB of
/// JSON each). Fails against the daemon as of this writing: the connection's outgoing queue
/// (256 messages) takes every chunk the stream produces, so a reader that reads nothing gets
/// the whole file buffered (+230 MB for this 200 MiB file with an optimized daemon).
#[test]
fn a_stream_of_long_lines_nobody_reads_keeps_daemon_memory_bounded() {
    let _heavy = heavy();
    let daemon = Daemon::start(&[]);
    let big = daemon.dir.path().join("long-lines.txt");
    let lines = 200 * 1024 * 1024 / 2001;
    let mut file = std::io::BufWriter::new(File::create(&big).unwrap());
    for n in 1..=lines {
        file.write_all(long_line(n).as_bytes()).unwrap();
        file.write_all(b"\n").unwrap();
    }
    file.into_inner().unwrap().sync_data().unwrap();
    let_settle(&big);
    // The largest chunks a client may ask for: 2000 lines of 2000 characters, 4 MB each.
    let stall = stall(&daemon, &big, u64::from(READ_LINE_LIMIT), |line, n| line == long_line(n));
    assert!(
        stall.anon_growth_kib <= 64 * 1024,
        "a reader that reads nothing made the daemon buffer {} KiB",
        stall.anon_growth_kib
    );
    assert!(stall.slowest < Duration::from_secs(2), "another session waited {:?}", stall.slowest);
}

// ---------------------------------------------------------------------------------------------
// daemon/status
// ---------------------------------------------------------------------------------------------

#[test]
fn status_reports_mapped_bytes_and_cached_files() {
    let _heavy = heavy();
    let daemon = Daemon::start(&[]);
    let mut raw = daemon.session();
    let status = raw.call("daemon/status", None);
    assert_eq!(
        (status["cachedFiles"].as_u64(), status["mappedBytes"].as_u64()),
        (Some(0), Some(0)),
        "{status}"
    );

    let small = daemon.dir.path().join("small.txt");
    fs::write(&small, "x\n").unwrap();
    ok(&mut raw, "file/read", json!({"path": s(&small)}));
    let status = raw.call("daemon/status", None);
    assert!(status["cachedFiles"].as_u64().unwrap() >= 1, "{status}");
    assert_eq!(status["mappedBytes"], 0, "a small file is not mapped: {status}");

    let lines = 8 * 1024 * 1024 / LINE_BYTES;
    let big = daemon.dir.path().join("big.txt");
    write_generation_file(&big, 3, lines);
    for (offset, limit) in [(1, 20), (lines / 2, 2000), (lines - 4, 2000)] {
        let read = ok(&mut raw, "file/read", json!({"path": s(&big), "offset": offset, "limit": limit}));
        let got: Vec<String> = serde_json::from_value(read["lines"].clone()).unwrap();
        let want: Vec<String> = (offset..(offset + limit).min(lines + 1)).map(|n| line_text(3, n)).collect();
        assert_eq!(got, want, "offset {offset} limit {limit}");
        assert_eq!(read["totalLines"], lines);
    }
    let text = ok(
        &mut raw,
        "tools/call",
        json!({"name": "read", "arguments": {"file_path": s(&big), "offset": lines}}),
    );
    let (first, got, total) = parse_tool_read(text["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!((first, got, total), (Some(lines), vec![line_text(3, lines)], Some(lines)));

    // The watcher may deliver the events of writing big.txt only now (on a loaded machine) and
    // drop its cached state; the next read maps it again. Read until the mapping shows.
    let mut status = raw.call("daemon/status", None);
    for _ in 0..50 {
        if status["mappedBytes"].as_u64().unwrap() >= lines * LINE_BYTES {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        ok(&mut raw, "file/read", json!({"path": s(&big), "offset": 1, "limit": 1}));
        status = raw.call("daemon/status", None);
    }
    println!("status after reading a mapped file: {status}");
    assert!(status["cachedFiles"].as_u64().unwrap() >= 1, "{status}");
    let mapped = status["mappedBytes"].as_u64().unwrap();
    assert!(mapped >= lines * LINE_BYTES, "the 8 MiB file is mapped whole: {status}");
}

#[test]
fn generation_files_have_the_shape_the_checks_expect() {
    let line = line_text(17, 1234);
    assert_eq!(line.len(), LINE_CHARS);
    assert!(line.starts_with("g000017 l00001234 "));
    let bytes = generation_bytes(17, 70);
    assert_eq!(bytes.len() as u64, 70 * LINE_BYTES);
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(lines[1233 % 70], line_text(17, 1234 % 70));
    assert_eq!(check_window(1, 70, 1, &lines, 70, 70), Ok(Some(17)));
    let mut mixed = lines.clone();
    mixed[5] = line_text(18, 6);
    assert!(check_window(1, 70, 1, &mixed, 70, 70).unwrap_err().contains("mix"));
    let mut cut = lines[..10].to_vec();
    cut[9].truncate(3);
    assert_eq!(check_window(1, 2000, 1, &cut, 10, 70), Ok(Some(17)));
    assert!(check_window(1, 2000, 1, &cut, 11, 70).is_err(), "a cut line only at the end");
    let mut zeros = lines[..3].to_vec();
    zeros[2] = "\0".repeat(LINE_CHARS);
    assert!(check_window(1, 3, 1, &zeros, 3, 70).is_err());
    let tool = "68\tx\n69\ty\n\n(Showing lines 68-69 of 70. Use offset=70 to continue.)";
    assert_eq!(parse_tool_read(tool), Ok((Some(68), vec!["x".into(), "y".into()], Some(70))));
    assert_eq!(parse_tool_read("\n(End of file - total 0 lines)"), Ok((None, vec![], Some(0))));
    let capped = "68\tx\n\n(Output capped. Showing lines 68-68. Use offset=69 to continue.)";
    assert_eq!(parse_tool_read(capped), Ok((Some(68), vec!["x".into()], None)));
    let seen = Seen { generation: Some(17), total: 10, last_line: Some(cut[9].clone()), answers: 1 };
    let mut base = generation_bytes(0, 70);
    let version = blake3::hash(&text.as_bytes()[..9 * 64 + 3]).to_hex().to_string();
    assert!(version_matches_a_state(&version, 17, &seen, &mut base));
    assert!(!version_matches_a_state(&version, 16, &seen, &mut base));
}

#[test]
fn a_stream_cancelled_the_moment_its_id_arrives_is_stopped() {
    // jsonrpsee registers a subscription just after it queued the answer naming it; a cancel
    // sent on receipt of that answer must still find it (it was answered `false` about one
    // time in forty, and the stream then ran to the end of the file).
    let daemon = Daemon::start(&[]);
    let path = daemon.dir.path().join("lines.txt");
    write_generation_file(&path, 0, 20_000);
    let mut raw = daemon.session();
    for round in 0..40 {
        let sub = subscribe(&mut raw, json!({"path": s(&path), "chunkLines": 10})).unwrap();
        let cancel = raw.send_request("fs/streamCancel", Some(json!([sub])));
        let answer = loop {
            let frame = raw.recv();
            if frame.get("id") == Some(&json!(cancel)) {
                break frame;
            }
        };
        assert_eq!(answer["result"], true, "round {round}: {answer}");
        // Drain what was already on its way before the next round.
        while raw.recv_within(Duration::from_millis(20)).is_some() {}
    }
}

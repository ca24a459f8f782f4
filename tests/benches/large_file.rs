//! Large-file benchmark (issue 4). Prints numbers; asserts nothing but correctness.
//!
//! `cargo bench -p filectx-tests --bench large_file`
//!
//! Builds (once; reused while its size is right) a 1 GiB text file of about 13 million lines
//! under the target folder, runs the daemon in this process (`filectx_daemon::run`, so the
//! bench profile's optimized daemon code is what is measured) on a temp socket, and talks to it
//! over that socket with a hand-framed, buffered JSON-RPC client. Reported, with the page cache
//! warm:
//!
//! - first read (a fresh daemon: map, hash, index, cut the window), median of a few runs;
//! - warm `file/read` latency, p50 and p99 of 200 samples, for 20-, 200- and 2000-line windows
//!   at the start, middle and end of the file;
//! - the simplest correct in-process program for the same windows (read the whole file into a
//!   string, split it into lines, take the window): one full run, and the extraction alone;
//! - `wc -l` and `b3sum` on the same file as processes, and first read / (wc + b3sum).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use filectx_daemon::listen::{self, FolderPolicy};
use filectx_protocol::ReadResult;
use serde_json::{Value, json};

/// Size of the benchmark file.
const FILE_BYTES: u64 = 1 << 30;
/// Samples per warm window.
const SAMPLES: usize = 200;
/// Runs of each whole-file measurement (first read, naive program, wc, b3sum); medians reported.
const RUNS: usize = 5;
/// Window sizes measured.
const WINDOWS: [u64; 3] = [20, 200, 2000];

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and must not spend a minute and a gigabyte of disk on it. A filter argument is ignored.
    if !std::env::args().any(|a| a == "--bench") {
        println!("large_file: a benchmark; run it with `cargo bench -p filectx-tests --bench large_file`");
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("large-file-bench");
    fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    // The name changes whenever the generator does, so an old file is never reused.
    let path = dir.join("lines-1GiB-v2.txt");
    ensure_file(&path);
    let_settle(&path);
    let warm = Instant::now();
    let bytes_read = read_through(&path);
    assert_eq!(bytes_read, FILE_BYTES);
    eprintln!("page cache warmed ({:.0?} to read {} MiB)", warm.elapsed(), bytes_read >> 20);

    let load_before = loadavg();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();

    // First read: a fresh daemon each run (nothing cached), the file in the page cache.
    let mut first_reads = Vec::new();
    let mut kept = None;
    let mut total_lines = 0;
    let mut version = String::new();
    for run in 0..RUNS {
        let daemon = InProc::start(&runtime);
        let mut client = Client::connect(&daemon.socket, &dir);
        let t = Instant::now();
        let read = client.read(&path, 1, 20);
        first_reads.push(t.elapsed());
        total_lines = read.total_lines;
        version = read.version.clone();
        eprintln!("first read, run {}: {:.1?}", run + 1, first_reads[run]);
        if run + 1 == RUNS {
            kept = Some((daemon, client));
        } else {
            drop(client);
            daemon.stop(&runtime);
        }
    }
    let (daemon, mut client) = kept.unwrap();
    let first_read = median(&first_reads);

    // The simplest correct program, loaded once for the extraction timings and the checks.
    let mut naive_runs = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let window = naive_window(&path, total_lines / 2, 2000);
        naive_runs.push(t.elapsed());
        assert_eq!(window.len(), 2000);
    }
    let naive_full = median(&naive_runs);
    let text = fs::read_to_string(&path).unwrap();
    let all_lines: Vec<&str> = text.lines().collect();
    assert_eq!(all_lines.len() as u64, total_lines, "the daemon and the naive program count the same lines");

    // Warm windows over the socket, checked against the naive program.
    let mut rows = Vec::new();
    for limit in WINDOWS {
        for (place, offset) in
            [("start", 1), ("middle", total_lines / 2 - limit / 2), ("end", total_lines - limit + 1)]
        {
            let expected: Vec<String> = all_lines[(offset - 1) as usize..(offset - 1 + limit) as usize]
                .iter()
                .map(|l| l.to_string())
                .collect();
            for _ in 0..10 {
                let read = client.read(&path, offset, limit);
                assert_eq!(read.lines, expected, "{place} {limit}");
                assert_eq!(read.version, version);
            }
            let mut socket = Vec::with_capacity(SAMPLES);
            let mut response_bytes = 0;
            for _ in 0..SAMPLES {
                let t = Instant::now();
                let read = client.read(&path, offset, limit);
                socket.push(t.elapsed());
                response_bytes = client.last_body_bytes;
                assert_eq!(read.start_line, offset);
            }
            // The client's own share of that: parsing the response body.
            let mut parse = Vec::with_capacity(SAMPLES);
            for _ in 0..SAMPLES {
                let t = Instant::now();
                let read: ReadResponse = serde_json::from_slice(&client.body).unwrap();
                std::hint::black_box(read);
                parse.push(t.elapsed());
            }
            let mut extraction = Vec::with_capacity(SAMPLES);
            for _ in 0..SAMPLES {
                let t = Instant::now();
                let window: Vec<String> = all_lines[(offset - 1) as usize..(offset - 1 + limit) as usize]
                    .iter()
                    .map(|l| l.to_string())
                    .collect();
                extraction.push(t.elapsed());
                std::hint::black_box(window);
            }
            rows.push(Row {
                limit,
                place,
                p50: percentile(&socket, 50),
                p99: percentile(&socket, 99),
                response_bytes,
                parse: percentile(&parse, 50),
                extraction: percentile(&extraction, 50),
            });
        }
    }
    drop(all_lines);
    drop(text);
    drop(client);
    daemon.stop(&runtime);

    // wc -l and b3sum as processes.
    let (wc, wc_out) = time_process(Command::new("wc").arg("-l").arg(&path));
    let wc_lines: u64 = wc_out.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert_eq!(wc_lines, total_lines, "wc -l counts the daemon's lines (the file ends with a newline)");
    let b3sum = filectx_tests::find_or_install("b3sum", "b3sum").map(|bin| {
        let (time, out) = time_process(Command::new(&bin).arg(&path));
        assert!(out.starts_with(&version), "b3sum's hash is the daemon's version: {out} vs {version}");
        time
    });

    // The report.
    let mut out = String::new();
    writeln!(out, "\n## Machine\n").unwrap();
    writeln!(out, "{}", machine()).unwrap();
    writeln!(out, "\nload average (1, 5, 15 min) at the start: {load_before}; at the end: {}", loadavg())
        .unwrap();
    writeln!(out, "\n## File\n").unwrap();
    writeln!(out, "{} ({} MiB, {total_lines} lines), page cache warm\n", path.display(), FILE_BYTES >> 20)
        .unwrap();
    writeln!(out, "## Whole-file passes (median of {RUNS} runs)\n").unwrap();
    writeln!(out, "| measure | time |").unwrap();
    writeln!(out, "|---|---:|").unwrap();
    writeln!(
        out,
        "| filectxd first read (map + hash + index + 20-line window, over the socket) | {} |",
        ms(first_read)
    )
    .unwrap();
    writeln!(out, "| `wc -l` | {} |", ms(wc)).unwrap();
    match b3sum {
        Some(b3sum) => {
            writeln!(out, "| `b3sum` | {} |", ms(b3sum)).unwrap();
            writeln!(out, "| `wc -l` + `b3sum` | {} |", ms(wc + b3sum)).unwrap();
            writeln!(
                out,
                "| **first read / (wc -l + b3sum)** | **{:.2}×** (target ≤ 1.5×) |",
                first_read.as_secs_f64() / (wc + b3sum).as_secs_f64()
            )
            .unwrap();
        }
        None => writeln!(out, "| `b3sum` | missing (`cargo install b3sum --locked` failed) |").unwrap(),
    }
    writeln!(
        out,
        "| naive program, one full run (read_to_string + lines + 2000-line window) | {} |",
        ms(naive_full)
    )
    .unwrap();
    writeln!(
        out,
        "\nfirst read, every run: {}",
        first_reads.iter().map(|d| ms(*d)).collect::<Vec<_>>().join(", ")
    )
    .unwrap();
    writeln!(out, "\n## Warm windows ({SAMPLES} samples each)\n").unwrap();
    writeln!(
        out,
        "| window | where | filectxd p50 | filectxd p99 | response | of which client parse, p50 | naive full run / filectxd p50 | naive extraction only, p50 |"
    )
    .unwrap();
    writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|").unwrap();
    for row in &rows {
        writeln!(
            out,
            "| {} lines | {} | {} | {} | {} KiB | {} | {:.0}× | {} |",
            row.limit,
            row.place,
            ms(row.p50),
            ms(row.p99),
            row.response_bytes / 1024,
            ms(row.parse),
            naive_full.as_secs_f64() / row.p50.as_secs_f64(),
            ms(row.extraction),
        )
        .unwrap();
    }
    let worst_2000 = rows.iter().filter(|r| r.limit == 2000).map(|r| r.p50).max().unwrap();
    writeln!(out, "\nwarm 2000-line window p50, worst position: {} (target < 1 ms)", ms(worst_2000)).unwrap();
    println!("{out}");
}

struct Row {
    limit: u64,
    place: &'static str,
    p50: Duration,
    p99: Duration,
    response_bytes: usize,
    parse: Duration,
    extraction: Duration,
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        format!("{ms:.3} ms")
    } else if ms < 100.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 50)
}

fn percentile(samples: &[Duration], p: usize) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

// ----- The file ------------------------------------------------------------------------------

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Words of the lines, separated by spaces: ASCII, as most of source code and logs are. One
/// word in a hundred is taken from [`NON_ASCII`] instead, so that UTF-8 validation cannot take
/// its ASCII fast path everywhere (about one line in nine has such a word).
const WORDS: &str = "\
    fn let mut self struct impl return match Some(x) None => { } // the file window version \
    0x1f 42 Vec<u8> &str :: ; if else for while loop break continue pub use mod crate super \
    where type const static unsafe async await move ref dyn trait enum true false as in Ok(()) \
    Err(e) ? &mut String u64 usize i32 Option<T> Result<T,E> println! format! vec![] assert_eq! \
    clone() unwrap() iter() map(|x|x) collect() len() is_empty() push(x) pop() insert(k,v) \
    get(&k) remove(&k) contains(&x) sort() dedup() split(',') trim() parse() to_string() \
    as_str() into() from(x) new() default() Box::new(x) Arc::clone(&a) lock() read() write(b) \
    flush()";

/// Words that are not ASCII.
const NON_ASCII: &[&str] = &["é", "naïve", "✓", "λ", "→", "日本"];

/// Writes the benchmark file unless one of the right size is already there.
fn ensure_file(path: &Path) {
    if fs::metadata(path).is_ok_and(|m| m.len() == FILE_BYTES) {
        eprintln!("reusing {}", path.display());
        return;
    }
    eprintln!("writing {} ({} MiB)…", path.display(), FILE_BYTES >> 20);
    let started = Instant::now();
    let partial = path.with_extension("partial");
    let mut out = BufWriter::with_capacity(8 << 20, File::create(&partial).unwrap());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let mut line = String::with_capacity(256);
    let mut written = 0u64;
    let mut n = 0u64;
    loop {
        n += 1;
        line.clear();
        write!(line, "{n:08}").unwrap();
        let target = 8 + rng.below(142) as usize;
        while line.len() < target {
            line.push(' ');
            let word = if rng.below(100) == 0 {
                NON_ASCII[rng.below(NON_ASCII.len() as u64) as usize]
            } else {
                words[rng.below(words.len() as u64) as usize]
            };
            line.push_str(word);
        }
        let left = FILE_BYTES - written;
        if line.len() as u64 + 1 >= left {
            // The last line fills the file exactly, newline included.
            let last = "x".repeat(left as usize - 1);
            out.write_all(last.as_bytes()).unwrap();
            out.write_all(b"\n").unwrap();
            break;
        }
        out.write_all(line.as_bytes()).unwrap();
        out.write_all(b"\n").unwrap();
        written += line.len() as u64 + 1;
    }
    out.into_inner().unwrap().sync_all().unwrap();
    fs::rename(&partial, path).unwrap();
    eprintln!("written in {:.1?} ({n} lines)", started.elapsed());
}

/// Waits until the file is older than the daemon's racy window (2 s): only then is a version
/// it computes trusted on the file's fingerprint, so that warm reads do not hash again.
fn let_settle(path: &Path) {
    let modified = fs::metadata(path).unwrap().modified().unwrap();
    let age = SystemTime::now().duration_since(modified).unwrap_or_default();
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(age));
}

/// Reads the whole file (warms the page cache); returns its length.
fn read_through(path: &Path) -> u64 {
    let mut file = File::open(path).unwrap();
    let mut buf = vec![0u8; 16 << 20];
    let mut total = 0;
    loop {
        let n = file.read(&mut buf).unwrap();
        if n == 0 {
            return total;
        }
        total += n as u64;
    }
}

/// The simplest correct program: read it all, split it into lines, take the window.
fn naive_window(path: &Path, offset: u64, limit: u64) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let start = (offset - 1) as usize;
    let end = (start + limit as usize).min(lines.len());
    lines[start..end].iter().map(|l| l.to_string()).collect()
}

// ----- Outside programs ----------------------------------------------------------------------

/// Median wall time of `RUNS` runs of a command, and its last output.
fn time_process(command: &mut Command) -> (Duration, String) {
    let mut times = Vec::new();
    let mut stdout = String::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let out = command.output().unwrap();
        times.push(t.elapsed());
        assert!(out.status.success(), "{command:?}: {}", String::from_utf8_lossy(&out.stderr));
        stdout = String::from_utf8(out.stdout).unwrap();
    }
    (median(&times), stdout)
}

/// `/proc/loadavg`'s three load averages: other work on the machine skews every figure.
fn loadavg() -> String {
    let text = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn machine() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "nproc {cores}, memory {:.1} GiB, CPU {model}, Linux {}",
        memory_kib as f64 / (1024.0 * 1024.0),
        kernel.trim()
    )
}

// ----- The daemon, in this process -----------------------------------------------------------

struct InProc {
    socket: PathBuf,
    _dir: tempfile::TempDir,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<()>,
}

impl InProc {
    fn start(runtime: &tokio::runtime::Runtime) -> InProc {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("filectx.sock");
        let bound = listen::bind(&socket, FolderPolicy::AsGiven).unwrap();
        let config =
            filectx_daemon::Config { shutdown_grace: Duration::from_millis(500), ..Default::default() };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = runtime.spawn(async move {
            let listener = tokio::net::UnixListener::from_std(bound.listener).unwrap();
            filectx_daemon::run(listener, config, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
            drop(bound.guard);
        });
        InProc { socket, _dir: dir, stop, served }
    }

    fn stop(self, runtime: &tokio::runtime::Runtime) {
        let _ = self.stop.send(());
        runtime.block_on(self.served).unwrap();
    }
}

/// A hand-framed JSON-RPC client with a buffered reader.
struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    body: Vec<u8>,
    last_body_bytes: usize,
}

impl Client {
    fn connect(socket: &Path, root: &Path) -> Client {
        let deadline = Instant::now() + Duration::from_secs(10);
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(stream) => break stream,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("connect {}: {e}", socket.display()),
            }
        };
        let mut client = Client {
            reader: BufReader::with_capacity(1 << 20, stream.try_clone().unwrap()),
            writer: stream,
            next_id: 1,
            body: Vec::new(),
            last_body_bytes: 0,
        };
        client.call("initialize", json!({"roots": [root], "clientInfo": {"name": "large-file-bench"}}));
        client
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let frame = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        self.writer.write_all(frame.as_bytes()).unwrap();
        id
    }

    /// Reads one frame's body into `self.body`.
    fn recv(&mut self) {
        let mut length = None;
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.reader.read_line(&mut line).unwrap() > 0, "the daemon closed the connection");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some(n) = header.strip_prefix("Content-Length: ") {
                length = Some(n.parse::<usize>().unwrap());
            }
        }
        let length = length.expect("a Content-Length header");
        self.body.resize(length, 0);
        self.reader.read_exact(&mut self.body).unwrap();
        self.last_body_bytes = length;
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            self.recv();
            let mut frame: Value = serde_json::from_slice(&self.body).unwrap();
            if frame["id"] == json!(id) {
                assert!(frame.get("error").is_none(), "{method}: {frame}");
                return frame["result"].take();
            }
        }
    }

    /// `file/read`, parsed into its typed result (as a client would).
    fn read(&mut self, path: &Path, offset: u64, limit: u64) -> ReadResult {
        let id = self.send("file/read", json!({"path": path, "offset": offset, "limit": limit}));
        loop {
            self.recv();
            let response: ReadResponse = serde_json::from_slice(&self.body).unwrap();
            if response.id == Some(id) {
                assert!(response.error.is_none(), "file/read: {:?}", response.error);
                return response.result.unwrap();
            }
        }
    }
}

/// A `file/read` response (or any other frame, which has no matching id).
#[derive(serde::Deserialize)]
struct ReadResponse {
    id: Option<u64>,
    result: Option<ReadResult>,
    error: Option<Value>,
}

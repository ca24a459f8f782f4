//! Floors (issue 18): every hot path measured against the server no design can beat, in the
//! same run. The floor server frames exactly as filectxd does (`Content-Length`), parses each
//! request once with `serde_json`, and answers with the very bytes filectxd gave for that
//! request (captured once, before the measurement), re-stamped with the request's id; one thread
//! per connection, nothing else. Each row alternates filectxd and the floor (`ROUNDS` times
//! each, same clients, same requests) and reports the medians and their ratio.
//!
//! Rows: 50-line `file/read` at 16 sessions and at 1 (reads/s); a 2000-line `read` tool answer
//! (~100 KB) at 1 session (p50); a 100 KB `file/edit` without fsync (p50); a `file/write` under
//! a gate that allows at once (p50); repeated `glob` and `grep` over a 3,000-file tree (p50);
//! 1,000 distinct 5-50 KB files each read once by a fresh daemon, against the floor's round
//! trip plus the same work in-process (`std::fs::read` + `blake3::hash` + cutting the window).

use std::collections::HashMap;
use std::os::unix::net::UnixListener;
use std::sync::atomic::AtomicBool;

use super::*;

/// filectxd / floor alternations per row.
const ROUNDS: usize = 3;
/// Windows of the 50-line pools.
const POOL_WINDOWS: usize = 512;
/// Lines of the large read.
const BIG_WINDOW: u64 = 2_000;
/// Files of the search tree and of the cold reads.
const SEARCH_FILES: usize = 3_000;
const COLD_FILES: usize = 1_000;

/// Requests a session sends, in a form the floor server can look up.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    /// `initialize` params as JSON text (`None`: the suite's default).
    pub init: Option<String>,
    /// Sent (and checked) before the measurement.
    pub setup: Vec<(&'static str, String)>,
    /// (method, params as JSON text).
    pub requests: Vec<(&'static str, String)>,
}

/// Recorded answers: `key(method, params)` → the raw `result` JSON filectxd sent.
pub(crate) type Answers = HashMap<String, Arc<[u8]>>;

fn key(method: &str, params: &Value) -> String {
    let mut k = String::with_capacity(96);
    k.push_str(method);
    k.push('\n');
    let _ = write!(k, "{params}");
    k
}

/// Sends one request in the bench's format and stores filectxd's raw result under its key.
fn record(conn: &mut Conn, answers: &mut Answers, method: &str, params: &str) -> Res<usize> {
    let id = conn.send_with(|id, out| setup_body(id, method, params, out))?;
    loop {
        let range = conn.next_frame()?;
        let body = conn.rx.body(range);
        let value: Value = serde_json::from_slice(body).ctx(|| "parse a frame".into())?;
        if value.get("id").and_then(Value::as_u64) != Some(id) {
            continue;
        }
        if let Some(error) = value.get("error") {
            return Err(format!("{method} {params}: {error}"));
        }
        let prefix = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#);
        let raw = body
            .strip_prefix(prefix.as_bytes())
            .and_then(|r| r.strip_suffix(b"}"))
            .ctx(|| format!("an answer not shaped as expected: {}", String::from_utf8_lossy(body)))?;
        let params: Value = serde_json::from_str(params).ctx(|| "parse params".into())?;
        answers.insert(key(method, &params), Arc::from(raw));
        return Ok(raw.len());
    }
}

/// Records everything `pool` sends, in order, over one fresh session.
fn record_pool(socket: &Path, root: &Path, pool: &Pool, answers: &mut Answers) -> Res<usize> {
    let mut conn = Conn::open(socket, 64 * 1024)?;
    let init = match &pool.init {
        Some(init) => init.clone(),
        None => serde_json::to_string(&init_params(root)).ctx(|| "encode initialize".into())?,
    };
    record(&mut conn, answers, "initialize", &init)?;
    for (method, params) in &pool.setup {
        record(&mut conn, answers, method, params)?;
    }
    let mut biggest = 0;
    for (method, params) in &pool.requests {
        biggest = biggest.max(record(&mut conn, answers, method, params)?);
    }
    Ok(biggest)
}

// ------------------------------------------------------------------------------------------
// The floor server

pub(crate) struct Floor {
    pub socket: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Floor {
    pub fn start(answers: Arc<Answers>) -> Res<Floor> {
        let dir = tempfile::Builder::new().prefix("filectx-floor-").tempdir().ctx(|| "temp folder".into())?;
        let socket = dir.path().join("floor.sock");
        let listener = UnixListener::bind(&socket).ctx(|| format!("bind {}", socket.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("floor-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let answers = answers.clone();
                    let _ = std::thread::Builder::new()
                        .name("floor-conn".into())
                        .stack_size(256 * 1024)
                        .spawn(move || serve(stream, &answers));
                }
            })
            .ctx(|| "spawn the floor server".into())?;
        Ok(Floor { socket, stop, thread: Some(thread), _dir: dir })
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = UnixStream::connect(&self.socket);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One connection: frame, parse, answer with the recorded bytes. Nothing else.
fn serve(mut stream: UnixStream, answers: &Answers) {
    let mut rx = FrameBuf::new(64 * 1024);
    let mut tx = Vec::with_capacity(64 * 1024);
    loop {
        loop {
            let range = match rx.next_frame() {
                Ok(Some(range)) => range,
                Ok(None) => break,
                Err(_) => return,
            };
            let Ok(request) = serde_json::from_slice::<Value>(rx.body(range)) else { return };
            let Some(id) = request.get("id").and_then(Value::as_u64) else { continue };
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            let params = request.get("params").unwrap_or(&Value::Null);
            let mut body_len = 0;
            let mut idbuf = [0u8; 20];
            let id_text = {
                let mut n = id;
                let mut i = idbuf.len();
                loop {
                    i -= 1;
                    idbuf[i] = b'0' + (n % 10) as u8;
                    n /= 10;
                    if n == 0 {
                        break;
                    }
                }
                &idbuf[i..]
            };
            tx.clear();
            match answers.get(&key(method, params)) {
                Some(result) => {
                    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
                    const MID: &[u8] = br#","result":"#;
                    body_len += HEAD.len() + id_text.len() + MID.len() + result.len() + 1;
                    let _ = write!(tx, "Content-Length: {body_len}\r\n\r\n");
                    tx.extend_from_slice(HEAD);
                    tx.extend_from_slice(id_text);
                    tx.extend_from_slice(MID);
                    tx.extend_from_slice(result);
                    tx.push(b'}');
                }
                None => {
                    let body = format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"the floor has no answer recorded for {method}"}}}}"#
                    );
                    frame_into(&mut tx, body.as_bytes());
                }
            }
            if stream.write_all(&tx).is_err() {
                return;
            }
        }
        match stream.read(rx.spare()) {
            Ok(0) | Err(_) => return,
            Ok(n) => rx.filled(n),
        }
    }
}

// ------------------------------------------------------------------------------------------
// Rows

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Operations per second (higher is better; ratio = filectxd / floor).
    Rate,
    /// p50 latency (lower is better; ratio = filectxd / floor).
    P50,
    /// Mean time per operation over a sequence (ratio = filectxd / floor).
    Mean,
}

#[derive(Debug)]
pub(crate) struct Row {
    pub name: String,
    pub unit: Unit,
    pub goal: &'static str,
    /// One figure per round: ops/s or seconds.
    pub filectxd: Vec<f64>,
    pub floor: Vec<f64>,
    /// Daemon CPU per op (µs) per round, filectxd then floor.
    pub cpu: (Vec<f64>, Vec<f64>),
    pub note: String,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

impl Row {
    fn new(name: impl Into<String>, unit: Unit, goal: &'static str) -> Row {
        Row {
            name: name.into(),
            unit,
            goal,
            filectxd: Vec::new(),
            floor: Vec::new(),
            cpu: (Vec::new(), Vec::new()),
            note: String::new(),
        }
    }

    fn push(&mut self, floor: bool, phase: &Phase) {
        let figure = match self.unit {
            Unit::Rate => phase.rate(),
            Unit::P50 => phase.pct(50.0).as_secs_f64(),
            Unit::Mean => phase.latencies.iter().sum::<u64>() as f64 / 1e9 / phase.ops().max(1) as f64,
        };
        if floor {
            self.floor.push(figure);
            self.cpu.1.push(phase.daemon_us_per_op());
        } else {
            self.filectxd.push(figure);
            self.cpu.0.push(phase.daemon_us_per_op());
        }
        eprintln!("    {}: {}", if floor { "floor   " } else { "filectxd" }, phase.summary());
    }

    pub fn ratio(&self) -> f64 {
        median(&self.filectxd) / median(&self.floor).max(1e-12)
    }

    fn fmt(&self, x: f64) -> String {
        match self.unit {
            Unit::Rate => format!("{}/s", thousands(x)),
            Unit::P50 | Unit::Mean => fmt_dur(Duration::from_secs_f64(x)),
        }
    }

    pub fn line(&self) -> String {
        let all = |v: &[f64]| v.iter().map(|x| self.fmt(*x)).collect::<Vec<_>>().join(", ");
        format!(
            "{:<50} {:>12} {:>12} {:>7.2}  goal {:<7} CPU/op {:.0}/{:.0} µs   [filectxd {}; floor {}]{}",
            self.name,
            self.fmt(median(&self.filectxd)),
            self.fmt(median(&self.floor)),
            self.ratio(),
            self.goal,
            median(&self.cpu.0),
            median(&self.cpu.1),
            all(&self.filectxd),
            all(&self.floor),
            if self.note.is_empty() { String::new() } else { format!("  ({})", self.note) }
        )
    }
}

/// Shorter windows than the suite's: each row runs `2 * ROUNDS` of them.
fn row_opts(opts: &Opts) -> Opts {
    let mut o = opts.clone();
    if !opts.quick && std::env::var_os("FILECTX_BENCH_SECONDS").is_none() {
        o.warmup = Duration::from_millis(300);
        o.duration = o.duration.min(Duration::from_millis(1_500));
    }
    o
}

/// Alternates filectxd and the floor, `ROUNDS` each, with `n` sessions doing `work`;
/// `before_filectxd` runs before each round, `after` at its end (a third phase the caller times).
#[allow(clippy::too_many_arguments)]
fn alternate(
    row: &mut Row,
    daemon: &Path,
    floor: &Path,
    root: &Path,
    n: usize,
    opts: &Opts,
    work: &dyn Fn(usize) -> Work,
    before_filectxd: &dyn Fn() -> Res<()>,
    after: &mut dyn FnMut() -> Res<()>,
) -> Res<()> {
    if !wanted(&row.name) {
        return Ok(());
    }
    eprintln!("floors: {} ...", row.name);
    let mode = opts.client_for(n);
    for _ in 0..ROUNDS {
        before_filectxd()?;
        let phase = run_phase(daemon, root, n, mode, opts, work)?;
        row.push(false, &phase);
        let phase = run_phase(floor, root, n, mode, opts, work)?;
        row.push(true, &phase);
        after()?;
    }
    Ok(())
}

/// The p50 of a 100 KB edit's file system work done in this process for `duration`, back and
/// forth between `a` and `b` as the row's edits go: open and `flock` the file, read it whole,
/// compare it with the text last written (the version check), replace the marker, hash the new
/// text (the answer's version), write it to a new staging file in the same folder and rename
/// that over the file; no fsync, as the row's daemon. No transport, no session, no watcher.
fn replace_alone(path: &Path, a: &str, b: &str, duration: Duration) -> Res<Duration> {
    use std::io::{Read, Write};
    let staging = path.with_file_name(".edited_0000.rs.staging");
    let mut last = std::fs::read(path).ctx(|| format!("read {}", path.display()))?;
    let mut times = Vec::new();
    // Where the last round stopped.
    let (mut from, mut to) = if last.windows(a.len()).any(|w| w == a.as_bytes()) { (a, b) } else { (b, a) };
    let start = Instant::now();
    while start.elapsed() < duration {
        let t0 = Instant::now();
        let mut f = std::fs::File::open(path).ctx(|| format!("open {}", path.display()))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive).ctx(|| "flock".into())?;
        let mut bytes = Vec::with_capacity(last.len() + 64);
        f.read_to_end(&mut bytes).ctx(|| format!("read {}", path.display()))?;
        if bytes != last {
            return Err(format!("{} changed under the in-process replace", path.display()));
        }
        let text = std::str::from_utf8(&bytes).ctx(|| "not UTF-8".into())?;
        let at = text.find(from).ok_or_else(|| format!("no {from} in {}", path.display()))?;
        let mut new = String::with_capacity(text.len() - from.len() + to.len());
        new.push_str(&text[..at]);
        new.push_str(to);
        new.push_str(&text[at + from.len()..]);
        std::hint::black_box(blake3::hash(new.as_bytes()));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staging)
            .ctx(|| format!("create {}", staging.display()))?;
        out.write_all(new.as_bytes()).ctx(|| format!("write {}", staging.display()))?;
        drop(out);
        std::fs::rename(&staging, path).ctx(|| format!("rename over {}", path.display()))?;
        drop(f);
        times.push(t0.elapsed());
        last = new.into_bytes();
        std::mem::swap(&mut from, &mut to);
    }
    times.sort();
    Ok(times.get(times.len() / 2).copied().unwrap_or_default())
}

/// `FILECTX_BENCH_ROWS=word,word`: only the rows whose name holds one of the words (for
/// profiling one path).
fn wanted(name: &str) -> bool {
    match std::env::var("FILECTX_BENCH_ROWS") {
        Ok(words) if !words.trim().is_empty() => words.split(',').any(|w| name.contains(w.trim())),
        _ => true,
    }
}

fn no_prep() -> Res<()> {
    Ok(())
}

pub(crate) fn workload(opts: &Opts, base: &Path, reads: &ReadSet) -> Res<Vec<Row>> {
    let ropts = row_opts(opts);
    let mut rows = Vec::new();
    let mut rng = Rng::new(18_000);

    // --- Reads: 50-line windows (16 sessions, 1 session) and a 2000-line read tool answer.
    {
        let daemon = Daemon::start(filectx_daemon::Config::default(), "floor-reads")?;
        warm_and_validate(&daemon, reads)?;
        let mut small = Pool::default();
        for _ in 0..POOL_WINDOWS {
            let file = &reads.files[rng.below(reads.files.len() as u64) as usize];
            let offset = 1 + rng.below(file.lines - WINDOW + 1);
            small.requests.push((
                "file/read",
                format!(r#"{{"path":{},"offset":{offset},"limit":{WINDOW}}}"#, file.path_json),
            ));
        }
        let root_json = serde_json::to_string(&reads.root).ctx(|| "encode a path".into())?;
        let mut big = Pool {
            init: Some(format!(
                r#"{{"roots":[{root_json}],"clientInfo":{{"name":"suite-bench"}},"readMaxBytes":262144}}"#
            )),
            ..Pool::default()
        };
        for _ in 0..64 {
            let file = &reads.files[rng.below(reads.files.len() as u64) as usize];
            let offset = 1 + rng.below(file.lines.saturating_sub(BIG_WINDOW) + 1);
            big.requests.push((
                "tools/call",
                format!(
                    r#"{{"name":"read","arguments":{{"file_path":{},"offset":{offset},"limit":{BIG_WINDOW}}}}}"#,
                    file.path_json
                ),
            ));
        }
        let mut answers = Answers::new();
        record_pool(&daemon.socket, &reads.root, &small, &mut answers)?;
        let big_bytes = record_pool(&daemon.socket, &reads.root, &big, &mut answers)?;
        let floor = Floor::start(Arc::new(answers))?;
        let small = Arc::new(small);
        let big = Arc::new(big);
        let read_rows = |row: &mut Row, n: usize, work: &dyn Fn(usize) -> Work| {
            alternate(
                row,
                &daemon.socket,
                &floor.socket,
                &reads.root,
                n,
                &ropts,
                work,
                &no_prep,
                &mut no_prep,
            )
        };

        let mut row = Row::new("50-line file/read, 16 sessions (reads/s)", Unit::Rate, "≥ 0.5");
        let work = |s: usize| Work::Pool(small.clone(), Some(Rng::new(500 + s as u64)), 0);
        read_rows(&mut row, 16, &work)?;
        rows.push(row);

        let mut row = Row::new("50-line file/read, 1 session (reads/s)", Unit::Rate, "≥ 0.6");
        read_rows(&mut row, 1, &work)?;
        rows.push(row);

        let mut row = Row::new("2000-line read tool, 1 session (p50)", Unit::P50, "≤ 1.5");
        row.note = format!("largest answer {} KB", big_bytes / 1000);
        let work = |s: usize| Work::Pool(big.clone(), Some(Rng::new(900 + s as u64)), 0);
        read_rows(&mut row, 1, &work)?;
        rows.push(row);
        drop(floor);
        daemon.stop()?;
    }

    // --- A 100 KB edit without fsync, back and forth (the file regenerated before each filectxd
    // round so that it starts from the recorded state).
    {
        let mut config = filectx_daemon::Config::default();
        config.files.fsync = false;
        let daemon = Daemon::start(config, "floor-edits")?;
        let dir = base.join("floor-edits");
        let files = gen_edit_files(&dir, 1)?;
        let file = &files[0];
        let edit = |old: &str, new: &str| {
            ("file/edit", format!(r#"{{"path":{},"oldString":"{old}","newString":"{new}"}}"#, file.path_json))
        };
        let pool = Pool {
            init: None,
            setup: vec![("file/read", format!(r#"{{"path":{},"offset":1,"limit":1}}"#, file.path_json))],
            requests: vec![edit(&file.marker_a, &file.marker_b), edit(&file.marker_b, &file.marker_a)],
        };
        let mut answers = Answers::new();
        record_pool(&daemon.socket, &dir, &pool, &mut answers)?;
        let floor = Floor::start(Arc::new(answers))?;
        let pool = Arc::new(pool);
        let mut row = Row::new("100 KB file/edit, fsync off, 1 session (p50)", Unit::P50, "≤ 300µs");
        let work = |_| Work::Pool(pool.clone(), None, 0);
        let reset = || gen_edit_files(&dir, 1).map(|_| ());
        // Each round also times the edit's file system work alone, in this process, right
        // after that round's filectxd and floor phases: the floor of the work itself, which
        // this machine's file system sets (see BENCHMARKS.md, "The 100 KB edit").
        // In a folder of its own, which the daemon does not watch.
        let mut alone = Vec::new();
        let alone_dir = base.join("floor-edits-alone");
        std::fs::create_dir_all(&alone_dir).ctx(|| format!("create {}", alone_dir.display()))?;
        let replaced = alone_dir.join("edited_0000.rs");
        std::fs::copy(dir.join("edited_0000.rs"), &replaced)
            .ctx(|| format!("copy to {}", replaced.display()))?;
        let mut each_round = || -> Res<()> {
            let p50 = replace_alone(&replaced, &file.marker_a, &file.marker_b, ropts.duration)?;
            eprintln!("    in-process replace: p50 {}", fmt_dur(p50));
            alone.push(p50.as_secs_f64());
            Ok(())
        };
        alternate(&mut row, &daemon.socket, &floor.socket, &dir, 1, &ropts, &work, &reset, &mut each_round)?;
        if !alone.is_empty() {
            row.note = format!(
                "the edit's file system work alone, in-process: p50 {} [{}]",
                fmt_dur(Duration::from_secs_f64(median(&alone))),
                alone.iter().map(|x| fmt_dur(Duration::from_secs_f64(*x))).collect::<Vec<_>>().join(", ")
            );
        }
        rows.push(row);
        drop(floor);
        daemon.stop()?;
    }

    // --- A write under a gate that allows at once.
    {
        let daemon = Daemon::start(filectx_daemon::Config::default(), "floor-gate")?;
        let dir = base.join("floor-gate");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("gated")).ctx(|| "create the gated folder".into())?;
        let path = dir.join("gated/notes.txt");
        let text = |c: char| format!("{}\n", c.to_string().repeat(60)).repeat(64);
        let reset = || std::fs::write(&path, text('b')).ctx(|| "write the gated file".into());
        reset()?;
        let path_json = serde_json::to_string(&path).ctx(|| "encode a path".into())?;
        let gate = start_gate(&daemon.socket, &dir)?;
        let write =
            |c: char| ("file/write", format!(r#"{{"path":{path_json},"content":{}}}"#, Value::from(text(c))));
        let pool = Pool {
            init: None,
            setup: vec![("file/read", format!(r#"{{"path":{path_json},"offset":1,"limit":1}}"#))],
            requests: vec![write('a'), write('b')],
        };
        let mut answers = Answers::new();
        record_pool(&daemon.socket, &dir, &pool, &mut answers)?;
        let floor = Floor::start(Arc::new(answers))?;
        let pool = Arc::new(pool);
        let mut row = Row::new("4 KB file/write under an allowing gate (p50)", Unit::P50, "-");
        let work = |_| Work::Pool(pool.clone(), None, 0);
        alternate(&mut row, &daemon.socket, &floor.socket, &dir, 1, &ropts, &work, &reset, &mut no_prep)?;
        row.note = format!("{} intents allowed", gate.load(Ordering::Relaxed));
        rows.push(row);
        drop(floor);
        daemon.stop()?;
    }

    // --- Repeated glob and grep over a 3,000-file tree.
    {
        let tree = gen_scale_files(&base.join(format!("floor-search-{SEARCH_FILES}")), SEARCH_FILES)?;
        let daemon = Daemon::start(filectx_daemon::Config::default(), "floor-search")?;
        let root_json = serde_json::to_string(&tree.root).ctx(|| "encode a path".into())?;
        let init = format!(
            r#"{{"roots":[{root_json}],"clientInfo":{{"name":"suite-bench"}},"tools":["read","glob","grep"]}}"#
        );
        for (name, args) in [
            ("glob", format!(r#"{{"pattern":"**/f020?7.rs","path":{root_json}}}"#)),
            ("grep", format!(r#"{{"pattern":"fn item_4242","path":{root_json}}}"#)),
        ] {
            let pool = Pool {
                init: Some(init.clone()),
                setup: Vec::new(),
                requests: vec![("tools/call", format!(r#"{{"name":"{name}","arguments":{args}}}"#))],
            };
            // Warm the listing (and, for grep, let the trigram filters be built) before recording.
            let mut answers = Answers::new();
            for _ in 0..3 {
                record_pool(&daemon.socket, &tree.root, &pool, &mut answers)?;
                std::thread::sleep(Duration::from_millis(300));
            }
            let answer_bytes = answers.values().map(|a| a.len()).max().unwrap_or(0);
            if let Some(answer) = answers.iter().find(|(k, _)| k.starts_with("tools/call")).map(|(_, a)| a) {
                let text = String::from_utf8_lossy(&answer[..answer.len().min(240)]).into_owned();
                eprintln!("  {name} answers: {text} ...");
            }
            let floor = Floor::start(Arc::new(answers))?;
            let pool = Arc::new(pool);
            let mut row = Row::new(
                format!("repeated {name} over {SEARCH_FILES} files, 1 session (p50)"),
                Unit::P50,
                "-",
            );
            row.note = format!("answer {answer_bytes} B");
            let work = |_| Work::Pool(pool.clone(), None, 0);
            alternate(
                &mut row,
                &daemon.socket,
                &floor.socket,
                &tree.root,
                1,
                &ropts,
                &work,
                &no_prep,
                &mut no_prep,
            )?;
            rows.push(row);
        }
        daemon.stop()?;
    }

    // --- 1,000 distinct files read once each by a fresh daemon.
    if wanted("cold") {
        rows.push(cold_reads(base)?);
    }

    // --- What a server that works before answering pays on this machine for the same bytes.
    for size in [1024, 80 * 1024] {
        let name =
            format!("wake-up: {} KiB answer after {WORK_US} µs of work, less the work (p50)", size / 1024);
        if wanted(&name) {
            rows.push(wake_up(name, size, &ropts)?);
        }
    }
    rows.retain(|row| !row.filectxd.is_empty());
    Ok(rows)
}

/// How long the server of the wake-up rows works (spins) before each answer: more than the
/// floor server ever takes, less than filectxd's cold read or 2000-line answer.
const WORK_US: u64 = 40;

/// The transport's cost for a server that works before it answers, against one that answers at
/// once, same bytes, same socket: in the "filectxd" column a bare server (a thread, a Unix
/// socket pair, a prepared answer of `size` bytes) that spins [`WORK_US`] µs before each answer,
/// its round trip less those µs; in the "floor" column the same server answering at once. The
/// floor server answers within a few µs, filectxd's cold reads and long answers after tens: on
/// a virtual machine whose idle CPUs halt at once (`haltpoll` with `guest_halt_poll_ns` 0), the
/// client's CPU may be asleep when a late answer comes, and waking it is paid by the late
/// server only. This row shows how much of that this machine charges in the same run.
fn wake_up(name: String, size: usize, opts: &Opts) -> Res<Row> {
    let mut row = Row::new(name, Unit::P50, "—");
    eprintln!("floors: {} ...", row.name);
    row.note = "bare servers, no filectxd; CPU not measured".to_owned();
    for _ in 0..ROUNDS {
        for work in [Duration::from_micros(WORK_US), Duration::ZERO] {
            let p50 = answer_after(work, size, opts.duration)?;
            if work.is_zero() { &mut row.floor } else { &mut row.filectxd }.push(p50.as_secs_f64());
        }
    }
    Ok(row)
}

/// The p50 round trip, less `work`, of one-byte requests answered with `size` bytes by a
/// thread that spins `work` before each answer, over `duration`.
fn answer_after(work: Duration, size: usize, duration: Duration) -> Res<Duration> {
    use std::io::{Read, Write};
    let (mut client, mut server) = UnixStream::pair().ctx(|| "socket pair".into())?;
    let answering = std::thread::spawn(move || {
        let answer = vec![b'x'; size];
        let mut request = [0u8; 1];
        while server.read_exact(&mut request).is_ok() {
            let start = Instant::now();
            while start.elapsed() < work {
                std::hint::spin_loop();
            }
            if server.write_all(&answer).is_err() {
                break;
            }
        }
    });
    let mut answer = vec![0u8; size];
    let mut times = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration {
        let t0 = Instant::now();
        client.write_all(b"q").ctx(|| "send".into())?;
        client.read_exact(&mut answer).ctx(|| "receive".into())?;
        times.push(t0.elapsed().saturating_sub(work));
    }
    drop(client);
    answering.join().map_err(|_| "the answering thread panicked".to_owned())?;
    times.sort();
    Ok(times.get(times.len() / 2).copied().unwrap_or_default())
}

/// A gate session on `dir` that allows every intent at once; counts them.
fn start_gate(socket: &Path, dir: &Path) -> Res<Arc<AtomicUsize>> {
    let mut conn = Conn::open(socket, 64 * 1024)?;
    conn.initialize(dir)?;
    let mut register = json!({"paths": [dir.join("gated")], "name": "bench"});
    // The daemon's gate token, next to its socket (absent for a daemon that keeps none).
    if let Ok(token) = std::fs::read_to_string(filectx_tests::gate_token_file(socket)) {
        register["gateToken"] = json!(token.trim());
    }
    conn.call("gate/register", &register)?;
    let allowed = Arc::new(AtomicUsize::new(0));
    let count = allowed.clone();
    std::thread::Builder::new()
        .name("bench-gate".into())
        .spawn(move || {
            let _ = conn.stream.set_read_timeout(None);
            while let Ok(range) = conn.next_frame() {
                let Ok(frame) = serde_json::from_slice::<Value>(conn.rx.body(range)) else { return };
                if frame.get("method").and_then(Value::as_str) != Some("gate/writeIntent") {
                    continue;
                }
                let reply = json!({"jsonrpc": "2.0", "id": frame["id"], "result": {"allow": true}});
                let Ok(body) = serde_json::to_vec(&reply) else { return };
                frame_into(&mut conn.tx, &body);
                if conn.stream.write_all(&conn.tx).is_err() {
                    return;
                }
                count.fetch_add(1, Ordering::Relaxed);
            }
        })
        .ctx(|| "spawn the gate".into())?;
    Ok(allowed)
}

/// 1,000 distinct 5-50 KB files, a 50-line window of each read once, by a fresh daemon each
/// round; the floor is the floor server's round trip for the same requests plus the same work
/// done in-process (`std::fs::read`, `blake3::hash`, cutting the window), timed together.
fn cold_reads(base: &Path) -> Res<Row> {
    let dir = base.join(format!("floor-cold-{COLD_FILES}"));
    let made = generate(&dir, COLD_FILES, |i| {
        let mut rng = Rng::new(70_000 + i as u64);
        let size = 5 * 1024 + rng.below(45 * 1024) as usize;
        let mut text = String::with_capacity(size + 200);
        let lines = source_like(&mut rng, &mut text, size);
        (PathBuf::from(format!("c{:02}/cold{i:04}.rs", i / 50)), text, lines)
    })?;
    let files = made.iter().map(|(p, l)| read_file_entry(p, *l)).collect::<Res<Vec<_>>>()?;
    let requests: Vec<String> =
        files.iter().map(|f| format!(r#"{{"path":{},"offset":1,"limit":{WINDOW}}}"#, f.path_json)).collect();
    // Let the files age past the racy window, as a checkout has.
    std::thread::sleep(Duration::from_millis(2_500));
    let mut answers = Answers::new();
    {
        let daemon = Daemon::start(filectx_daemon::Config::default(), "floor-cold-record")?;
        let mut conn = Conn::open(&daemon.socket, 64 * 1024)?;
        let init = serde_json::to_string(&init_params(&dir)).ctx(|| "encode initialize".into())?;
        record(&mut conn, &mut answers, "initialize", &init)?;
        for r in &requests {
            record(&mut conn, &mut answers, "file/read", r)?;
        }
        drop(conn);
        daemon.stop()?;
    }
    let floor = Floor::start(Arc::new(answers))?;
    let mut row =
        Row::new(format!("{COLD_FILES} cold 5-50 KB files, 50-line read each (mean)"), Unit::Mean, "≤ 1.5");
    eprintln!("floors: {} ...", row.name);
    let run = |socket: &Path, work: bool| -> Res<Phase> {
        let mut conn = Conn::open(socket, 64 * 1024)?;
        let init = serde_json::to_string(&init_params(&dir)).ctx(|| "encode initialize".into())?;
        let id = conn.send_with(|id, out| setup_body(id, "initialize", &init, out))?;
        conn.recv_value(id)?;
        let mut out = ClientOut::default();
        let a = cpu_sample();
        let start = Instant::now();
        let cpu0 = thread_cpu_ns();
        for (file, params) in files.iter().zip(&requests) {
            let t0 = Instant::now();
            if work {
                let bytes = std::fs::read(&file.path).ctx(|| format!("read {}", file.path))?;
                let hash = blake3::hash(&bytes);
                let end = memchr_nth(&bytes, b'\n', WINDOW as usize);
                let window = std::str::from_utf8(&bytes[..end]).ctx(|| "not UTF-8".into())?;
                let lines: Vec<&str> = window.lines().collect();
                std::hint::black_box((hash, lines));
            }
            let id = conn.send_with(|id, out| setup_body(id, "file/read", params, out))?;
            conn.recv_ok(id)?;
            out.latencies.push(t0.elapsed().as_nanos() as u64);
        }
        let end = Instant::now();
        out.cpu_ns = if work { 0 } else { thread_cpu_ns().saturating_sub(cpu0) };
        let b = cpu_sample();
        Ok(Phase::new(out, Window { start, end }, cpu_span(a, b)))
    };
    for _ in 0..ROUNDS {
        let daemon = Daemon::start(filectx_daemon::Config::default(), "floor-cold")?;
        let phase = run(&daemon.socket, false)?;
        daemon.stop()?;
        row.push(false, &phase);
        let phase = run(&floor.socket, true)?;
        row.push(true, &phase);
    }
    Ok(row)
}

/// The offset just past the `n`th `needle` (or the end).
fn memchr_nth(bytes: &[u8], needle: u8, n: usize) -> usize {
    let mut seen = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b == needle {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    bytes.len()
}

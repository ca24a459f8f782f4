//! Budgets against hostile clients, through the real socket: the bytes of a batch's response,
//! the outgoing queue in bytes (per connection, daemon-wide, streams included), the
//! `initialize` deadline, the stalled-frame timeout and the daemon-wide budget of
//! half-received frames. Every test asserts what was answered and how many bytes or requests
//! the daemon took in, never how long anything took; every wait is bounded.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, PATIENCE, Raw, error_code, wait_for_sessions};
use serde_json::{Value, json};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

fn s(path: &Path) -> String {
    path.display().to_string()
}

/// A file of `lines` lines of `width` characters (plus the newline).
fn write_lines(path: &Path, lines: usize, width: usize) {
    let mut text = String::with_capacity(lines * (width + 1));
    for n in 0..lines {
        let head = format!("{n:08} ");
        text.push_str(&head);
        text.extend(std::iter::repeat_n('x', width - head.len()));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// A session that watches the daemon-wide `requests` count (every request admitted by any
/// connection's reader), leaving out its own status calls.
struct Observer {
    raw: Raw,
    polls: u64,
}

impl Observer {
    fn new(daemon: &Daemon) -> Self {
        Self { raw: daemon.session(), polls: 0 }
    }

    /// Requests admitted by the daemon, not counting this observer's polls.
    fn requests(&mut self) -> u64 {
        let n = self.raw.call("daemon/status", None)["requests"].as_u64().unwrap();
        self.polls += 1;
        n - self.polls
    }

    /// [`Observer::requests`] once it has not moved for five polls in a row (at most
    /// [`PATIENCE`]).
    fn settled(&mut self) -> u64 {
        let deadline = Instant::now() + PATIENCE;
        let (mut last, mut same) = (self.requests(), 0);
        while same < 5 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            let n = self.requests();
            if n == last {
                same += 1;
            } else {
                (last, same) = (n, 0);
            }
        }
        last
    }
}

/// Writes frames without reading anything back; the daemon may stop reading, so the writes are
/// bounded by a timeout and what could not be written is dropped. Returns the bytes written.
fn write_without_reading(raw: &mut Raw, bytes: &[u8]) -> usize {
    raw.stream.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut written = 0;
    while written < bytes.len() {
        match raw.stream.write(&bytes[written..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n,
        }
    }
    raw.stream.set_write_timeout(None).unwrap();
    written
}

fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(body.as_bytes());
    frame
}

fn read_text(id: u64, path: &Path) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "fs/readText", "params": {"path": s(path)}})
}

// ---------------------------------------------------------------------------------------------
// 10. Batches
// ---------------------------------------------------------------------------------------------

/// A batch of three 400 KB reads and seven writes under a 1 MiB response budget, two requests at
/// a time: the first two reads are answered; every later entry gets -32010 naming the budget,
/// in order; the entries the daemon had not started by then were not run (their files do not
/// exist), which shows the entries were started a permit at a time, not all at once. Then a
/// 40-entry batch (twenty times the concurrency limit) is answered whole.
#[test]
fn a_batch_response_stops_at_its_byte_budget_and_entries_share_the_concurrency_limit() {
    let daemon = Daemon::start(&["--max-batch-response-bytes", "1048576", "--max-concurrent-requests", "2"]);
    let big = daemon.dir.path().join("big.txt");
    write_lines(&big, 2000, 200);
    let mut raw = daemon.session();

    let mut batch: Vec<Value> = (1..=3).map(|id| read_text(id, &big)).collect();
    for id in 4..=10u64 {
        let path = daemon.dir.path().join(format!("w{id}.txt"));
        batch.push(json!({"jsonrpc": "2.0", "id": id, "method": "fs/writeText",
            "params": {"path": s(&path), "content": "written\n", "expect": {"kind": "any"}}}));
    }
    raw.send(&json!(batch));
    let Some(response) = raw.recv_within(PATIENCE) else { panic!("no answer; log:\n{}", daemon.log_text()) };
    let entries = response.as_array().unwrap_or_else(|| panic!("not a batch response: {response:.200}"));
    let ids: Vec<u64> = entries.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (1..=10).collect::<Vec<_>>(), "every entry answered, in order");

    let answered: Vec<u64> =
        entries.iter().filter(|e| e.get("result").is_some()).map(|e| e["id"].as_u64().unwrap()).collect();
    assert_eq!(answered, [1, 2], "two 400 KB responses fit in 1 MiB, a third does not");
    let mut not_run = 0;
    for entry in &entries[2..] {
        assert_eq!(error_code(entry), -32010, "{entry}");
        let message = entry["error"]["message"].as_str().unwrap();
        assert!(message.contains("1048576"), "the message names the budget: {message}");
        assert_eq!(entry["error"]["data"]["limit"], 1_048_576);
        let ran = entry["error"]["data"]["ran"].as_bool().unwrap();
        let id = entry["id"].as_u64().unwrap();
        if id >= 4 {
            let exists = daemon.dir.path().join(format!("w{id}.txt")).exists();
            assert_eq!(exists, ran, "entry {id}: written exactly when reported as run");
        }
        not_run += usize::from(!ran);
    }
    let bytes = response.to_string().len();
    println!("batch: answered {answered:?}, 8 entries -32010 ({not_run} not run), response {bytes} bytes");
    assert!(not_run >= 4, "{not_run} entries past the budget were not run");
    assert!(bytes <= MIB + 8 * 400, "the response is {bytes} bytes");

    // Larger than the concurrency limit: no deadlock, every entry answered in order.
    let small = daemon.dir.path().join("small.txt");
    std::fs::write(&small, "one\n").unwrap();
    let batch: Vec<Value> = (100..140).map(|id| read_text(id, &small)).collect();
    raw.send(&json!(batch));
    let response = raw.recv();
    let entries = response.as_array().unwrap();
    assert_eq!(entries.len(), 40);
    for (entry, id) in entries.iter().zip(100..) {
        assert_eq!(entry["id"], id);
        assert_eq!(entry["result"]["lines"], json!(["one"]), "{entry}");
    }
}

// ---------------------------------------------------------------------------------------------
// 11. Clients that never read
// ---------------------------------------------------------------------------------------------

/// 100 pipelined reads of 200 KB each, never read, against a 1 MiB per-connection budget: the
/// daemon admits only about what fits in the budget (plus the kernel's socket buffer and the
/// two calls in flight) and stops reading the connection; once the client reads, all 100 are
/// answered in full.
#[test]
fn a_client_that_never_reads_holds_at_most_its_byte_budget() {
    let daemon = Daemon::start(&["--max-queued-bytes", "1048576", "--max-concurrent-requests", "2"]);
    let file = daemon.dir.path().join("file.txt");
    write_lines(&file, 2000, 100);
    let mut observer = Observer::new(&daemon);
    let mut flooder = daemon.session();
    let before = observer.settled();

    let flood: Vec<u8> = (1000..1100).flat_map(|id| frame(&read_text(id, &file))).collect();
    let written = write_without_reading(&mut flooder, &flood);
    assert_eq!(written, flood.len(), "100 small requests fit in the socket buffer");
    let admitted = observer.settled() - before;
    println!("a client that never reads: {admitted} of 100 pipelined 200 KB reads admitted");
    assert!(admitted >= 2, "{admitted}");
    assert!(admitted <= 30, "{admitted} of 100 reads admitted for a client that reads nothing");

    let mut answered = BTreeMap::new();
    while answered.len() < 100 {
        let response = flooder.recv();
        let lines = response["result"]["lines"].as_array().map_or(0, Vec::len);
        answered.insert(response["id"].as_u64().unwrap(), lines);
    }
    assert_eq!(answered.keys().copied().collect::<Vec<_>>(), (1000..1100).collect::<Vec<_>>());
    assert!(answered.values().all(|&lines| lines == 2000), "every read answered in full");
}

/// Eight `fs/streamText` subscriptions on a 6 MB file that nobody reads, against a 1 MiB
/// per-connection budget. While the client does not read, the file is changed in place: a chunk
/// cut after that ends its stream with `FS_STALE_VERSION`, so the chunks delivered before the
/// errors are exactly those the daemon had cut while nobody read — what it held.
#[test]
fn streams_nobody_reads_are_held_to_the_connection_budget() {
    let daemon = Daemon::start(&["--max-queued-bytes", "1048576"]);
    let file = daemon.dir.path().join("stream.txt");
    // Over the 4 MiB mapping threshold, so an in-place change is seen by the next chunk.
    write_lines(&file, 30_000, 200);
    let mut raw = daemon.session();
    let mut subs = Vec::new();
    for _ in 0..8 {
        let id = raw.send_request("fs/streamText", Some(json!({"path": s(&file), "chunkLines": 1000})));
        loop {
            let frame = raw.recv();
            if frame["id"] == json!(id) {
                subs.push(frame["result"].clone());
                break;
            }
        }
    }
    // Read nothing; let the daemon cut whatever it will.
    std::thread::sleep(Duration::from_millis(1500));
    let handle = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    handle.write_all_at(b"CHANGED!", 0).unwrap();

    let (mut held_chunks, mut held_bytes, mut ended) = (0usize, 0usize, 0usize);
    while ended < subs.len() {
        let frame = raw.recv();
        assert_eq!(frame["method"], "fs/textChunk", "{frame:.300}");
        let chunk = &frame["params"]["result"];
        if chunk["done"] == true {
            ended += 1;
            if chunk["error"].is_object() {
                assert_eq!(chunk["error"]["code"], "FS_STALE_VERSION", "{chunk:.300}");
            }
        } else {
            held_chunks += 1;
            held_bytes += frame.to_string().len();
        }
    }
    println!("8 unread streams: {held_chunks} chunks ({held_bytes} bytes) cut while nobody read");
    // Budget (1 MiB) + the kernel's socket buffer + one chunk in hand: about ten 200 KB chunks.
    assert!(
        held_chunks <= 20,
        "{held_chunks} chunks ({held_bytes} bytes) held for a client that reads nothing"
    );
}

/// Six sockets that never read pipeline 30 reads of 200 KB each; the daemon-wide budget is
/// 2 MiB over 8 connections (a guaranteed 256 KiB each), the per-connection one the default 8 MiB.
/// The daemon admits only a few of the 180 reads (the per-connection budget alone would admit
/// them all), and an honest session's 20 reads are all answered meanwhile.
#[test]
fn many_sockets_that_never_read_cannot_pin_memory_or_crowd_out_an_honest_client() {
    let daemon = Daemon::start(&[
        "--max-total-queued-bytes",
        "2097152",
        "--max-connections",
        "8",
        "--max-concurrent-requests",
        "2",
    ]);
    let file = daemon.dir.path().join("file.txt");
    write_lines(&file, 2000, 100);
    let small = daemon.dir.path().join("small.txt");
    write_lines(&small, 100, 100);
    let mut observer = Observer::new(&daemon);
    // The readiness probe's slot must be free before all eight are taken.
    wait_for_sessions(&mut observer.raw, 1);
    let mut hostile: Vec<Raw> = (0..6).map(|_| daemon.session()).collect();
    let before = observer.settled();
    for raw in &mut hostile {
        let flood: Vec<u8> = (1..=30).flat_map(|id| frame(&read_text(id, &file))).collect();
        assert_eq!(write_without_reading(raw, &flood), flood.len());
    }
    let admitted = observer.settled() - before;

    let mut honest = daemon.session();
    for _ in 0..20 {
        let response = honest.request("fs/readText", Some(json!({"path": s(&small)})));
        assert_eq!(response["result"]["lines"].as_array().map(Vec::len), Some(100), "{response:.300}");
    }
    println!("6 sockets that never read: {admitted} of 180 reads admitted; the honest session got 20 of 20");
    assert!(admitted <= 60, "{admitted} of 180 reads admitted for sockets that read nothing");
    drop(hostile);
}

// ---------------------------------------------------------------------------------------------
// 14. Slow clients
// ---------------------------------------------------------------------------------------------

/// At `--max-connections 4`, two silent sockets, one that floods requests before `initialize`
/// without reading their answers, and one idle initialized session take every slot. The silent
/// ones are told (-32002) and closed at the `initialize` deadline, and so is the flooder; then a
/// real client gets in, and the initialized session, idle for longer than the deadline, is
/// served.
#[test]
fn silent_connections_are_closed_at_the_initialize_deadline() {
    let daemon = Daemon::start(&["--max-connections", "4", "--initialize-timeout", "1"]);
    let mut idle = daemon.session();
    // The readiness probe's connection holds a slot until its task has ended: wait for that
    // before taking the last three (under load it could still count, and refuse one).
    wait_for_sessions(&mut idle, 1);
    let mut silent: Vec<Raw> = (0..2).map(|_| Raw::connect(&daemon.socket)).collect();
    let mut flooder = Raw::connect(&daemon.socket);
    let flood: Vec<u8> = (1..=20_000)
        .flat_map(|id| frame(&json!({"jsonrpc": "2.0", "id": id, "method": "daemon/status"})))
        .collect();
    let written = write_without_reading(&mut flooder, &flood);
    assert!(written < flood.len(), "the daemon stopped reading a client that reads nothing");
    let mut answers = 0;
    while let Some(frame) = flooder.recv_opt() {
        assert_eq!(error_code(&frame), -32002, "{frame}");
        answers += 1;
        assert!(answers <= 20_000);
    }
    println!(
        "a flooder before initialize: {written} of {} bytes taken, {answers} answers, then closed",
        flood.len()
    );
    for raw in &mut silent {
        let frame = raw.recv_opt().expect("a last word before the connection is closed");
        assert_eq!(error_code(&frame), -32002, "{frame}");
        assert!(frame["error"]["message"].as_str().unwrap().contains("initialize"), "{frame}");
        assert!(raw.closed());
    }
    // The slots come back as the closed connections' tasks finish.
    wait_for_sessions(&mut idle, 1);
    let mut real = daemon.session();
    assert_eq!(real.call("daemon/status", None)["sessions"], 2);
    assert!(daemon.log_text().contains("initialize not completed in time"));
}

/// A frame whose body stops arriving, and a header section that never ends, close their
/// connections at `--frame-timeout`; another session is unaffected.
#[test]
fn a_frame_that_stops_arriving_closes_its_connection() {
    let daemon = Daemon::start(&["--frame-timeout", "1"]);
    let mut other = daemon.session();
    let mut body = daemon.session();
    body.send_bytes(b"Content-Length: 100\r\n\r\n{\"jsonrpc\"");
    let mut header = daemon.session();
    header.send_bytes(b"Content-Length: 10");
    let frame = body.recv_opt().expect("a last word before the connection is closed");
    assert_eq!(error_code(&frame), -32700, "{frame}");
    assert!(frame["error"]["message"].as_str().unwrap().contains("stopped arriving"), "{frame}");
    assert!(body.closed());
    assert!(header.closed());
    wait_for_sessions(&mut other, 1);
    assert!(daemon.log_text().contains("a frame stopped arriving half-way"));
}

/// Eight sessions each send all but the last byte of a 4 MiB frame, against an 8 MiB daemon-wide
/// budget of half-received bytes: the daemon reads two of them and leaves the rest in the
/// kernel (their writers stall), so it takes in about 8 MiB, not 32. Small requests are served
/// meanwhile, the stalled frames are closed by the frame timeout, and an honest 1 MiB write that
/// waited its turn is done.
#[test]
fn half_received_frames_are_held_to_a_daemon_wide_budget() {
    const FRAME: usize = 4 * MIB;
    let daemon = Daemon::start(&[
        "--max-frame-bytes",
        "4194304",
        "--max-partial-frame-bytes",
        "8388608",
        "--frame-timeout",
        "2",
    ]);
    let mut hostile: Vec<Raw> = (0..8).map(|_| daemon.session()).collect();
    let writers: Vec<_> = hostile
        .iter()
        .map(|raw| {
            let mut stream = raw.stream.try_clone().unwrap();
            std::thread::spawn(move || {
                // Far below the frame timeout: a writer the daemon does not read gives up long
                // before the daemon closes the frames it did read, and takes its turn.
                stream.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
                let mut written = 0;
                if stream.write_all(format!("Content-Length: {FRAME}\r\n\r\n").as_bytes()).is_err() {
                    return written;
                }
                let chunk = vec![b' '; 64 * KIB];
                while written < FRAME - 1 {
                    let n = chunk.len().min(FRAME - 1 - written);
                    match stream.write(&chunk[..n]) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => written += n,
                    }
                }
                written
            })
        })
        .collect();
    let written: Vec<usize> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let total: usize = written.iter().sum();
    let whole = written.iter().filter(|&&n| n == FRAME - 1).count();
    println!(
        "8 almost-complete 4 MiB frames: the daemon took {} KiB in all; {whole} sent whole; {:?} KiB each",
        total / KIB,
        written.iter().map(|n| n / KIB).collect::<Vec<_>>()
    );
    assert!(whole >= 1, "the frames that fit the budget are read: {written:?}");
    assert!(total <= 16 * MIB, "{total} bytes of half-received frames taken in: {written:?}");

    // Small requests do not wait for the budget.
    let mut honest = daemon.session();
    assert!(honest.call("daemon/status", None)["sessions"].as_u64().unwrap() >= 1);
    // A big write waits its turn, and is done once stalled frames are closed.
    // (Four rounds of stalled frames closed two at a time, at the frame timeout each.)
    honest.stream.set_read_timeout(Some(PATIENCE * 3)).unwrap();
    let target = daemon.dir.path().join("honest.txt");
    let content = "y".repeat(MIB - 1) + "\n";
    let response = honest.request(
        "fs/writeText",
        Some(json!({"path": s(&target), "content": content, "expect": {"kind": "any"}})),
    );
    assert!(response.get("result").is_some(), "{response:.300}");
    assert_eq!(std::fs::metadata(&target).unwrap().len(), MIB as u64);
    for raw in &mut hostile {
        assert!(raw.closed(), "a stalled frame's connection is closed");
    }
}

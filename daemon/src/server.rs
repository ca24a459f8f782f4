//! The accept loop: peer-uid check, connection cap, one task per connection, and graceful
//! shutdown (stop accepting, let in-flight requests finish within a bounded grace period).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use filectx_protocol::LspCodec;
use filectx_protocol::error::SERVER_BUSY;
use jsonrpsee::core::RegisterMethodError;
use jsonrpsee::types::{ErrorObject, Id};
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::codec::Encoder;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::listen::check_peer;
use crate::stats::Stats;
use crate::transport::connection::{self, Shared};
use crate::transport::message;
use crate::watch::WatchHub;

/// Blocking-pool threads beyond the file and search slots, for short blocking steps outside them.
pub const SHORT_BLOCKING_THREADS: usize = 16;

/// How long after a session that held much ends its freed memory is handed back to the system
/// (the ends of sessions closing together make one trim).
pub const TRIM_AFTER_END: Duration = Duration::from_millis(200);

/// How long an idle blocking-pool thread lives (tokio's default: 10 s).
pub const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(2);

/// Bounds the runtime's blocking pool as the daemon runs it: file work holds one of the
/// `file_slots` slots, a search one of the `search_slots`, and the rest of the pool serves short blocking steps (a session's
/// `initialize`, sweeps). tokio's default of 512 threads let a burst of 1,000 connecting
/// sessions start dozens of threads, each keeping its stack and its allocator cache for ten idle
/// seconds.
pub fn bound_blocking_pool<'b>(
    builder: &'b mut tokio::runtime::Builder,
    config: &Config,
) -> &'b mut tokio::runtime::Builder {
    builder
        .max_blocking_threads(
            config.file_slots.saturating_add(config.search_slots).saturating_add(SHORT_BLOCKING_THREADS),
        )
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The method table could not be built (a programming error: a name registered twice).
    #[error("building the method table: {0}")]
    MethodTable(#[from] RegisterMethodError),
    /// A deny rule of the configuration does not parse.
    #[error(transparent)]
    DenyRule(#[from] crate::context::deny::BadRule),
}

/// Keeps the `sessions` gauge true however a connection task ends.
struct SessionGauge(Arc<Stats>);

impl SessionGauge {
    fn open(stats: Arc<Stats>) -> Self {
        Stats::bump(&stats.sessions);
        Self(stats)
    }
}

impl Drop for SessionGauge {
    fn drop(&mut self) {
        self.0.last_session_end_ms.store(self.0.uptime_ms(), std::sync::atomic::Ordering::Relaxed);
        self.0.sessions.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Refused connections kept open for a moment at once (see [`refuse`]); past it, one is closed
/// right after its refusal is written.
const LINGERING_REFUSALS: usize = 16;

/// Why a connection over the cap is refused.
fn over_cap(max: usize) -> String {
    format!(
        "filectxd is already serving its maximum of {max} connections; close another session, \
         try again later, or restart the daemon with a higher --max-connections"
    )
}

/// Refuses a connection with `message`: written, then the connection stays open for up to a
/// second (so that the client's first request can still be written and the refusal read,
/// rather than its write failing with EPIPE) — for at most [`LINGERING_REFUSALS`] connections
/// at once, each holding a descriptor meanwhile; any more are closed right after the write.
fn refuse(stream: UnixStream, message: String, lingering: &Arc<Semaphore>, tasks: &TaskTracker) {
    match lingering.clone().try_acquire_owned() {
        Ok(permit) => {
            tasks.spawn(async move {
                refuse_with(stream, message).await;
                drop(permit);
            });
        }
        Err(_) => refuse_now(&stream, &message),
    }
}

/// Tells a connection why it is being closed, then closes it.
async fn refuse_with(mut stream: UnixStream, message: String) {
    let error = ErrorObject::owned(SERVER_BUSY, message, None::<()>);
    let json = message::error_response(Id::Null, error);
    let mut frame = bytes::BytesMut::new();
    let _ = LspCodec::default().encode(json.as_bytes(), &mut frame);
    // A client that does not read must not hold this task: the refusal is best effort.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&frame).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// One descriptor held back (`/dev/null`, open for nothing) so that a daemon out of
/// descriptors can still take a waiting connection to refuse it, instead of leaving it in the
/// backlog while `accept` fails with EMFILE.
struct Spare(Option<std::fs::File>);

impl Spare {
    fn open() -> Self {
        Self(std::fs::File::open("/dev/null").ok())
    }

    /// Closes it; whether there was one.
    fn release(&mut self) -> bool {
        self.0.take().is_some()
    }
}

/// Takes a connection already waiting in `listener`'s backlog, if any (never waits for one),
/// and refuses it as the daemon has no descriptor for it; whether one was refused.
fn refuse_waiting(listener: &UnixListener) -> bool {
    let flags = rustix::net::SocketFlags::CLOEXEC | rustix::net::SocketFlags::NONBLOCK;
    let Ok(fd) = rustix::net::accept_with(listener, flags) else { return false };
    // Another user's connection is closed without a word (see `check_peer`).
    let ours = rustix::process::geteuid();
    if rustix::net::sockopt::socket_peercred(&fd).map(|cred| cred.uid) != Ok(ours) {
        return false;
    }
    refuse_now(&fd, &no_descriptor_left());
    true
}

/// Whether `accept` failed because this process (or the system) has no descriptor left.
fn out_of_descriptors(err: &std::io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// The refusal of a connection the descriptor budget has no room for.
fn at_descriptor_budget(usage: &crate::descriptors::Usage) -> String {
    format!(
        "filectxd has no file descriptors to spare for another session: its open-file limit is {}, of which {} are \
         kept in reserve and the rest are held by the open sessions; close another session, try again later, or \
         restart the daemon with a higher open-file limit (ulimit -n, systemd LimitNOFILE=)",
        usage.limit, usage.reserve
    )
}

/// The refusal of a connection taken with the spare descriptor.
fn no_descriptor_left() -> String {
    "filectxd has no file descriptor left to serve another session (Too many open files); close another session, \
     try again later, or restart the daemon with a higher open-file limit (ulimit -n, systemd LimitNOFILE=)"
        .to_owned()
}

/// Tells a connection why it is refused, and closes it, at once: one non-blocking write of the
/// error (a fresh socket's buffer takes it), so that a refused connection never holds a
/// descriptor for longer (many of them would eat the reserve).
fn refuse_now(stream: impl std::os::fd::AsFd, message: &str) {
    let error = ErrorObject::owned(SERVER_BUSY, message.to_owned(), None::<()>);
    let json = message::error_response(Id::Null, error);
    let mut frame = bytes::BytesMut::new();
    let _ = LspCodec::default().encode(json.as_bytes(), &mut frame);
    // The socket itself, not the runtime's readiness (a fresh socket has none recorded yet).
    let _ = rustix::io::write(stream, &frame);
}

/// Serves `listener` until `shutdown` resolves, then stops accepting, gives in-flight requests
/// up to `config.shutdown_grace` to finish, and returns. The caller owns the socket file.
pub async fn run(
    listener: UnixListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    if !crate::context::install_sigbus_guard() {
        tracing::warn!("could not install the SIGBUS guard; large files will be read without mapping them");
    }
    crate::memory::tune();
    let stats = Arc::new(Stats::new());
    // Counted before the watcher and the listener's spare take theirs (the reserve covers them).
    let descriptors = crate::descriptors::Descriptors::of_this_process();
    let mut files = crate::context::Files::with_descriptors(config.files.clone(), descriptors.clone());
    let private = private_of(&config);
    if let Some(journal) = &config.journal {
        match crate::journal::Journal::open(journal.clone(), private.clone()) {
            Ok(journal) => {
                // Loaded in the background: the first use waits for it, nothing else does.
                let loading = journal.clone();
                tokio::task::spawn_blocking(move || loading.load());
                files = files.with_journal(journal);
            }
            Err(e) => {
                tracing::warn!(
                    dir = %journal.dir.display(),
                    %e,
                    "running without a journal: changes are not recorded and cannot be undone"
                );
                files = files.without_journal(format!("{e}"));
            }
        }
    }
    // Language servers: commands looked up on the daemon's PATH now, started when first needed.
    let lsp = (!config.lsp.servers.is_empty() || config.lsp.builtins)
        .then(|| crate::lsp::Lsp::start(config.lsp.clone(), config.lsp_guard.clone()));
    if let Some(lsp) = &lsp {
        files = files.with_lsp(lsp.clone());
    }
    if let Some(index) = &config.search_index {
        files = files.with_search_index(index, private.clone());
    }
    let persisting = files.clone();
    let watch = WatchHub::start(&files);
    let policy = crate::session::SessionPolicy {
        // Fenced by canonical folders (a folder that does not exist yet is kept as given).
        allowed_roots: config
            .allowed_roots
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect(),
        deny: daemon_deny(&config)?,
        read_max_bytes: config.read_max_bytes,
        max_window_bytes: config.files.max_window_bytes,
        max_roots: config.max_roots,
        descriptors: descriptors.clone(),
        private,
        diagnostics: files.lsp().is_some(),
    };
    let handlers = crate::rpc::methods(config.clone(), stats.clone(), files.clone(), watch.clone(), policy)?;
    let sweeper =
        tokio::spawn(sweep_idle(files, stats.clone(), config.files.idle_release, handlers.records.clone()));
    let shared =
        Arc::new(Shared::new(handlers.methods, config.clone(), stats.clone(), watch, handlers.records));
    tracing::debug!(
        max_queued_bytes = config.max_queued_bytes,
        max_total_queued_bytes = config.max_total_queued_bytes,
        guaranteed_share = shared.outgoing.share(),
        max_partial_frame_bytes = config.max_partial_frame_bytes,
        "transport budgets"
    );
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let usage = descriptors.usage();
    if usage.budget / 2 < config.max_connections {
        tracing::info!(
            limit = usage.limit,
            reserve = usage.reserve,
            budget = usage.budget,
            max_connections = config.max_connections,
            "the open-file limit allows fewer connections than --max-connections (each needs a descriptor and a root's); raise it with ulimit -n or LimitNOFILE="
        );
    }
    let mut spare = Spare::open();
    let lingering = Arc::new(Semaphore::new(LINGERING_REFUSALS));
    let stop = CancellationToken::new();
    let connections = TaskTracker::new();
    let mut next_conn_id = 0usize;
    tracing::info!(
        max_connections = config.max_connections,
        max_frame_bytes = config.max_frame_bytes,
        open_file_limit = usage.limit,
        descriptor_budget = usage.budget,
        "filectxd {} serving",
        crate::rpc::VERSION
    );

    tokio::pin!(shutdown);
    // With --idle-exit: checked once a second; the clock restarts whenever a session is open.
    let mut idle_check = tokio::time::interval(Duration::from_millis(250));
    let mut idle_since = tokio::time::Instant::now();
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
            _ = idle_check.tick(), if config.idle_exit.is_some() => {
                let since_last_end =
                    Duration::from_millis(stats.uptime_ms().saturating_sub(Stats::get(&stats.last_session_end_ms)));
                if Stats::get(&stats.sessions) > 0 {
                    idle_since = tokio::time::Instant::now();
                } else if let Some(limit) = config.idle_exit
                    && idle_since.elapsed() >= limit
                    && since_last_end >= limit
                {
                    tracing::info!(idle = ?limit, "no session for the idle limit; exiting");
                    break;
                }
                continue;
            }
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                idle_since = tokio::time::Instant::now();
                stream
            }
            Err(err) if out_of_descriptors(&err) => {
                // A connection may wait in the backlog (accept fails before it looks): let go of
                // the spare descriptor to take it, tell it why it is refused, close it, and take
                // the spare again. Only one already waiting: by the time another comes,
                // descriptors may be free again.
                let refused = spare.release() && refuse_waiting(&listener);
                spare = Spare::open();
                if refused {
                    Stats::bump(&stats.refused_connections);
                    tracing::warn!("refused a connection: the daemon has no descriptor left");
                } else {
                    // Nothing was waiting, or no spare to let go of: back off instead of spinning.
                    tracing::debug!(%err, "accept failed: no descriptor left; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                continue;
            }
            Err(err) => {
                // Any other failure: back off instead of spinning; the daemon keeps serving.
                tracing::warn!(%err, "accept failed; retrying shortly");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if let Err(why) = check_peer(&stream) {
            Stats::bump(&stats.refused_connections);
            tracing::warn!(%why, "refused connection from another user");
            continue;
        }
        let Some(descriptor) = descriptors.connection() else {
            Stats::bump(&stats.refused_connections);
            let usage = descriptors.usage();
            tracing::warn!(
                limit = usage.limit,
                reserve = usage.reserve,
                "connection refused: at the descriptor budget"
            );
            refuse(stream, at_descriptor_budget(&usage), &lingering, &connections);
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            Stats::bump(&stats.refused_connections);
            tracing::warn!(max = config.max_connections, "connection refused: at the connection cap");
            refuse(stream, over_cap(config.max_connections), &lingering, &connections);
            continue;
        };
        next_conn_id += 1;
        let gauge = SessionGauge::open(stats.clone());
        let serve = connection::serve(stream, shared.clone(), next_conn_id, stop.clone());
        connections.spawn(async move {
            serve.await;
            drop(gauge);
            drop(slot);
            drop(descriptor);
        });
    }

    drop(listener);
    let open = Stats::get(&stats.sessions);
    tracing::info!(sessions = open, grace = ?config.shutdown_grace, "shutting down: no longer accepting; finishing in-flight requests");
    stop.cancel();
    connections.close();
    if tokio::time::timeout(config.shutdown_grace, connections.wait()).await.is_err() {
        tracing::warn!(
            still_open = Stats::get(&stats.sessions),
            "in-flight requests did not finish within the grace period; exiting anyway"
        );
    }
    sweeper.abort();
    if let Some(lsp) = lsp {
        lsp.stop_all().await;
    }
    // Kept listings go to the search index, so the next start is warm.
    match tokio::task::spawn_blocking(move || persisting.persist_search_indexes()).await {
        Ok(0) | Err(_) => {}
        Ok(roots) => tracing::info!(roots, "search indexes written"),
    }
    tracing::info!(requests = Stats::get(&stats.requests), "filectxd stopped");
    Ok(())
}

/// Every `period`, drops the file service's cached state that nobody used during the period before
/// (open files, mappings, line indexes) and, when that or a session's end freed memory, hands
/// the free heap back to the system, so a daemon whose agents went quiet shrinks back. A session
/// that held a MiB or more of records hands its memory back soon after it ends (within
/// [`TRIM_AFTER_END`], coalesced), without waiting for the period.
async fn sweep_idle(
    files: crate::context::Files,
    stats: Arc<Stats>,
    period: Duration,
    records: Arc<crate::context::ledger::Ledgers>,
) {
    let mut ticks = tokio::time::interval(period.max(Duration::from_millis(100)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    let mut last_end = Stats::get(&stats.last_session_end_ms);
    loop {
        let big_end = tokio::select! {
            _ = ticks.tick() => false,
            () = records.big_session_ended() => true,
        };
        if big_end {
            // Sessions ending together (a client closing many) make one trim.
            tokio::time::sleep(TRIM_AFTER_END).await;
            last_end = Stats::get(&stats.last_session_end_ms);
            let trimmed = tokio::task::spawn_blocking(crate::memory::release_free_memory).await;
            if let Err(err) = trimmed {
                tracing::warn!(%err, "giving memory back after a session's end failed");
            }
            continue;
        }
        let files = files.clone();
        let ended = Stats::get(&stats.last_session_end_ms);
        let session_ended = std::mem::replace(&mut last_end, ended) != ended;
        // Unmapping, closing and trimming can take a moment: off the async workers.
        let swept = tokio::task::spawn_blocking(move || {
            let dropped = files.sweep_idle();
            if dropped > 0 || session_ended {
                crate::memory::release_free_memory();
            }
            dropped
        });
        match swept.await {
            Ok(0) => {}
            Ok(moved) => tracing::debug!(moved, "idle sweep: cached files released, kept versions packed"),
            Err(err) => tracing::warn!(%err, "idle sweep failed"),
        }
    }
}

/// The daemon's deny rules: its configured ones.
fn daemon_deny(config: &Config) -> Result<crate::context::deny::DenyRules, crate::context::deny::BadRule> {
    crate::context::deny::DenyRules::daemon(&config.deny_read, &config.deny_write)
}

/// The daemon's own files and folders, which no session reaches whatever its roots (see
/// `provider::private`): the state folder (`$XDG_STATE_HOME/filectx`: the staging token, the
/// default journal), the journal's folder, the search index's folder, and the gate token.
fn private_of(config: &Config) -> std::sync::Arc<crate::context::Private> {
    let mut folders: Vec<std::path::PathBuf> = Vec::new();
    if config.files.staging_token.is_some()
        && let Some(state) = crate::xdg::state_dir()
    {
        folders.push(state);
    }
    if let Some(journal) = &config.journal {
        folders.push(journal.dir.clone());
    }
    if let Some(index) = &config.search_index {
        folders.push(index.dir.clone());
    }
    let files: Vec<std::path::PathBuf> =
        config.gate_token.iter().map(|token| token.file().to_path_buf()).collect();
    crate::context::Private::new(&folders, &files)
}

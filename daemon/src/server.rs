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

/// Tells a connection over the cap why it is being closed, then closes it.
async fn refuse_over_cap(mut stream: UnixStream, max: usize) {
    let error = ErrorObject::owned(
        SERVER_BUSY,
        format!(
            "filectxd is already serving its maximum of {max} connections; close another session, \
             try again later, or restart the daemon with a higher --max-connections"
        ),
        None::<()>,
    );
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
    let files = crate::context::Files::new(config.files.clone());
    let watch = WatchHub::start(&files);
    let sweeper = tokio::spawn(sweep_idle(files.clone(), stats.clone(), config.files.idle_release));
    let policy = crate::session::SessionPolicy {
        // Fenced by canonical folders (a folder that does not exist yet is kept as given).
        allowed_roots: config
            .allowed_roots
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect(),
        deny: crate::context::deny::DenyRules::daemon(&config.deny_read, &config.deny_write)?,
        read_max_bytes: config.read_max_bytes,
        max_window_bytes: config.files.max_window_bytes,
    };
    let handlers = crate::rpc::methods(config.clone(), stats.clone(), files, watch.clone(), policy)?;
    let shared =
        Arc::new(Shared::new(handlers.methods, Some(handlers.direct), config.clone(), stats.clone(), watch));
    tracing::debug!(
        max_queued_bytes = config.max_queued_bytes,
        max_total_queued_bytes = config.max_total_queued_bytes,
        guaranteed_share = shared.outgoing.share(),
        max_partial_frame_bytes = config.max_partial_frame_bytes,
        "transport budgets"
    );
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let stop = CancellationToken::new();
    let connections = TaskTracker::new();
    let mut next_conn_id = 0usize;
    tracing::info!(
        max_connections = config.max_connections,
        max_frame_bytes = config.max_frame_bytes,
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
            Err(err) => {
                // EMFILE and friends: back off instead of spinning; the daemon keeps serving.
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            Stats::bump(&stats.refused_connections);
            tracing::warn!(max = config.max_connections, "connection refused: at the connection cap");
            connections.spawn(refuse_over_cap(stream, config.max_connections));
            continue;
        };
        next_conn_id += 1;
        let gauge = SessionGauge::open(stats.clone());
        let serve = connection::serve(stream, shared.clone(), next_conn_id, stop.clone());
        connections.spawn(async move {
            serve.await;
            drop(gauge);
            drop(slot);
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
    tracing::info!(requests = Stats::get(&stats.requests), "filectxd stopped");
    Ok(())
}

/// Every `period`, drops the file service's cached state that nobody used during the period before
/// (open files, mappings, line indexes) and, when that or a session's end freed memory, hands
/// the free heap back to the system, so a daemon whose agents went quiet shrinks back.
async fn sweep_idle(files: crate::context::Files, stats: Arc<Stats>, period: Duration) {
    let mut ticks = tokio::time::interval(period.max(Duration::from_millis(100)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    let mut last_end = Stats::get(&stats.last_session_end_ms);
    loop {
        ticks.tick().await;
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

//! The jsonrpsee method table: one registration per wire method, each a thin adapter that finds
//! its session in the request's `Extensions`, parses parameters, calls the layer below, and
//! converts typed errors to JSON-RPC errors.

mod diagnostics;
pub mod error;
mod files;
mod gate;
mod journal;
mod run;
pub mod slots;
mod stream;
#[cfg(feature = "test-hooks")]
mod test_hooks;

use std::sync::{Arc, OnceLock};

use filectx_protocol::methods::{
    self, DAEMON_STATUS, INITIALIZE, SESSION_CONTEXT_RESET, SHUTDOWN, TOOLS_LIST,
};
use filectx_protocol::tools::{READ_LINE_LIMIT, READ_LINE_MAX_CHARS};
use filectx_protocol::{
    Capabilities, ContextResetParams, DaemonStatus, DaemonStatusParams, InitializeParams, InitializeResult,
    Limits, PROTOCOL_VERSION, SearchIndexInfo, ServerInfo, ToolsListResult, features,
};
use jsonrpsee::core::RegisterMethodError;
use jsonrpsee::core::server::{Methods, RpcModule};
use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::{Extensions, types::error::INTERNAL_ERROR_CODE};

use crate::config::Config;
use crate::context::Files;
use crate::json::Json;
use crate::session::resume::{ParkLimits, ParkStore};
use crate::session::{Session, SessionError, SessionOptions, SessionPolicy};
use crate::stats::Stats;
use crate::tools;
use crate::watch::WatchHub;

/// The protocol-2 features this daemon supports (`capabilities.features`).
pub const FEATURES: &[&str] = &[
    features::CANCEL_REQUEST,
    features::OWNERS,
    features::DEDUP_READS,
    features::CONTEXT_RESET,
    features::RESUME,
    features::STALE_DIFFS,
    features::KEEP_CONVENTIONS,
    features::EDIT_REGIONS,
    features::READ_MAX_BYTES,
    features::WHOLE_LINES,
    features::SEARCH,
    features::GATE,
    features::STALE_EDITS,
    features::JOURNAL,
    features::JSON_BUDGET,
    features::DIAGNOSTICS,
];

/// The daemon's version, as `initialize` and `daemon/status` report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// State shared by every method handler.
#[derive(Debug)]
pub struct ServerContext {
    /// The daemon's configuration.
    pub config: Config,
    /// Daemon-wide counters.
    pub stats: Arc<Stats>,
    /// The daemon's file service, shared by every session.
    pub files: Files,
    /// Where roots may be, and the daemon's deny rules.
    pub policy: Arc<SessionPolicy>,
    /// The daemon's watcher.
    pub watch: Arc<WatchHub>,
    /// Caps file operations running on the blocking pool at once: beyond a few per core they
    /// only add threads and contention (256 busy sessions grew the pool to ~200 threads and
    /// made every read slower); further requests wait their turn here instead, shared fairly
    /// between sessions (one session's slow requests never hold every slot).
    pub file_work: Arc<slots::FileSlots>,
    /// The slots searches (`glob`, `grep`) run in, shared fairly between sessions the same way
    /// and apart from `file_work`: a session's expensive greps never hold the slots another
    /// session's first read needs.
    pub search_work: Arc<slots::FileSlots>,
    /// Ended resumable sessions, waiting for a `resume`.
    pub parked: Arc<ParkStore>,
    /// The bytes sessions' records hold, against their caps.
    pub records: Arc<crate::context::ledger::Ledgers>,
    /// The write-intent gates.
    pub(crate) gates: Arc<crate::gate::Gates>,
    /// Every request method in the table, sorted (filled right after the table is built).
    method_names: Arc<OnceLock<Vec<String>>>,
}

/// A request's cancellation, as the connection driver attaches it to the request's
/// `Extensions`: `$/cancelRequest` for the request's id cancels it, and so does its client
/// going away. Handlers honour it while the request has not started its file work (waiting for
/// a slot): work that started runs to its end and answers normally, so a cancelled write never
/// lands unseen; a search is the exception, which stops at once (within a file too) and answers
/// `FS_ABORTED`.
#[derive(Debug, Clone, Default)]
pub struct Cancel(pub tokio_util::sync::CancellationToken);

/// Where a handler of a large answer leaves its result already serialized, so that the
/// connection driver frames those bytes as they are: jsonrpsee's own path writes every result
/// into a bounded buffer and then parses the whole response again to make it a `RawValue`
/// (about a tenth of a 100 KB read's CPU). The driver attaches an empty one (with the request's
/// id) to each request's `Extensions`; a handler that finds it writes the whole success response
/// once into it — with serde_json ([`PreparedResponse::offer`]) or by hand after [`PreparedResponse::start`]
/// ([`PreparedResponse::put`]: the read tool's text and `file/read`'s lines, escaped by
/// [`crate::json`] as they are built) — and answers [`Ready::Prepared`], a `null` placeholder
/// the driver replaces with those bytes, neither parsed nor copied again.
/// Without one (a handler called another way) the result is returned as usual.
#[derive(Debug, Clone)]
pub struct PreparedResponse(Arc<PreparedSlot>);

#[derive(Debug)]
struct PreparedSlot {
    /// The request's id, for the envelope.
    id: jsonrpsee::types::Id<'static>,
    /// The whole success response, serialized once.
    response: std::sync::Mutex<Option<Json>>,
}

/// A success response, serialized in one pass with its result.
#[derive(serde::Serialize)]
struct Success<'a, T> {
    jsonrpc: &'static str,
    id: &'a jsonrpsee::types::Id<'static>,
    result: &'a T,
}

impl PreparedResponse {
    /// An empty slot for the request `id`.
    pub(crate) fn new(id: jsonrpsee::types::Id<'static>) -> PreparedResponse {
        PreparedResponse(Arc::new(PreparedSlot { id, response: std::sync::Mutex::new(None) }))
    }

    /// The serialized success response a handler left, if any.
    pub(crate) fn take(&self) -> Option<Json> {
        self.0.response.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// The request's slot, if the driver attached one.
    pub(crate) fn of(ext: &Extensions) -> Option<PreparedResponse> {
        ext.get::<PreparedResponse>().cloned()
    }

    /// `result`, serialized into the request's slot when it has one.
    pub(crate) fn offer<T: serde::Serialize>(slot: Option<PreparedResponse>, result: T) -> Ready<T> {
        let Some(slot) = slot else { return Ready::Value(result) };
        let success = Success { jsonrpc: "2.0", id: &slot.0.id, result: &result };
        match serde_json::value::to_raw_value(&success) {
            Ok(raw) => {
                slot.set(Some(Json::from(raw)));
                Ready::Prepared
            }
            Err(_) => {
                slot.set(None);
                Ready::Value(result)
            }
        }
    }

    /// The start of the success response, up to where its result goes:
    /// `{"jsonrpc":"2.0","id":<id>,"result":`, with `room` more bytes reserved.
    pub(crate) fn start(&self, room: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + room);
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        // An id (null, a number or a string) always serializes.
        let _ = serde_json::to_writer(&mut out, &self.0.id);
        out.extend_from_slice(br#","result":"#);
        out
    }

    /// Leaves a whole success response written after [`PreparedResponse::start`] (the result and the
    /// closing `}`) in the slot; the handler then answers [`Ready::Prepared`].
    pub(crate) fn put(&self, response: Vec<u8>) {
        self.set(Some(Json::trusted(response)));
    }

    fn set(&self, response: Option<Json>) {
        *self.0.response.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = response;
    }
}

/// A handler's result: the value itself, or a placeholder for the bytes it left in
/// [`PreparedResponse`].
#[derive(Debug, Clone)]
pub enum Ready<T> {
    /// Serialized by jsonrpsee as usual.
    Value(T),
    /// Already serialized into the request's [`PreparedResponse`] slot; `null` here.
    Prepared,
}

impl<T: serde::Serialize> serde::Serialize for Ready<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ready::Value(value) => value.serialize(serializer),
            Ready::Prepared => serializer.serialize_unit(),
        }
    }
}

/// -32800: the request was cancelled before it started its work.
pub(crate) fn cancelled() -> ErrorObjectOwned {
    ErrorObjectOwned::owned(
        filectx_protocol::error::REQUEST_CANCELLED,
        "request cancelled before it started",
        None::<()>,
    )
}

pub(crate) fn internal(message: impl std::fmt::Display) -> ErrorObjectOwned {
    tracing::error!(%message, "internal error");
    ErrorObjectOwned::owned(INTERNAL_ERROR_CODE, format!("internal error: {message}"), None::<()>)
}

/// The session the connection driver attached to this request.
pub(crate) fn session_of(ext: &Extensions) -> Result<Arc<Session>, ErrorObjectOwned> {
    ext.get::<Arc<Session>>().cloned().ok_or_else(|| internal("request carries no session"))
}

/// The options of a session that has passed `initialize` (the driver guarantees it for every
/// method but `initialize`).
fn options_of(session: &Session) -> Result<&SessionOptions, ErrorObjectOwned> {
    session.options().ok_or_else(error::not_initialized)
}

/// Parses a method's params object, with a message that names the method and the problem.
pub(crate) fn parse_params<T: serde::de::DeserializeOwned>(
    method: &str,
    params: &Params<'_>,
) -> Result<T, ErrorObjectOwned> {
    let Some(raw) = params.as_str() else {
        return Err(error::invalid_params(format!("Invalid params: {method} needs a params object")));
    };
    serde_json::from_str(raw)
        .map_err(|err| error::invalid_params(format!("Invalid params for {method}: {err}")))
}

fn initialize_result(
    ctx: &ServerContext,
    session: &Session,
    options: &SessionOptions,
    resume_token: Option<String>,
) -> InitializeResult {
    let config = &ctx.config;
    let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    InitializeResult {
        server_info: ServerInfo { name: "filectxd".to_owned(), version: VERSION.to_owned() },
        protocol_version: PROTOCOL_VERSION,
        session_id: session.id().to_owned(),
        instructions: tools::instructions(options),
        capabilities: Capabilities {
            tools: options.tools.clone(),
            read_only: options.read_only,
            methods: ctx.method_names.get().cloned().unwrap_or_default(),
            batches: true,
            features: FEATURES
                .iter()
                .filter(|f| ctx.gates.enabled() || **f != features::GATE)
                .filter(|f| ctx.files.journal().is_some() || **f != features::JOURNAL)
                .map(|f| (*f).to_owned())
                .collect(),
            diagnostics: ctx.files.lsp().is_some(),
        },
        limits: Limits {
            read_line_limit: READ_LINE_LIMIT,
            read_line_max_chars: READ_LINE_MAX_CHARS,
            read_max_bytes: options.read_max_bytes,
            max_window_bytes: config.files.max_window_bytes,
            max_frame_bytes: u64::try_from(config.max_frame_bytes).unwrap_or(u64::MAX),
            max_batch_len: clamp(config.max_batch_len),
            max_concurrent_requests: clamp(config.max_concurrent_requests),
        },
        resume_token,
    }
}

async fn initialize(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<InitializeResult, ErrorObjectOwned> {
    let session = session_of(&ext)?;
    let params: InitializeParams = parse_params(INITIALIZE, &params)?;
    if session.options().is_some() {
        return Err(SessionError::AlreadyInitialized.into());
    }
    let resume = params.resume.clone();
    let resumable = params.resumable.unwrap_or(false);
    // Canonicalising roots touches the filesystem: keep it off the async workers.
    let policy = ctx.policy.clone();
    let options = tokio::task::spawn_blocking(move || SessionOptions::from_params(params, &policy))
        .await
        .map_err(internal)??;
    let token = match resumable {
        true => Some(crate::session::resume::new_token().map_err(internal)?),
        false => None,
    };
    // Taken only once everything else is valid (a token works once); `initialize` runs alone, in
    // the connection's reader, so nothing else installs options meanwhile.
    let parked = match &resume {
        Some(token) => Some(
            ctx.parked
                .take(token, crate::session::resume::RESUME_WAIT)
                .await
                .ok_or_else(error::cannot_resume)?,
        ),
        None => None,
    };
    let options = session.install(options)?;
    // Each root's search index is validated in the background from now on.
    ctx.files.prepare_search(&options.roots);
    if let Some(parked) = parked {
        let owners = parked.len();
        let adopter = session.clone();
        // Attaching registers watches (and may look at files): off the async workers.
        let paths =
            tokio::task::spawn_blocking(move || adopter.owners().adopt(parked)).await.map_err(internal)?;
        tracing::info!(owners, files = paths.len(), "session resumed");
        ctx.watch.recheck(paths);
    }
    let resume_token = token.map(|(token, digest)| {
        ctx.parked.expect(digest);
        session.park_on_end(digest, ctx.parked.clone());
        token
    });
    tracing::info!(
        client = options.client.as_ref().map(|c| c.name.as_str()).unwrap_or("-"),
        roots = ?options.roots.iter().map(|r| r.path()).collect::<Vec<_>>(),
        tools = ?options.tools,
        read_only = options.read_only,
        "session initialized"
    );
    Ok(initialize_result(&ctx, &session, options, resume_token))
}

/// `session/contextReset`: forgets what the `read` tool delivered to one owner, or to all.
fn context_reset(params: &Params<'_>, session: &Session) -> Result<(), ErrorObjectOwned> {
    let params: ContextResetParams = match params.as_str() {
        None => ContextResetParams::default(),
        Some(_) => parse_params(SESSION_CONTEXT_RESET, params)?,
    };
    let owners = match params.owner.as_deref() {
        Some(name) => {
            crate::session::owners::check_name(name)?;
            session.owners().find(Some(name)).into_iter().collect()
        }
        None => session.owners().all(),
    };
    for owner in owners {
        owner.delivered().clear();
    }
    Ok(())
}

/// `daemon/status` as `session` may see it: its own gates only, unless `params` carry the
/// daemon's gate token (the daemon's owner sees every gate).
fn status(
    ctx: &ServerContext,
    session: &Session,
    params: &Params<'_>,
) -> Result<DaemonStatus, ErrorObjectOwned> {
    let params: DaemonStatusParams = match params.as_str() {
        None => DaemonStatusParams::default(),
        Some(_) => parse_params(DAEMON_STATUS, params)?,
    };
    let owner = match (&ctx.config.gate_token, params.gate_token.as_deref()) {
        (Some(token), Some(given)) => token.matches(given),
        _ => false,
    };
    let (gates, other_gates) = ctx.gates.infos(session.id(), owner);
    let stats = &ctx.stats;
    let slots = ctx.file_work.usage();
    let searches = ctx.search_work.usage();
    let (parked_sessions, parked_bytes) = ctx.parked.usage();
    let (snapshots, snapshot_bytes) = ctx.files.snapshots();
    let (cached_listings, cached_listing_bytes) = ctx.files.cached_listings();
    let (cached_listed_files, cached_filter_bytes, cached_filters_building) = ctx.files.cached_listed_files();
    let descriptors = ctx.policy.descriptors.usage();
    let (watches_held, watches_cap) = ctx.files.watches();
    let journal = ctx.files.journal().map(|journal| journal.stats());
    let (servers, language_servers_missing, language_server_path) = ctx.files.language_servers();
    let language_servers = servers
        .into_iter()
        .map(|s| filectx_protocol::LanguageServerInfo {
            name: s.name,
            root: s.root.display().to_string(),
            pid: s.pid,
            state: s.state.to_owned(),
            rss_bytes: s.rss_bytes,
            open_documents: s.open_documents as u64,
            sessions: s.sessions as u64,
            restarts: u64::from(s.restarts),
        })
        .collect();
    Ok(DaemonStatus {
        language_servers,
        language_servers_missing,
        language_server_path,
        journal: journal.is_some(),
        journal_entries: journal.map_or(0, |j| j.entries),
        journal_bytes: journal.map_or(0, |j| j.bytes),
        journal_problem: ctx.files.journal_problem(),
        version: VERSION.to_owned(),
        pid: std::process::id(),
        uptime_ms: stats.uptime_ms(),
        sessions: Stats::get(&stats.sessions),
        max_sessions: u64::try_from(ctx.config.max_connections).unwrap_or(u64::MAX),
        refused_connections: Stats::get(&stats.refused_connections),
        cached_files: ctx.files.cached_files() as u64,
        index_bytes: ctx.files.cached_index_bytes() as u64,
        mapped_bytes: ctx.files.mapped_bytes() as u64,
        open_files: ctx.files.open_files() as u64,
        watched_paths: ctx.watch.watched(),
        requests: Stats::get(&stats.requests),
        notifications_dropped: Stats::get(&stats.notifications_dropped),
        hashed_bytes: ctx.files.hashed_bytes(),
        file_slots: slots.total as u64,
        file_slots_busy: slots.busy as u64,
        file_slots_waiting: slots.waiting as u64,
        owners: Stats::get(&stats.owners),
        parked_sessions: parked_sessions as u64,
        parked_bytes: parked_bytes as u64,
        snapshots: snapshots as u64,
        snapshot_bytes: snapshot_bytes as u64,
        cached_listings: cached_listings as u64,
        cached_listing_bytes: cached_listing_bytes as u64,
        cached_listed_files: cached_listed_files as u64,
        cached_filter_bytes: cached_filter_bytes as u64,
        cached_filters_building,
        search_indexes: search_indexes(ctx, session, owner),
        gates,
        unmatched_responses: Stats::get(&stats.unmatched_responses),
        other_gates,
        observed_bytes: ctx.records.used() as u64,
        max_observed_bytes: ctx.records.cap() as u64,
        max_session_observed_bytes: ctx.records.session_cap() as u64,
        observations_evicted: ctx.records.evicted(),
        open_descriptors: crate::descriptors::open_now().unwrap_or(0) as u64,
        descriptor_limit: descriptors.limit as u64,
        descriptor_reserve: descriptors.reserve as u64,
        roots_held: descriptors.roots as u64,
        search_slots: searches.total as u64,
        search_slots_busy: searches.busy as u64,
        search_slots_waiting: searches.waiting as u64,
        search_regex_bytes: ctx.config.search_regex_bytes as u64,
        search_memory_bytes: (searches.total as u64).saturating_mul(
            (ctx.config.search_regex_bytes as u64).saturating_add(crate::search::SEARCH_BUFFER_BYTES),
        ),
        watches_held: watches_held as u64,
        watches_cap: watches_cap as u64,
    })
}

/// The search indexes `session` may see: its roots', or every root's for the daemon's owner.
fn search_indexes(ctx: &ServerContext, session: &Session, owner: bool) -> Vec<SearchIndexInfo> {
    let roots: Vec<&std::path::Path> = session
        .options()
        .map(|options| options.roots.iter().map(|root| root.path()).collect())
        .unwrap_or_default();
    ctx.files
        .search_indexes()
        .into_iter()
        .filter(|(root, _)| owner || roots.contains(&root.as_path()))
        .map(|(root, index)| SearchIndexInfo {
            root: root.display().to_string(),
            loaded: index.loaded,
            reread_files: index.reread,
            bytes: index.bytes,
            validation_ms: index.validation_ms,
        })
        .collect()
}

/// The method table, and what every connection's session takes from it.
#[derive(Debug, Clone)]
pub struct Handlers {
    /// Every method, as jsonrpsee calls it. `Methods` is cheap to clone and shared by every
    /// connection; the connection driver hands every request to it.
    pub methods: Methods,
    /// The bytes sessions' records hold, against their caps (each connection's session gets
    /// its ledger here).
    pub records: Arc<crate::context::ledger::Ledgers>,
}

/// Builds the method table.
pub fn methods(
    config: Config,
    stats: Arc<Stats>,
    files: Files,
    watch: Arc<WatchHub>,
    policy: SessionPolicy,
) -> Result<Handlers, RegisterMethodError> {
    let method_names = Arc::new(OnceLock::new());
    let file_work = slots::FileSlots::new(config.file_slots);
    let search_work = slots::FileSlots::new(config.search_slots);
    let parked = ParkStore::new(ParkLimits {
        grace: config.resume_grace,
        max_sessions: config.max_parked_sessions,
        max_bytes: config.max_parked_bytes,
    });
    let gates = crate::gate::Gates::new(config.gates, config.max_gate_intents);
    let records =
        crate::context::ledger::Ledgers::new(config.max_observed_bytes, config.max_session_observed_bytes);
    let ctx = ServerContext {
        records: records.clone(),
        gates,
        config,
        stats,
        files,
        watch,
        file_work,
        search_work,
        parked,
        policy: Arc::new(policy),
        method_names: method_names.clone(),
    };
    let ctx = Arc::new(ctx);
    let mut module = RpcModule::from_arc(ctx);
    module.register_async_method(INITIALIZE, initialize)?;
    module.register_method(SHUTDOWN, |_params, _ctx, ext| {
        let session = session_of(ext)?;
        session.mark_shut_down();
        tracing::debug!(session = session.id(), "shutdown requested");
        Ok::<(), ErrorObjectOwned>(())
    })?;
    module.register_method(DAEMON_STATUS, |params, ctx, ext| {
        let session = session_of(ext)?;
        status(ctx, &session, &params)
    })?;
    module.register_method(TOOLS_LIST, |_params, _ctx, ext| {
        let session = session_of(ext)?;
        let options = options_of(&session)?;
        Ok::<_, ErrorObjectOwned>(ToolsListResult { tools: tools::list(options) })
    })?;
    module.register_method(SESSION_CONTEXT_RESET, |params, _ctx, ext| {
        let session = session_of(ext)?;
        context_reset(&params, &session)
    })?;
    module.register_async_method(methods::TOOLS_CALL, files::tools_call)?;
    module.register_async_method(methods::FILE_READ, files::file_read)?;
    module.register_async_method(methods::FILE_WRITE, files::file_write)?;
    module.register_async_method(methods::FILE_EDIT, files::file_edit)?;
    module.register_async_method(methods::FILE_STAT, files::file_stat)?;
    module.register_async_method(methods::JOURNAL_LIST, journal::journal_list)?;
    module.register_async_method(methods::JOURNAL_DIFF, journal::journal_diff)?;
    module.register_async_method(methods::JOURNAL_RESTORE, journal::journal_restore)?;
    module.register_async_method(methods::LSP_DIAGNOSTICS, diagnostics::lsp_diagnostics)?;
    module.register_async_method(methods::FS_RESOLVE, files::fs_resolve)?;
    module.register_async_method(methods::FS_STAT, files::fs_stat)?;
    module.register_async_method(methods::FS_READ_TEXT, files::fs_read_text)?;
    module.register_async_method(methods::FS_WRITE_TEXT, files::fs_write_text)?;
    module.register_async_method(methods::FS_EDIT_TEXT, files::fs_edit_text)?;
    module.register_async_method(methods::GATE_REGISTER, gate::register)?;
    module
        .register_method(methods::GATE_UNREGISTER, |params, ctx, ext| gate::unregister(&params, ctx, ext))?;
    module.register_subscription(
        methods::FS_STREAM_TEXT,
        methods::FS_TEXT_CHUNK,
        methods::FS_STREAM_CANCEL,
        stream::stream_text,
    )?;
    #[cfg(feature = "test-hooks")]
    test_hooks::register(&mut module)?;
    let mut names: Vec<String> = module.method_names().map(str::to_owned).collect();
    names.sort();
    // Only fails if already set, which cannot happen on a fresh context.
    let _ = method_names.set(names);
    Ok(Handlers { methods: module.into(), records })
}

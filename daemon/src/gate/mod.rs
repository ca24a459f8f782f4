//! Write-intent gates: sessions that must allow every write or edit under their paths before
//! it lands, and the asking of them.
//!
//! A write call runs with the gates held ([`Gates::hold`]) inside its file-work slot. With no
//! gate registered that is one look at an empty list, and the call takes the one-step write
//! path. When a gate's paths cover the file, the file context prepares the write and answers
//! it as a [`Pending`] change holding its [`Intent`]; the slot is released, and [`Gates::ask`]
//! asks each covering gate in registration order with a `gate/writeIntent` request, waiting on
//! an `.await` that holds no slot and no thread. Then, in a slot again, [`Gates::commit`] commits the change
//! (only if the file is still at the version it was prepared against, and once any gate
//! registered meanwhile allowed it too), or the caller answers the refusal.
//!
//! Never a write a gate did not see: registration takes the write side of a barrier whose read
//! side every write call holds from its look at the list to its end, so once `gate/register`
//! has answered, every write that lands under the gate's paths was shown to it (or is refused,
//! or its gate answered on its behalf by its timeout policy).
//!
//! Bounded: each gate has at most `max_in_flight` intents outstanding; further writes wait for
//! a place in arrival order (a fair semaphore), within the same timeout. A waiting write holds
//! its prepared bytes (no more than its request already did) and a diff of at most 16 KiB.

pub mod token;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use filectx_protocol::methods::{CANCEL_REQUEST, GATE_WRITE_INTENT};
use filectx_protocol::{
    GateCancelParams, GateInfo, GateOnTimeout, GateOperation, INTENT_DIFF_HIDDEN, INTENT_DIFF_NOT_TEXT,
    INTENT_DIFF_TOO_LARGE, IntentWithdrawal, WriteIntentParams, WriteIntentResult,
};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::context::deny::{Access, DenyRules};
use crate::context::gate::{
    GateRefusal, Gatekeeper, Intent, Operation, RefusalKind, Shown, Subject, hostile, quoted,
};
use crate::context::{FileContext, How, Pending, Step};
use crate::session::outbound::{Answer, Outbound, OutboundError};

/// Default answer timeout of a gate, in milliseconds: under the 60 s request timeout of common
/// MCP clients.
pub const DEFAULT_TIMEOUT_MS: u64 = 50_000;
/// The longest answer timeout a gate may ask for, in milliseconds (ten minutes): a writer is
/// never held longer (its own client gives up well before that anyway).
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Default of the per-gate limit on intents in flight.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;
/// The most gates registered at once, daemon-wide.
pub const MAX_GATES: usize = 64;
/// The most gates one session has registered at once, so that no session takes the table.
pub const MAX_GATES_PER_SESSION: usize = 4;
/// The most paths one gate covers.
pub const MAX_PATHS: usize = 64;
/// The longest gate name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// The most characters of a gate's reason passed on to the writer.
pub const MAX_REASON_CHARS: usize = 1000;
/// The most times one call asks gates (a gate registered while they were asked asks again).
pub const MAX_ROUNDS: usize = 4;

/// Why `gate/register` or `gate/unregister` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// The daemon runs with gates turned off.
    #[error("gates are turned off in this daemon (--no-gates); writes are not gated")]
    Disabled,
    /// [`MAX_GATES`] are registered.
    #[error("{MAX_GATES} gates are registered already; unregister one first")]
    TooMany,
    /// The session has [`MAX_GATES_PER_SESSION`] gates already.
    #[error(
        "this session has {MAX_GATES_PER_SESSION} gates already (at most {MAX_GATES_PER_SESSION} per session); \
         unregister one first, or give one gate several paths"
    )]
    TooManyForSession,
    /// A read-only session asked to be a gate.
    #[error("a read-only session cannot be a gate: a gate decides other sessions' writes")]
    ReadOnly,
    /// `gate/register` without the daemon's gate token (or with a wrong one).
    #[error(
        "gate/register needs this daemon's gate token as gateToken: read it from {0} (the daemon's \
         user's, mode 0600); `filectx gate` does"
    )]
    Token(String),
    /// The daemon keeps no gate token, and only sessions with one may be gates.
    #[error(
        "this daemon keeps no gate token (it could not write one next to its socket), so no session \
         can be a gate; see its log, or run it with gate_sessions = \"any\""
    )]
    NoToken,
    /// No paths, or more than [`MAX_PATHS`].
    #[error("paths must name 1 to {MAX_PATHS} folders or files")]
    Paths,
    /// An empty `operations` list.
    #[error("operations must name at least one of create, update, edit")]
    NoOperations,
    /// A name that is empty, too long, or holds control or bidirectional characters.
    #[error("name must be 1 to {MAX_NAME_BYTES} bytes of text without control or bidirectional characters")]
    Name,
    /// A timeout of 0 or over [`MAX_TIMEOUT_MS`].
    #[error("timeoutMs must be from 1 to {MAX_TIMEOUT_MS} (10 minutes)")]
    Timeout,
    /// A path to watch does not exist.
    #[error("{0} does not exist; a gate watches existing folders or files")]
    Missing(String),
    /// The gate to unregister is not one of this session's.
    #[error("this session has no gate {0:?}")]
    Unknown(String),
}

/// One registered gate.
#[derive(Debug)]
pub struct Gate {
    id: String,
    name: Option<String>,
    session_id: String,
    paths: Vec<PathBuf>,
    /// The devices `paths` are on: a file of several hard links on one of them may have a name
    /// under `paths`, whatever the name written.
    devices: Vec<u64>,
    operations: Vec<Operation>,
    timeout: Duration,
    on_timeout: GateOnTimeout,
    /// The gate session's roots (canonical) and deny rules: it sees no diff of a file it may
    /// not read.
    roots: Vec<PathBuf>,
    deny: DenyRules,
    /// The gate session's requests and their answers.
    link: Arc<Outbound>,
    /// Places for intents in flight.
    places: Arc<Semaphore>,
    /// Writes waiting for a place.
    waiting: AtomicU64,
    /// Unregistered.
    stopped: CancellationToken,
}

/// What `gate/register` asks for, validated and canonical.
#[derive(Debug)]
pub struct GateSpec {
    /// Canonical paths inside the session's roots.
    pub paths: Vec<PathBuf>,
    /// The devices they are on.
    pub devices: Vec<u64>,
    /// The operations seen (never empty).
    pub operations: Vec<Operation>,
    /// The gate's name.
    pub name: Option<String>,
    /// The answer timeout.
    pub timeout: Duration,
    /// What an unanswered intent becomes.
    pub on_timeout: GateOnTimeout,
    /// The session's id.
    pub session_id: String,
    /// The session's canonical roots.
    pub roots: Vec<PathBuf>,
    /// The session's deny rules.
    pub deny: DenyRules,
    /// The session's outbound requests.
    pub link: Arc<Outbound>,
}

impl Gate {
    fn open(&self) -> bool {
        !self.stopped.is_cancelled() && !self.link.is_closed()
    }

    /// Whether the file may be under the gate's paths: its name is, or it has several hard
    /// links on the device of one of them (the daemon cannot know where its other names are).
    fn covers_file(&self, subject: Subject<'_>) -> bool {
        self.paths.iter().any(|p| subject.path.starts_with(p))
            || subject.linked.is_some_and(|linked| self.devices.contains(&linked.device))
    }

    fn covers(&self, subject: Subject<'_>, operation: Operation) -> bool {
        self.operations.contains(&operation) && self.covers_file(subject)
    }

    /// Whether the gate's session may read `path` (roots and deny rules).
    fn may_read(&self, path: &Path) -> bool {
        self.roots
            .iter()
            .any(|root| path.strip_prefix(root).is_ok_and(|rel| self.deny.check(rel, Access::Read).is_ok()))
    }

    /// Resolves when the gate is unregistered or its session ended.
    async fn gone(&self) {
        tokio::select! {
            () = self.stopped.cancelled() => {}
            () = self.link.closed() => {}
        }
    }

    /// A refusal in the daemon's words.
    fn refusal(&self, kind: RefusalKind, reason: String) -> GateRefusal {
        GateRefusal { gate_id: self.id.clone(), name: self.name.clone(), reason, kind, quoted: false }
    }

    /// A refusal in the gate's own words.
    fn refusal_saying(&self, words: String) -> GateRefusal {
        GateRefusal {
            gate_id: self.id.clone(),
            name: self.name.clone(),
            reason: words,
            kind: RefusalKind::Denied,
            quoted: true,
        }
    }

    fn info(&self, max_in_flight: usize) -> GateInfo {
        GateInfo {
            gate_id: self.id.clone(),
            name: self.name.clone(),
            session_id: self.session_id.clone(),
            paths: self.paths.iter().map(|p| p.display().to_string()).collect(),
            operations: self.operations.iter().map(|op| wire_operation(*op)).collect(),
            timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            on_timeout: self.on_timeout,
            in_flight: max_in_flight.saturating_sub(self.places.available_permits()) as u64,
            waiting: self.waiting.load(Ordering::Relaxed),
        }
    }
}

/// The wire name of an operation.
pub fn wire_operation(operation: Operation) -> GateOperation {
    match operation {
        Operation::Create => GateOperation::Create,
        Operation::Update => GateOperation::Update,
        Operation::Edit => GateOperation::Edit,
    }
}

/// An operation from its wire name.
pub fn operation_of(operation: GateOperation) -> Operation {
    match operation {
        GateOperation::Create => Operation::Create,
        GateOperation::Update => Operation::Update,
        GateOperation::Edit => Operation::Edit,
    }
}

/// Who is writing, as an intent names them.
#[derive(Debug, Clone)]
pub struct Writer {
    /// The writing session.
    pub session_id: String,
    /// Its client's name.
    pub client_name: Option<String>,
    /// The owner named by the call.
    pub owner: Option<String>,
    /// The writing session's requests to its client: closed when its connection ends, which
    /// withdraws its intents (nobody is left to be told the write landed).
    pub ended: Arc<Outbound>,
}

/// Resolves when the writer's request is cancelled or its connection ends.
async fn withdrawn(cancel: Option<&CancellationToken>, ended: &Outbound) {
    match cancel {
        Some(token) => tokio::select! {
            () = token.cancelled() => {}
            () = ended.closed() => {}
        },
        None => ended.closed().await,
    }
}

/// What the gates answered so far about one write call's pending change: which of them
/// allowed it, and how many times they were asked.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    /// The gates that allowed the intent.
    allowed: Vec<String>,
    rounds: usize,
}

/// What the gates answered about one intent.
#[derive(Debug)]
pub enum Verdict {
    /// Every gate asked allowed it (or let it through by its timeout policy).
    Allowed,
    /// A gate refused it.
    Refused(GateRefusal),
    /// The writer's request was cancelled (or its connection ended) while it waited.
    Cancelled,
}

/// The gates as the file context asks about them: during a write call's descent (none has
/// allowed anything yet), or at the commit of its pending change (`allowed` allowed it).
#[derive(Debug)]
struct Keeper<'a> {
    gates: &'a [Arc<Gate>],
    allowed: &'a [String],
}

impl Gatekeeper for Keeper<'_> {
    fn watches(&self, subject: Subject<'_>) -> bool {
        self.gates.iter().any(|gate| gate.open() && gate.covers_file(subject))
    }

    fn unasked(&self, subject: Subject<'_>, operation: Operation) -> bool {
        self.gates
            .iter()
            .any(|gate| gate.open() && gate.covers(subject, operation) && !self.allowed.contains(&gate.id))
    }
}

/// Whether `name` may name a gate: 1 to [`MAX_NAME_BYTES`] bytes, none of them a control or
/// bidirectional character (it reaches models and terminals).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_BYTES && !name.chars().any(hostile)
}

/// The gates as one call's descent asks about them (none has allowed anything yet).
#[derive(Debug)]
struct Watching(Arc<Vec<Arc<Gate>>>);

impl Gatekeeper for Watching {
    fn watches(&self, subject: Subject<'_>) -> bool {
        Keeper { gates: &self.0, allowed: &[] }.watches(subject)
    }

    fn unasked(&self, subject: Subject<'_>, operation: Operation) -> bool {
        Keeper { gates: &self.0, allowed: &[] }.unasked(subject, operation)
    }
}

/// The gates held for one call ([`Gates::hold`]): the barrier's read side, and the gates
/// registered when it started. Dropped when the call ends, letting go of the gates whose
/// sessions ended meanwhile.
#[derive(Debug)]
pub struct HeldGates<'g> {
    _barrier: std::sync::RwLockReadGuard<'g, ()>,
    registry: &'g Gates,
    at_once: bool,
    /// The gates registered (`None`: none was).
    watching: Option<Watching>,
}

impl HeldGates<'_> {
    /// How the call runs: at once, or on the pool with the gates held.
    pub fn how(&self) -> How<'_> {
        if self.at_once {
            return How::AtOnce;
        }
        How::Pool(self.watching.as_ref().map(|w| w as &dyn Gatekeeper))
    }
}

impl Drop for HeldGates<'_> {
    fn drop(&mut self) {
        if let Some(Watching(gates)) = &self.watching
            && gates.iter().any(|gate| !gate.open())
        {
            self.registry.prune();
        }
    }
}

/// The daemon's gates.
#[derive(Debug)]
pub struct Gates {
    enabled: bool,
    max_in_flight: usize,
    /// Write calls hold its read side from their look at the list to their end; registration
    /// takes its write side (see the module's doc).
    barrier: RwLock<()>,
    /// The gates, in registration order (replaced whole on every change).
    list: Mutex<Arc<Vec<Arc<Gate>>>>,
    /// How many `list` holds, read without its lock (it grows only under the barrier's write
    /// side).
    count: AtomicUsize,
    next_gate: AtomicU64,
    next_intent: AtomicU64,
}

impl Gates {
    /// The registry; `enabled: false` refuses every registration.
    pub fn new(enabled: bool, max_in_flight: usize) -> Arc<Self> {
        Arc::new(Self {
            enabled,
            max_in_flight: max_in_flight.max(1),
            barrier: RwLock::new(()),
            list: Mutex::new(Arc::new(Vec::new())),
            count: AtomicUsize::new(0),
            next_gate: AtomicU64::new(0),
            next_intent: AtomicU64::new(0),
        })
    }

    /// Whether gates may be registered.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn list(&self) -> Arc<Vec<Arc<Gate>>> {
        self.list.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Drops the gates that were unregistered or whose session ended.
    fn prune(&self) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if list.iter().any(|gate| !gate.open()) {
            *list = Arc::new(list.iter().filter(|gate| gate.open()).cloned().collect());
            self.count.store(list.len(), Ordering::Release);
        }
    }

    /// The gates registered now, held for one call as the runner chose [`How`] it runs, until
    /// the [`HeldGates`] is dropped: a registration that starts meanwhile waits for the call,
    /// like for any write call. At once (on an async worker): only when no gate is registered
    /// and no registration is under way (it never waits for the barrier), the call getting
    /// [`How::AtOnce`]; `None` otherwise, and the call must not run at once. On the pool
    /// (blocking: on the file-work slot's thread), always `Some`: the call gets [`How::Pool`]
    /// with the gates, and a write or edit of a file one of them watches answers
    /// [`Step::NeedsGate`].
    pub fn hold(&self, at_once: bool) -> Option<HeldGates<'_>> {
        if at_once {
            let barrier = self.barrier.try_read().ok()?;
            return (self.count.load(Ordering::Acquire) == 0).then_some(HeldGates {
                _barrier: barrier,
                registry: self,
                at_once,
                watching: None,
            });
        }
        let barrier = self.barrier.read().unwrap_or_else(PoisonError::into_inner);
        let watching = (self.count.load(Ordering::Acquire) > 0).then(|| Watching(self.list()));
        Some(HeldGates { _barrier: barrier, registry: self, at_once, watching })
    }

    /// Commits `pending` (blocking: on the file-work slot's thread), which the gates in
    /// `asked` allowed, with the gates registered now: a gate that covers it and was not asked
    /// (registered meanwhile) leaves it [`Step::NeedsGate`] again.
    pub fn commit<T: 'static, E: 'static>(
        &self,
        files: &FileContext<'_>,
        pending: Pending<T, E>,
        asked: &Asked,
    ) -> Result<Step<T, E>, E> {
        let _barrier = self.barrier.read().unwrap_or_else(PoisonError::into_inner);
        let gates = self.list();
        let committed = pending.commit(files, &Keeper { gates: &gates, allowed: &asked.allowed });
        if gates.iter().any(|gate| !gate.open()) {
            self.prune();
        }
        committed
    }

    /// Registers a gate (blocking: waits for the write calls that did not see it to end).
    pub fn register(&self, spec: GateSpec) -> Result<String, GateError> {
        if !self.enabled {
            return Err(GateError::Disabled);
        }
        self.prune();
        let id = format!("gate-{}", self.next_gate.fetch_add(1, Ordering::Relaxed) + 1);
        let gate = Arc::new(Gate {
            id: id.clone(),
            name: spec.name,
            session_id: spec.session_id,
            paths: spec.paths,
            devices: spec.devices,
            operations: spec.operations,
            timeout: spec.timeout,
            on_timeout: spec.on_timeout,
            roots: spec.roots,
            deny: spec.deny,
            places: Arc::new(Semaphore::new(self.max_in_flight)),
            waiting: AtomicU64::new(0),
            stopped: CancellationToken::new(),
            link: spec.link,
        });
        // Its answers are routed before the first intent can reach it.
        gate.link.activate();
        let _barrier = self.barrier.write().unwrap_or_else(PoisonError::into_inner);
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if list.iter().filter(|g| g.session_id == gate.session_id && g.open()).count()
            >= MAX_GATES_PER_SESSION
        {
            return Err(GateError::TooManyForSession);
        }
        if list.len() >= MAX_GATES {
            return Err(GateError::TooMany);
        }
        let mut next = Vec::with_capacity(list.len() + 1);
        next.extend(list.iter().cloned());
        next.push(gate);
        *list = Arc::new(next);
        self.count.store(list.len(), Ordering::Release);
        drop(list);
        Ok(id)
    }

    /// Unregisters `gate_id`, a gate of session `session_id`: its pending intents are refused.
    pub fn unregister(&self, gate_id: &str, session_id: &str) -> Result<(), GateError> {
        let list = self.list();
        let Some(gate) = list.iter().find(|g| g.id == gate_id && g.session_id == session_id && g.open())
        else {
            return Err(GateError::Unknown(gate_id.to_owned()));
        };
        gate.stopped.cancel();
        self.prune();
        Ok(())
    }

    /// The open gates, in registration order, as `daemon/status` lists them to the session
    /// `session_id`: its own, or every one when `all` (the daemon's owner asks); and how many
    /// others there are.
    pub fn infos(&self, session_id: &str, all: bool) -> (Vec<GateInfo>, u64) {
        let list = self.list();
        let open = list.iter().filter(|gate| gate.open());
        let (shown, others): (Vec<&Arc<Gate>>, Vec<&Arc<Gate>>) =
            open.partition(|gate| all || gate.session_id == session_id);
        (shown.iter().map(|gate| gate.info(self.max_in_flight)).collect(), others.len() as u64)
    }

    /// Asks every open gate that covers `intent` and has not allowed it yet (`asked`), in
    /// registration order, each in turn; stops at the first refusal. `cancel` withdraws the
    /// intent.
    pub async fn ask(
        &self,
        intent: &Intent,
        writer: &Writer,
        asked: &mut Asked,
        cancel: Option<&CancellationToken>,
    ) -> Verdict {
        asked.rounds += 1;
        if asked.rounds > MAX_ROUNDS {
            let refusal = GateRefusal {
                gate_id: String::new(),
                name: None,
                reason: "the file's gates or the file kept changing while they were asked; try again".into(),
                kind: RefusalKind::Denied,
                quoted: false,
            };
            return Verdict::Refused(refusal);
        }
        let gates: Vec<Arc<Gate>> = self
            .list()
            .iter()
            .filter(|g| {
                g.open() && g.covers(intent.subject(), intent.operation) && !asked.allowed.contains(&g.id)
            })
            .cloned()
            .collect();
        for gate in gates {
            match self.ask_one(&gate, intent, writer, cancel).await {
                Verdict::Allowed => asked.allowed.push(gate.id.clone()),
                Verdict::Refused(refusal) => return Verdict::Refused(refusal),
                Verdict::Cancelled => return Verdict::Cancelled,
            }
        }
        Verdict::Allowed
    }

    async fn ask_one(
        &self,
        gate: &Gate,
        intent: &Intent,
        writer: &Writer,
        cancel: Option<&CancellationToken>,
    ) -> Verdict {
        let intent_id = format!("intent-{}", self.next_intent.fetch_add(1, Ordering::Relaxed) + 1);
        let diff = match &intent.shown {
            _ if !gate.may_read(&intent.path) => INTENT_DIFF_HIDDEN.to_owned(),
            Shown::Diff(diff) => diff.clone(),
            Shown::TooLarge => INTENT_DIFF_TOO_LARGE.to_owned(),
            Shown::NotText => INTENT_DIFF_NOT_TEXT.to_owned(),
        };
        let params = WriteIntentParams {
            gate_id: gate.id.clone(),
            intent_id: intent_id.clone(),
            session_id: writer.session_id.clone(),
            client_name: writer.client_name.clone(),
            owner: writer.owner.clone(),
            path: intent.path.display().to_string(),
            operation: wire_operation(intent.operation),
            diff,
            old_version: intent.old_version.map(|v| v.to_string()),
            new_version: intent.new_version.to_string(),
            bytes: intent.bytes,
            links: intent.linked.map(|linked| linked.links),
        };
        let sent = AtomicBool::new(false);
        let exchange = async {
            let place = {
                let _waiting = Waiting::new(&gate.waiting);
                tokio::select! {
                    biased;
                    () = gate.gone() => None,
                    place = gate.places.clone().acquire_owned() => place.ok(),
                }
            };
            let Some(_place) = place else {
                return Verdict::Refused(
                    gate.refusal(RefusalKind::Disconnected, "it disconnected before answering".into()),
                );
            };
            let mut pending = match gate.link.request(&intent_id, GATE_WRITE_INTENT, &params).await {
                Ok(pending) => pending,
                Err(OutboundError::Full) => {
                    let why = "too many intents are pending for its session; retry later";
                    return Verdict::Refused(gate.refusal(RefusalKind::Denied, why.into()));
                }
                Err(OutboundError::Closed) => {
                    return Verdict::Refused(
                        gate.refusal(RefusalKind::Disconnected, "it disconnected before answering".into()),
                    );
                }
            };
            sent.store(true, Ordering::Relaxed);
            let answer = tokio::select! {
                answer = pending.answer() => answer.ok(),
                () = gate.stopped.cancelled() => None,
            };
            match answer {
                Some(answer) => gate_answer(gate, answer),
                None => Verdict::Refused(
                    gate.refusal(RefusalKind::Disconnected, "it disconnected before answering".into()),
                ),
            }
        };
        let timed = tokio::time::timeout(gate.timeout, exchange);
        let verdict = tokio::select! {
            biased;
            () = withdrawn(cancel, &writer.ended) => None,
            verdict = timed => Some(verdict),
        };
        let withdraw = |reason| {
            if sent.load(Ordering::Relaxed) {
                let params = GateCancelParams { id: intent_id.clone(), reason };
                gate.link.notify(CANCEL_REQUEST, params);
            }
        };
        match verdict {
            None => {
                withdraw(IntentWithdrawal::Cancelled);
                Verdict::Cancelled
            }
            Some(Ok(verdict)) => verdict,
            Some(Err(_)) => {
                withdraw(IntentWithdrawal::Timeout);
                tracing::info!(gate = %gate.id, intent = %intent_id, "a gate did not answer in time");
                match gate.on_timeout {
                    GateOnTimeout::Allow => Verdict::Allowed,
                    GateOnTimeout::Deny => Verdict::Refused(gate.refusal(
                        RefusalKind::TimedOut,
                        format!("it did not answer within {}", seconds(gate.timeout)),
                    )),
                }
            }
        }
    }
}

/// A duration as a refusal says it: `50 s`, `1.5 s`, `200 ms`.
fn seconds(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// Counts a write waiting for a place while it does.
struct Waiting<'a>(&'a AtomicU64);

impl<'a> Waiting<'a> {
    fn new(counter: &'a AtomicU64) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The verdict of a gate's answer: only a JSON object whose `allow` is `true` allows; `false`
/// refuses with its `reason`; anything else refuses (fail closed), and is logged.
fn gate_answer(gate: &Gate, answer: Answer) -> Verdict {
    match answer {
        Answer::Result(raw) => match decision(raw.get()) {
            Ok(WriteIntentResult { allow: true, .. }) => Verdict::Allowed,
            Ok(WriteIntentResult { allow: false, reason }) => {
                match reason.map(|r| bounded(r.trim())).filter(|r| !r.is_empty()) {
                    Some(words) => Verdict::Refused(gate.refusal_saying(words)),
                    None => Verdict::Refused(gate.refusal(RefusalKind::Denied, "no reason given".into())),
                }
            }
            Err(why) => {
                tracing::warn!(gate = %gate.id, why, "a gate's answer was not {{allow, reason?}}: the write is refused");
                Verdict::Refused(gate.refusal(
                    RefusalKind::Denied,
                    "its answer was not {\"allow\": true|false, \"reason\"?: text}".into(),
                ))
            }
        },
        Answer::Error { code, message } => Verdict::Refused(gate.refusal(
            RefusalKind::Denied,
            format!("it answered error {code}: {}", quoted(&bounded(&message))),
        )),
    }
}

/// A gate's answer as a decision: a JSON object with a boolean `allow` and, optionally, a text
/// `reason` (or `null`); other fields are ignored, for later versions. Anything else (an array,
/// a bare `true`, `"allow": "yes"`, `allow` or `reason` given twice) is not a decision, and says
/// why: a parser that keeps the last of two keys would read `{"allow":false,"allow":true}` as an
/// allow, another the first, so an answer that could mean either fails closed.
fn decision(raw: &str) -> Result<WriteIntentResult, &'static str> {
    /// The answer's fields: serde refuses a field given twice.
    #[derive(serde::Deserialize)]
    struct Answer {
        allow: serde_json::Value,
        #[serde(default)]
        reason: serde_json::Value,
    }
    if !matches!(serde_json::from_str::<serde_json::Value>(raw), Ok(serde_json::Value::Object(_))) {
        return Err("not a JSON object");
    }
    let answer = match serde_json::from_str::<Answer>(raw) {
        Ok(answer) => answer,
        Err(e) if e.to_string().starts_with("duplicate field") => return Err("a field given twice"),
        Err(_) => return Err("no boolean allow"),
    };
    let serde_json::Value::Bool(allow) = answer.allow else { return Err("no boolean allow") };
    let reason = match answer.reason {
        serde_json::Value::Null => None,
        serde_json::Value::String(reason) => Some(reason),
        _ => return Err("a reason that is not text"),
    };
    Ok(WriteIntentResult { allow, reason })
}

/// At most [`MAX_REASON_CHARS`] characters of `text`, `…` marking a cut.
fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_REASON_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_object_with_a_boolean_allow_is_a_decision() {
        let allow = |raw: &str| decision(raw).map(|d| d.allow);
        assert_eq!(allow(r#"{"allow": true}"#), Ok(true));
        assert_eq!(allow(r#"{"allow": true, "later": 1}"#), Ok(true));
        assert_eq!(decision(r#"{"allow": false, "reason": "no"}"#).map(|d| d.reason), Ok(Some("no".into())));
        assert_eq!(decision(r#"{"allow": false, "reason": null}"#).map(|d| d.reason), Ok(None));
        for raw in
            [r"[true]", r"true", r#""allow""#, r#"{"allow": "yes"}"#, r#"{"allow": 1}"#, r"{}", r"null"]
        {
            assert!(decision(raw).is_err(), "{raw}");
        }
        assert!(decision(r#"{"allow": true, "reason": 7}"#).is_err());
        // A key given twice is no decision, whichever value comes last: it fails closed.
        assert_eq!(
            decision(r#"{"allow": false, "allow": true}"#).map(|d| d.allow),
            Err("a field given twice")
        );
        assert!(decision(r#"{"allow": true, "allow": true}"#).is_err());
        assert!(decision(r#"{"allow": true, "reason": "a", "reason": "b"}"#).is_err());
        assert_eq!(allow(r#"{"allow": true, "later": 1, "later": 2}"#), Ok(true), "other fields are ignored");
        assert!(valid_name("review") && valid_name("the \"review\" gate"));
        assert!(
            !valid_name("") && !valid_name("a\nb") && !valid_name("x\u{1b}]0;t") && !valid_name("\u{202e}x")
        );
        assert!(!valid_name(&"n".repeat(MAX_NAME_BYTES + 1)));
    }

    #[test]
    fn reasons_are_bounded_and_timeouts_said_shortly() {
        assert_eq!(bounded("fine"), "fine");
        let long = "x".repeat(MAX_REASON_CHARS + 5);
        assert_eq!(bounded(&long).chars().count(), MAX_REASON_CHARS + 1);
        assert_eq!(seconds(Duration::from_millis(50_000)), "50 s");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(seconds(Duration::from_millis(200)), "200 ms");
    }
}

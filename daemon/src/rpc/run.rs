//! The one runner of the file methods: [`run`] decides how a call's file work runs — right here
//! on the async worker (a warm read, an edit the provider can make at once with no gate
//! registered), on the blocking pool in a fair slot, or through the write-intent gates — and
//! every handler of `tools/call`, `file/*`, `fs/*` and `gate/register` goes through it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use jsonrpsee::Extensions;
use jsonrpsee::types::ErrorObjectOwned;

use super::slots::FileSlots;
use super::{Cancel, ServerContext, cancelled, internal, session_of};
use crate::context::{FileContext, Files, Scope};
use crate::gate::{Carried, Gates, Ran, Verdict, Writer};
use crate::session::owners::Owner;
use crate::session::{Session, SessionOptions};

/// How a call's file work may run; [`run`] picks the place within what it allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Way {
    /// A read: right here when the provider answers it warm (a cached entry holding the file
    /// open on a local filesystem, or a small file read at once), else in a file slot.
    Read,
    /// Any other call that writes nothing: in a file slot.
    Pool,
    /// A search (`glob`, `grep`): in a search slot, apart from the file slots.
    Search,
    /// A write or edit: in a file slot, through the gates.
    Write,
    /// An edit that may be made right here when the provider can make it at once (a small file
    /// on a local filesystem, both locks free, no fsync) and no gate is registered; else as
    /// [`Way::Write`].
    Edit,
}

/// Runs `work` with the session's file context (its scope, read-only flag, deny rules and the
/// observations of `owner`; `None`: the session's default owner) the `way` allows. `work` may
/// run more than once: a try right here that needed the slow path did nothing (nothing was
/// recorded or written) and runs again in a slot; a write a gate watches stops with an intent,
/// which the gates are asked about with no slot held, and runs again to commit it or to answer
/// the refusal.
pub(super) async fn run<T, F>(
    ctx: &ServerContext,
    ext: &Extensions,
    way: Way,
    owner: Option<Arc<Owner>>,
    work: F,
) -> Result<T, ErrorObjectOwned>
where
    T: Send + 'static,
    F: Fn(&FileContext<'_>, &SessionOptions) -> Result<T, ErrorObjectOwned> + Send + 'static,
{
    match way {
        Way::Read => {
            if let Some(answer) =
                at_once(ctx, ext, owner.as_deref(), |files, options| Some(work(files, options)))?
            {
                return answer;
            }
            in_slot(ctx, ext, &ctx.file_work, owner, work).await
        }
        Way::Pool => in_slot(ctx, ext, &ctx.file_work, owner, work).await,
        Way::Search => in_slot(ctx, ext, &ctx.search_work, owner, work).await,
        Way::Write => through_gates(ctx, ext, owner, work).await,
        Way::Edit => {
            let at_once = at_once(ctx, ext, owner.as_deref(), |files, options| {
                ctx.gates.run_ungated(|| work(files, options))
            })?;
            if let Some(answer) = at_once {
                return answer;
            }
            through_gates(ctx, ext, owner, work).await
        }
    }
}

/// The session's file context: its scope, read-only flag and deny rules, and the observations
/// of `owner` (`None`: the session's default owner).
pub(super) fn context_of<'a>(
    files: &'a Files,
    session: &'a Session,
    options: &'a SessionOptions,
    owner: Option<&'a Owner>,
) -> FileContext<'a> {
    let scope = Scope { roots: &options.roots, cwd: &options.cwd };
    let observed = owner.map_or_else(|| session.observations(), Owner::observations);
    files.context(scope, observed, options.read_only, &options.deny)
}

/// Runs `work` once right here on the async worker, with the session's file context in
/// warm-only mode ([`FileContext::warm_only`]), when the session's roots are on local
/// filesystems. `None` (after `Ok`) when that cannot answer: the roots are not local, `work`
/// declined (`None`), or it needed the slow path; nothing was recorded or written then.
fn at_once<T>(
    ctx: &ServerContext,
    ext: &Extensions,
    owner: Option<&Owner>,
    work: impl FnOnce(&FileContext<'_>, &SessionOptions) -> Option<Result<T, ErrorObjectOwned>>,
) -> Result<Option<Result<T, ErrorObjectOwned>>, ErrorObjectOwned> {
    let session = session_of(ext)?;
    let Some(options) = session.options().filter(|o| o.local_roots) else { return Ok(None) };
    let cold = AtomicBool::new(false);
    let answer = work(&context_of(&ctx.files, &session, options, owner).warm_only(&cold), options);
    Ok(answer.filter(|_| !cold.load(Ordering::Relaxed)))
}

/// Runs `work` with the session's file context on the blocking pool in one of `slots` (the
/// file slots, or the search slots), shared fairly between sessions. A cancelled request gives
/// up its place in the queue; once it holds a slot, it runs.
async fn in_slot<T, F>(
    ctx: &ServerContext,
    ext: &Extensions,
    slots: &Arc<FileSlots>,
    owner: Option<Arc<Owner>>,
    work: F,
) -> Result<T, ErrorObjectOwned>
where
    T: Send + 'static,
    F: FnOnce(&FileContext<'_>, &SessionOptions) -> Result<T, ErrorObjectOwned> + Send + 'static,
{
    let session = session_of(ext)?;
    let files = ctx.files.clone();
    let _slot = match ext.get::<Cancel>() {
        Some(Cancel(token)) => tokio::select! {
            biased;
            () = token.cancelled() => return Err(cancelled()),
            slot = slots.acquire(session.id()) => slot,
        },
        None => slots.acquire(session.id()).await,
    };
    tokio::task::spawn_blocking(move || {
        let options = session.options().ok_or_else(super::error::not_initialized)?;
        work(&context_of(&files, &session, options, owner.as_deref()), options)
    })
    .await
    .map_err(internal)?
}

/// Runs a write or edit call's `work` in a file slot through the gates: when a gate watches the
/// file, the call stops with an intent, its slot is released, the gates are asked (no slot, no
/// thread held; `$/cancelRequest` withdraws the intent and nothing is written), and the call
/// runs again to commit it or to answer the refusal. With no gate registered, this is the plain
/// call in a slot.
async fn through_gates<T, F>(
    ctx: &ServerContext,
    ext: &Extensions,
    owner: Option<Arc<Owner>>,
    work: F,
) -> Result<T, ErrorObjectOwned>
where
    T: Send + 'static,
    F: Fn(&FileContext<'_>, &SessionOptions) -> Result<T, ErrorObjectOwned> + Send + 'static,
{
    let cancel = ext.get::<Cancel>().map(|c| c.0.clone());
    let mut carried = Carried::default();
    let mut work = work;
    loop {
        let registry: Arc<Gates> = ctx.gates.clone();
        // `work` goes into the blocking run and comes back with its outcome, for the next run.
        let (ran, back) = in_slot(ctx, ext, &ctx.file_work, owner.clone(), move |files, options| {
            let ran = registry.run(files, carried, |files| work(files, options));
            Ok((ran, work))
        })
        .await?;
        work = back;
        let intent = match ran {
            Ran::Done(answer) => return answer,
            Ran::Ask(asking) => {
                let (intent, back) = *asking;
                carried = back;
                intent
            }
        };
        let session = session_of(ext)?;
        let writer = Writer {
            session_id: session.id().to_owned(),
            client_name: session.options().and_then(|o| o.client.as_ref()).map(|c| c.name.clone()),
            owner: owner.as_deref().and_then(Owner::name).map(str::to_owned),
            ended: session.outbound().clone(),
        };
        drop(session);
        match ctx.gates.ask(&intent, &writer, &mut carried, cancel.as_ref()).await {
            Verdict::Allowed => Gates::approve(&mut carried, intent),
            // The refusal is answered by the next run, through the call's own error mapping.
            Verdict::Refused(_) => {}
            Verdict::Cancelled => return Err(cancelled()),
        }
        if writer.ended.is_closed() {
            // The client is gone: nothing it asked for lands after it left.
            return Err(cancelled());
        }
    }
}

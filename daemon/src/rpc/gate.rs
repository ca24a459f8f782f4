//! Handlers of `gate/register` and `gate/unregister` (how a write goes through the gates is
//! [`super::run`]'s).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use filectx_protocol::methods::{GATE_REGISTER, GATE_UNREGISTER};
use filectx_protocol::{GateOperation, GateRegisterParams, GateRegisterResult, GateUnregisterParams};
use jsonrpsee::Extensions;
use jsonrpsee::types::{ErrorObjectOwned, Params};

use super::{ServerContext, internal, parse_params, session_of};
use crate::config::GateSessions;
use crate::context::{Kind, Step};
use crate::gate::{self as gates, GateError, GateSpec};

/// `gate/register`: this session becomes a gate for `paths` (inside its roots, readable by it).
pub async fn register(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<GateRegisterResult, ErrorObjectOwned> {
    if !ctx.gates.enabled() {
        return Err(GateError::Disabled.into());
    }
    let params: GateRegisterParams = parse_params(GATE_REGISTER, &params)?;
    let session = session_of(&ext)?;
    let options = session.options().ok_or_else(super::error::not_initialized)?;
    // Who may be a gate: never a read-only session; under `gate_sessions = "token"` only one
    // that carries the daemon's gate token (which only the daemon's user can read).
    if options.read_only {
        return Err(GateError::ReadOnly.into());
    }
    if ctx.config.gate_sessions == GateSessions::Token {
        let Some(token) = &ctx.config.gate_token else { return Err(GateError::NoToken.into()) };
        if !params.gate_token.as_deref().is_some_and(|given| token.matches(given)) {
            tracing::info!(session = session.id(), "gate/register without the gate token refused");
            return Err(GateError::Token(token.file().display().to_string()).into());
        }
    }
    if params.paths.is_empty() || params.paths.len() > gates::MAX_PATHS {
        return Err(GateError::Paths.into());
    }
    let operations: Vec<GateOperation> = match &params.operations {
        None => GateOperation::ALL.to_vec(),
        Some(ops) if ops.is_empty() => return Err(GateError::NoOperations.into()),
        Some(ops) => ops.clone(),
    };
    if params.name.as_ref().is_some_and(|name| !gates::valid_name(name)) {
        return Err(GateError::Name.into());
    }
    let timeout_ms = params.timeout_ms.unwrap_or(gates::DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > gates::MAX_TIMEOUT_MS {
        return Err(GateError::Timeout.into());
    }
    let raw_paths = params.paths.clone();
    // Each path as the session's reads see it: inside its roots, not denied, existing; and the
    // device it is on, from a handle opened beneath the root.
    let (paths, devices) = super::run::run(&ctx, &ext, super::run::Op::Gate, None, move |files, _, _| {
        let mut paths: Vec<PathBuf> = Vec::with_capacity(raw_paths.len());
        let mut devices: Vec<u64> = Vec::with_capacity(raw_paths.len());
        for raw in &raw_paths {
            let (target, stat) = files.unrecorded().stat(raw)?;
            if stat.kind == Kind::Missing {
                return Err(GateError::Missing(target.display).into());
            }
            let device = files.device_of(&target)?;
            if !devices.contains(&device) {
                devices.push(device);
            }
            if !paths.contains(&target.path) {
                paths.push(target.path);
            }
        }
        Ok(Step::Done((paths, devices)))
    })
    .await?;
    let mut seen = Vec::new();
    let spec = GateSpec {
        paths,
        devices,
        operations: operations
            .into_iter()
            .filter(|op| {
                let fresh = !seen.contains(op);
                seen.push(*op);
                fresh
            })
            .map(gates::operation_of)
            .collect(),
        name: params.name,
        timeout: Duration::from_millis(timeout_ms),
        on_timeout: params.on_timeout.unwrap_or_default(),
        session_id: session.id().to_owned(),
        roots: options.roots.iter().map(|root| root.path().to_path_buf()).collect(),
        deny: options.deny.clone(),
        link: session.outbound().clone(),
    };
    let registry = ctx.gates.clone();
    // Registration waits for the write calls that did not see the gate: off the async workers.
    let gate_id = tokio::task::spawn_blocking(move || registry.register(spec)).await.map_err(internal)??;
    tracing::info!(gate = %gate_id, "gate registered");
    Ok(GateRegisterResult { gate_id })
}

/// `gate/unregister`: a gate of this session stops; its pending intents are refused.
pub fn unregister(
    params: &Params<'_>,
    ctx: &ServerContext,
    ext: &Extensions,
) -> Result<(), ErrorObjectOwned> {
    let params: GateUnregisterParams = parse_params(GATE_UNREGISTER, params)?;
    let session = session_of(ext)?;
    ctx.gates.unregister(&params.gate_id, session.id())?;
    tracing::info!(gate = %params.gate_id, "gate unregistered");
    Ok(())
}

//! Test-only methods (cargo feature `test-hooks`, and only when the daemon runs with
//! `FILECTX_TEST_HOOKS=1`): ways for the integration tests to make a handler fail on purpose.
//!
//! - `debug/panic` `{afterMs?: int, blocking?: bool}` waits `afterMs` milliseconds, then panics
//!   inside its handler (or, with `blocking`, inside a task on the blocking pool, as file work
//!   runs). The transport must answer -32603 for that request alone.
//! - `debug/hold` `{dir: str, name: str}` stands for a slow file operation: it takes one of the
//!   session's file-work slots (the same fair slots as the file methods), creates
//!   `<dir>/<name>.started` on the blocking pool, waits there until `<dir>/<name>.go` exists (at
//!   most a minute), and answers `name`. Tests use it to hold slots for as long as they like
//!   and to see which requests got one, without timing anything.
//!
//! Never part of a default build; with the feature compiled in (as `cargo test --workspace`
//! does through feature unification) the methods still exist only when the variable is set.

use std::sync::Arc;
use std::time::Duration;

use jsonrpsee::Extensions;
use jsonrpsee::core::RegisterMethodError;
use jsonrpsee::core::server::RpcModule;
use jsonrpsee::types::{ErrorObjectOwned, Params};

use super::ServerContext;

/// The environment variable that switches the hooks on (value `1`).
pub const ENV: &str = "FILECTX_TEST_HOOKS";

/// The method that panics on request.
pub const DEBUG_PANIC: &str = "debug/panic";

/// The method that holds a file-work slot until told to let go.
pub const DEBUG_HOLD: &str = "debug/hold";

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HoldParams {
    dir: std::path::PathBuf,
    name: String,
}

async fn hold_slot(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<String, ErrorObjectOwned> {
    let params: HoldParams = super::parse_params(DEBUG_HOLD, &params)?;
    let session = super::session_of(&ext)?;
    let _slot = ctx.file_work.acquire(session.id()).await;
    tokio::task::spawn_blocking(move || {
        let started = params.dir.join(format!("{}.started", params.name));
        std::fs::write(&started, b"").map_err(super::internal)?;
        let go = params.dir.join(format!("{}.go", params.name));
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !go.exists() {
            if std::time::Instant::now() > deadline {
                return Err(super::internal(format!("{DEBUG_HOLD}: {} never appeared", go.display())));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(params.name)
    })
    .await
    .map_err(super::internal)?
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PanicParams {
    #[serde(default)]
    after_ms: u64,
    #[serde(default)]
    blocking: bool,
}

async fn panic_on_request(
    params: Params<'static>,
    _ctx: Arc<ServerContext>,
    _ext: Extensions,
) -> Result<(), ErrorObjectOwned> {
    let params: PanicParams = match params.as_str() {
        Some(_) => super::parse_params(DEBUG_PANIC, &params)?,
        None => PanicParams::default(),
    };
    if params.after_ms > 0 {
        tokio::time::sleep(Duration::from_millis(params.after_ms.min(60_000))).await;
    }
    if params.blocking {
        let joined = tokio::task::spawn_blocking(|| {
            if std::hint::black_box(true) {
                panic!("debug/panic: deliberate panic on the blocking pool, requested by a test");
            }
        })
        .await;
        // A panicked blocking task comes back as a join error: answer it like the file methods do.
        return joined.map_err(super::internal);
    }
    if std::hint::black_box(true) {
        panic!("debug/panic: deliberate panic in a request handler, requested by a test");
    }
    Ok(())
}

/// Adds the test-only methods to the table when [`ENV`] is `1`; otherwise adds nothing.
pub(crate) fn register(module: &mut RpcModule<ServerContext>) -> Result<(), RegisterMethodError> {
    if std::env::var_os(ENV).is_some_and(|v| v == "1") {
        tracing::warn!("test hooks enabled ({ENV}=1): debug/panic and debug/hold are served");
        module.register_async_method(DEBUG_PANIC, panic_on_request)?;
        module.register_async_method(DEBUG_HOLD, hold_slot)?;
    }
    Ok(())
}

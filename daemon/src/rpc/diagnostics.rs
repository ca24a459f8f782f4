//! Diagnostics at the edge: the wait a write, an edit or a restore makes for its file's language
//! server once it landed (no slot, no lock, no thread held; a cancel answers at once, pending),
//! its report on the wire, and `lsp/diagnostics`.

use std::path::Path;
use std::sync::Arc;

use filectx_protocol::methods::LSP_DIAGNOSTICS;
use filectx_protocol::{
    Diagnostic as WireDiagnostic, DiagnosticSeverity, DiagnosticsMode, DiagnosticsReport, DiagnosticsStatus,
    LspDiagnosticsParams, LspDiagnosticsResult, OtherFile, ToolName,
};
use jsonrpsee::Extensions;
use jsonrpsee::types::{ErrorObjectOwned, Params};

use super::run::{Op, run};
use super::{Cancel, ServerContext, parse_params, session_of};
use crate::context::{Diagnosed, Diagnostic, Report, Severity, Status, Step, Version, visible_to};

/// Most diagnostics and other files a structured report carries.
const MAX_REPORTED: usize = 100;
const MAX_OTHER_FILES: usize = 20;

/// What the change of `path` that wrote `version` introduced, waited for when the session waits
/// for diagnostics and a server serves the file (`None` otherwise): the report, and how other
/// files are shown to the session.
pub(super) async fn after_change(
    ctx: &ServerContext,
    ext: &Extensions,
    path: &Path,
    version: Version,
) -> Option<(Report, impl Fn(&Path) -> String + use<>)> {
    let lsp = ctx.files.lsp()?.clone();
    lsp.serves(path)?;
    let session = session_of(ext).ok()?;
    let options = session.options()?;
    if options.diagnostics == DiagnosticsMode::Off {
        return None;
    }
    let (roots, deny, cwd) = (options.roots.clone(), options.deny.clone(), options.cwd.clone());
    drop(session);
    let cancel = ext.get::<Cancel>().map(|c| c.0.clone());
    let visible = |p: &Path| visible_to(&roots, &deny, p);
    let report = lsp.wait(path, version, &visible, cancel.as_ref()).await?;
    Some((report, move |p: &Path| crate::context::display(p, &cwd)))
}

/// The text a write's or edit's answer ends with (after a newline), when there is one.
pub(super) async fn after_change_text(
    ctx: &ServerContext,
    ext: &Extensions,
    path: &Path,
    version: Version,
) -> Option<String> {
    let can_ask = session_of(ext).ok()?.options()?.tools.contains(&ToolName::Diagnostics);
    let (report, shown) = after_change(ctx, ext, path, version).await?;
    Some(crate::tools::render::after_change(&report, can_ask, &shown))
}

/// The structured report of a change, when there is one.
pub(super) async fn after_change_report(
    ctx: &ServerContext,
    ext: &Extensions,
    path: &Path,
    version: Version,
) -> Option<DiagnosticsReport> {
    let (report, shown) = after_change(ctx, ext, path, version).await?;
    let display = shown(path);
    Some(DiagnosticsReport {
        status: status(&report.status),
        server: report.server.clone(),
        elapsed_ms: millis(&report),
        introduced: report.introduced.iter().take(MAX_REPORTED).map(|d| wire(&display, d)).collect(),
        remaining: report.remaining as u64,
        other_files: report
            .other_files
            .iter()
            .take(MAX_OTHER_FILES)
            .map(|(p, n)| OtherFile { path: shown(p), introduced: *n as u64 })
            .collect(),
        reason: reason(&report.status),
    })
}

/// The diagnostics of `target` as it is now: `None` when no server serves it.
pub(super) async fn now(ctx: &ServerContext, ext: &Extensions, target: &Diagnosed) -> Option<Report> {
    let lsp = ctx.files.lsp()?.clone();
    let cancel = ext.get::<Cancel>().map(|c| c.0.clone());
    lsp.current(&target.root, &target.path, target.version, cancel.as_ref()).await
}

fn millis(report: &Report) -> u64 {
    u64::try_from(report.elapsed.as_millis()).unwrap_or(u64::MAX)
}

fn status(status: &Status) -> DiagnosticsStatus {
    match status {
        Status::Fresh => DiagnosticsStatus::Fresh,
        Status::Pending => DiagnosticsStatus::Pending,
        Status::Starting => DiagnosticsStatus::Starting,
        Status::Failed(_) => DiagnosticsStatus::Failed,
    }
}

fn reason(status: &Status) -> Option<String> {
    match status {
        Status::Failed(why) => Some(why.clone()),
        _ => None,
    }
}

fn wire(display: &str, d: &Diagnostic) -> WireDiagnostic {
    WireDiagnostic {
        path: display.to_owned(),
        line: d.line.saturating_add(1),
        column: d.character.saturating_add(1),
        severity: match d.severity {
            Severity::Error => DiagnosticSeverity::Error,
            Severity::Warning => DiagnosticSeverity::Warning,
            Severity::Information => DiagnosticSeverity::Information,
            Severity::Hint => DiagnosticSeverity::Hint,
        },
        message: d.message.clone(),
        source: d.source.clone(),
        code: d.code.clone(),
    }
}

/// `lsp/diagnostics`.
pub async fn lsp_diagnostics(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<LspDiagnosticsResult, ErrorObjectOwned> {
    let params: LspDiagnosticsParams = parse_params(LSP_DIAGNOSTICS, &params)?;
    let target = run(&ctx, &ext, Op::Diagnostics, None, move |files, _, _| {
        Ok(Step::Done(files.diagnosed(&params.path)?))
    })
    .await?;
    let Some(report) = now(&ctx, &ext, &target).await else {
        return Ok(LspDiagnosticsResult {
            status: DiagnosticsStatus::None,
            server: None,
            version: target.version.to_string(),
            diagnostics: Vec::new(),
            elapsed_ms: 0,
            reason: None,
        });
    };
    Ok(LspDiagnosticsResult {
        status: status(&report.status),
        server: Some(report.server.clone()),
        version: target.version.to_string(),
        diagnostics: report.introduced.iter().map(|d| wire(&target.display, d)).collect(),
        elapsed_ms: millis(&report),
        reason: reason(&report.status),
    })
}

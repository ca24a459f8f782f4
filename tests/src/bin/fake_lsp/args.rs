//! The command line of `fake-lsp` (main.rs says what each flag does), parsed into [`Options`].

use std::path::PathBuf;
use std::time::Duration;

/// The usage line printed with a bad command line.
pub const USAGE: &str = "usage: fake-lsp [--stdio] [--name NAME] [--log FILE] [--late MS] [--crash-at N] \
     [--crash-once FILE] [--no-init] [--flood N] [--control-bytes] [--huge BYTES] [--out-of-order] \
     [--versionless] [--pull] [--on-save] [--grandchild] [--grandchild-rss MB] [--rss MB] [--register] \
     [--garbage] [--deaf] [--partial MS]";

/// What the command line asked for.
#[derive(Debug, Default)]
pub struct Options {
    /// `serverInfo.name`.
    pub name: String,
    /// Where received messages and events are appended.
    pub log: Option<PathBuf>,
    /// How long each publish (and pull answer) is held back.
    pub late: Duration,
    /// The didChange (counted from 1) that ends the process with code 3.
    pub crash_at: Option<u64>,
    /// With `crash_at`: crash only when this file does not exist (creating it).
    pub crash_once: Option<PathBuf>,
    /// Never answer `initialize`.
    pub no_init: bool,
    /// Made-up log messages and publishes after each check.
    pub flood: usize,
    /// Wrap diagnostic messages in control bytes.
    pub control_bytes: bool,
    /// The size of the huge message and frame sent on `initialized`.
    pub huge: Option<usize>,
    /// Publish the previous set again, labelled with the previous version, after each change.
    pub out_of_order: bool,
    /// Publishes carry no version.
    pub versionless: bool,
    /// Pull diagnostics instead of pushing them.
    pub pull: bool,
    /// Check on didSave only.
    pub on_save: bool,
    /// Start a grandchild that survives polite signals.
    pub grandchild: bool,
    /// Memory the grandchild holds, in MiB.
    pub grandchild_rss_mb: usize,
    /// Memory held from the start, in MiB.
    pub rss_mb: usize,
    /// Ask the client `client/registerCapability` and `workspace/configuration`.
    pub register: bool,
    /// Send a frame that is not JSON and one without `Content-Length`.
    pub garbage: bool,
    /// After each check, work in progress and the changed document published empty, the real
    /// publishes and the end of the work this long later.
    pub partial: Option<Duration>,
    /// Stop reading stdin once initialized.
    pub deaf: bool,
    /// Be the grandchild (hidden).
    pub sleeper: bool,
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut opts = Options { name: "fake-lsp".to_owned(), ..Options::default() };
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--stdio" => {}
            "--name" => opts.name = value()?,
            "--log" => opts.log = Some(PathBuf::from(value()?)),
            "--late" => opts.late = Duration::from_millis(number(&flag, &value()?)?),
            "--crash-at" => opts.crash_at = Some(number(&flag, &value()?)?),
            "--crash-once" => opts.crash_once = Some(PathBuf::from(value()?)),
            "--no-init" => opts.no_init = true,
            "--flood" => opts.flood = size(&flag, &value()?)?,
            "--control-bytes" => opts.control_bytes = true,
            "--huge" => opts.huge = Some(size(&flag, &value()?)?),
            "--out-of-order" => opts.out_of_order = true,
            "--versionless" => opts.versionless = true,
            "--pull" => opts.pull = true,
            "--on-save" => opts.on_save = true,
            "--grandchild" => opts.grandchild = true,
            "--grandchild-rss" => opts.grandchild_rss_mb = size(&flag, &value()?)?,
            "--rss" => opts.rss_mb = size(&flag, &value()?)?,
            "--register" => opts.register = true,
            "--garbage" => opts.garbage = true,
            "--deaf" => opts.deaf = true,
            "--partial" => opts.partial = Some(Duration::from_millis(number(&flag, &value()?)?)),
            "--sleeper" => opts.sleeper = true,
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    if opts.crash_once.is_some() && opts.crash_at.is_none() {
        return Err("--crash-once needs --crash-at".to_owned());
    }
    Ok(opts)
}

fn number(flag: &str, value: &str) -> Result<u64, String> {
    value.parse().map_err(|_| format!("{flag} takes a whole number, not {value:?}"))
}

fn size(flag: &str, value: &str) -> Result<usize, String> {
    value.parse().map_err(|_| format!("{flag} takes a whole number, not {value:?}"))
}

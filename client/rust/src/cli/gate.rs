//! `filectx gate`: registers a write gate for some folders and lets a person (or, with `--json`,
//! a program) allow or deny each write or edit an agent is about to make there. The rules
//! (`--allow-create`, `--deny`, `--auto-allow`) settle routine intents without asking; the
//! others are shown one at a time, in order, and those that arrive meanwhile wait their turn.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use filectx_client::gate::{
    Decision, Gate, GateError, GateEvent, GateOnTimeout as OnTimeout, GateOperation as Operation,
    GateOptions, INTENT_DIFF_HIDDEN, INTENT_DIFF_NOT_TEXT, INTENT_DIFF_TOO_LARGE, IntentWithdrawal,
    WriteIntent, relative_to_gate,
};
use filectx_client::terminal::{escape_field, escape_json, escape_line};
use filectx_client::{Client, ClientError, SpawnOptions};
use globset::GlobMatcher;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

use super::args::{Cli, GateArgs};
use super::values::{canonical_root, compile_glob};

/// The daemon's default wait for a decision, when `--timeout` does not set one.
const DAEMON_DEFAULT_TIMEOUT: Duration = Duration::from_secs(50);
/// How long unregistering may take when the gate stops.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// `filectx gate`: registers, then serves intents until stdin ends, SIGINT or SIGTERM; then
/// unregisters.
pub(crate) async fn run_gate(cli: &Cli, args: &GateArgs, socket: &Path) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()
        .and_then(|dir| dir.canonicalize())
        .context("cannot resolve the current folder")?;
    let folders = if args.folders.is_empty() {
        vec![cwd.clone()]
    } else {
        args.folders.iter().map(|folder| canonical_root(&cwd, folder)).collect::<anyhow::Result<_>>()?
    };
    let roots = cli.roots();
    let roots: Vec<PathBuf> = if roots.is_empty() {
        folders.clone()
    } else {
        roots.iter().map(|root| canonical_root(&cwd, root)).collect::<anyhow::Result<_>>()?
    };
    let rules = Rules::new(args)?;
    let mut options = GateOptions::new(folders.iter().map(|f| utf8(f)).collect::<anyhow::Result<Vec<_>>>()?)
        .roots(roots.iter().map(|r| utf8(r)).collect::<anyhow::Result<Vec<_>>>()?);
    if let Some(name) = &args.name {
        options = options.name(name.clone());
    }
    if let Some(timeout) = args.timeout {
        options = options.timeout(timeout);
    }
    if let Some(on_timeout) = args.on_timeout {
        options = options.on_timeout(on_timeout.into());
    }
    let mut gate = connect(socket, options, !cli.no_autostart).await?;
    let policy = Policy {
        wait: args.timeout.unwrap_or(DAEMON_DEFAULT_TIMEOUT),
        on_timeout: args.on_timeout.map_or(OnTimeout::Deny, Into::into),
    };
    // Listening replaces the signals' default action (ending the process at once) for good.
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut screen = if cli.json { Screen::Json } else { Screen::Person(Box::new(Person::new(policy))) };
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut served = screen.ready(&gate, &rules);
    while served.is_ok() {
        let deadline = screen.deadline();
        served = tokio::select! {
            event = gate.next() => match event {
                Ok(event) => screen.event(&gate, &rules, event).await,
                // The connection is gone: nothing to unregister.
                Err(error) => return Err(error.into()),
            },
            line = lines.next_line() => match line.context("cannot read stdin") {
                Ok(Some(line)) => screen.line(&gate, &line).await,
                Ok(None) => break,
                Err(error) => Err(error),
            },
            () = sleep_until(deadline) => screen.expired(&gate).await,
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
        };
    }
    // Whoever read stdout went away (a program driving --json): stop as at the end of stdin.
    let served = match served {
        Err(error) if is_broken_pipe(&error) => Ok(()),
        other => other,
    };
    // Unregister whatever ended the loop, unless the connection broke.
    let closed = tokio::time::timeout(CLOSE_TIMEOUT, gate.close()).await;
    served?;
    match closed {
        Ok(Ok(())) => {
            screen.closed();
            Ok(())
        }
        Ok(Err(error)) => Err(error.into()),
        Err(_) => bail!("the daemon did not confirm gate/unregister within {} s", CLOSE_TIMEOUT.as_secs()),
    }
}

/// Whether `error` is a write to a closed pipe.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Connects and registers; when nobody answers at the socket and autostart is on, starts the
/// daemon first (as every command does) and tries again.
async fn connect(socket: &Path, options: GateOptions, autostart: bool) -> anyhow::Result<Gate> {
    match Gate::connect(socket, options.clone()).await {
        Err(ClientError::Connect { source, .. })
            if autostart
                && matches!(
                    source.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
        {
            let probe = Client::connect_or_spawn(socket, SpawnOptions::default()).await?;
            drop(probe);
            Ok(Gate::connect(socket, options).await?)
        }
        other => Ok(other?),
    }
}

/// `path` as the UTF-8 string the wire needs.
fn utf8(path: &Path) -> anyhow::Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("the folder {} is not valid UTF-8", path.display()))
}

/// What the daemon does with an intent nobody decided: after `wait`, `on_timeout`.
#[derive(Debug, Clone, Copy)]
struct Policy {
    wait: Duration,
    on_timeout: OnTimeout,
}

/// The rules that decide routine intents without asking: `--deny` first, then `--auto-allow`,
/// then `--allow-create`.
#[derive(Debug)]
pub(crate) struct Rules {
    deny: Vec<Rule>,
    allow: Vec<Rule>,
    allow_create: bool,
}

/// One `--deny` or `--auto-allow` glob.
#[derive(Debug)]
struct Rule {
    glob: String,
    matcher: GlobMatcher,
}

impl Rule {
    /// Whether the intent's path matches: a glob without `/` matches the file name, one starting
    /// with `/` the absolute path, any other the path relative to its gated folder.
    fn matches(&self, folders: &[String], path: &str) -> bool {
        if self.glob.starts_with('/') {
            return self.matcher.is_match(path);
        }
        if !self.glob.contains('/') {
            return Path::new(path).file_name().is_some_and(|name| self.matcher.is_match(name));
        }
        relative_to_gate(folders, path).is_some_and(|(_, relative)| self.matcher.is_match(relative))
    }
}

impl Rules {
    fn new(args: &GateArgs) -> anyhow::Result<Self> {
        let compile = |globs: &[String]| -> anyhow::Result<Vec<Rule>> {
            globs
                .iter()
                .map(|glob| {
                    let matcher = compile_glob(glob).map_err(anyhow::Error::msg)?;
                    Ok(Rule { glob: glob.clone(), matcher })
                })
                .collect()
        };
        Ok(Self {
            deny: compile(&args.deny)?,
            allow: compile(&args.auto_allow)?,
            allow_create: args.allow_create,
        })
    }

    /// The decision a rule makes for `intent`, and the rule, as the command line wrote it.
    fn decide(&self, folders: &[String], intent: &WriteIntent) -> Option<(Decision, String)> {
        if let Some(rule) = self.deny.iter().find(|rule| rule.matches(folders, &intent.path)) {
            let rule = format!("--deny {}", rule.glob);
            return Some((Decision::deny(format!("denied by the gate's rule {rule}")), rule));
        }
        if let Some(rule) = self.allow.iter().find(|rule| rule.matches(folders, &intent.path)) {
            return Some((Decision::allow(), format!("--auto-allow {}", rule.glob)));
        }
        if self.allow_create && intent.operation == Operation::Create {
            return Some((Decision::allow(), "--allow-create".to_owned()));
        }
        None
    }

    /// The rules in words, for the banner; empty without any.
    fn describe(&self) -> Vec<String> {
        let mut rules: Vec<String> = self.deny.iter().map(|rule| format!("--deny {}", rule.glob)).collect();
        rules.extend(self.allow.iter().map(|rule| format!("--auto-allow {}", rule.glob)));
        if self.allow_create {
            rules.push("--allow-create".to_owned());
        }
        rules
    }
}

/// Who decides: a person at a terminal, or a program speaking JSON lines.
enum Screen {
    Json,
    Person(Box<Person>),
}

/// One JSON decision line on stdin.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DecisionLine {
    intent_id: String,
    allow: bool,
    #[serde(default)]
    reason: Option<String>,
}

impl Screen {
    /// Says the gate is registered.
    fn ready(&mut self, gate: &Gate, rules: &Rules) -> anyhow::Result<()> {
        match self {
            Self::Json => emit(&json!({"type": "ready", "gateId": gate.gate_id(), "paths": gate.paths()})),
            Self::Person(person) => person.banner(gate, rules),
        }
    }

    /// When the intent being shown to the person is settled by the daemon.
    fn deadline(&self) -> Option<Instant> {
        match self {
            Self::Json => None,
            Self::Person(person) => person.current.as_ref().map(|(_, deadline)| *deadline),
        }
    }

    async fn event(&mut self, gate: &Gate, rules: &Rules, event: GateEvent) -> anyhow::Result<()> {
        match event {
            GateEvent::Intent(intent) => {
                if let Some((decision, rule)) = rules.decide(gate.paths(), &intent) {
                    return self.auto(gate, *intent, decision, rule).await;
                }
                match self {
                    Self::Json => {
                        let mut line = serde_json::to_value(&intent)?;
                        line["type"] = json!("intent");
                        emit(&line)
                    }
                    Self::Person(person) => person.arrived(gate, *intent),
                }
            }
            GateEvent::Withdrawn { intent_id, path, reason } => match self {
                Self::Json => emit(&json!({
                    "type": "withdrawn",
                    "intentId": intent_id,
                    "path": path,
                    "reason": reason,
                })),
                Self::Person(person) => person.withdrawn(gate, &intent_id, reason),
            },
        }
    }

    /// An intent a rule decided: answered at once, and said.
    async fn auto(
        &mut self,
        gate: &Gate,
        intent: WriteIntent,
        decision: Decision,
        rule: String,
    ) -> anyhow::Result<()> {
        let allow = decision.allow;
        let reason = decision.reason.clone();
        match gate.decide(&intent.intent_id, decision).await {
            Ok(()) | Err(GateError::UnknownIntent { .. }) => {}
            Err(GateError::Client(error)) => return Err(error.into()),
            Err(other) => return Err(other.into()),
        }
        match self {
            Self::Json => {
                let mut line = json!({
                    "type": "auto",
                    "intentId": intent.intent_id,
                    "path": intent.path,
                    "operation": intent.operation,
                    "allow": allow,
                    "rule": rule,
                });
                if let Some(reason) = reason {
                    line["reason"] = json!(reason);
                }
                emit(&line)
            }
            Self::Person(person) => {
                let verdict = if allow { person.paint.green("allowed") } else { person.paint.red("denied") };
                let what = format!("{} {}", intent.operation.as_str(), person.shown_path(gate, &intent.path));
                person.notice(&format!("{verdict} {what} by {}: {}", agent(&intent), escape_field(&rule)))
            }
        }
    }

    async fn line(&mut self, gate: &Gate, line: &str) -> anyhow::Result<()> {
        match self {
            Self::Json => {
                if line.trim().is_empty() {
                    return Ok(());
                }
                let decision: DecisionLine = match serde_json::from_str(line) {
                    Ok(decision) => decision,
                    Err(error) => {
                        eprintln!(
                            "filectx gate: ignoring the stdin line \"{}\": {error} (expected \
                             {{\"intentId\": \"...\", \"allow\": true|false, \"reason\": \"...\"}})",
                            escape_field(line)
                        );
                        return Ok(());
                    }
                };
                let reason = decision.reason.unwrap_or_default();
                let answer = if decision.allow {
                    Decision { allow: true, reason: (!reason.is_empty()).then_some(reason) }
                } else {
                    Decision::deny(reason)
                };
                match gate.decide(&decision.intent_id, answer).await {
                    Ok(()) => Ok(()),
                    Err(GateError::Client(error)) => Err(error.into()),
                    Err(error) => {
                        eprintln!("filectx gate: {}", escape_field(&error.to_string()));
                        Ok(())
                    }
                }
            }
            Self::Person(person) => person.answer(gate, line).await,
        }
    }

    async fn expired(&mut self, gate: &Gate) -> anyhow::Result<()> {
        match self {
            Self::Json => Ok(()),
            Self::Person(person) => person.expired(gate),
        }
    }

    fn closed(&mut self) {
        if let Self::Person(person) = self {
            let _ = person.say("\nfilectx gate: stopped; the gate is unregistered.\n");
        }
    }
}

/// Writes one JSON line to stdout, flushed (with nothing raw in it that a terminal acts on).
fn emit(value: &Value) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    let line = value.to_string();
    writeln!(stdout, "{}", escape_json(&line)).and_then(|()| stdout.flush()).context("cannot write to stdout")
}

/// The agent an intent comes from: its client name, session and owner (each escaped: the
/// agent chose them).
fn agent(intent: &WriteIntent) -> String {
    let name = intent.client_name.as_deref().map_or(Cow::Borrowed("an agent"), escape_field);
    let session = escape_field(&intent.session_id);
    match &intent.owner {
        Some(owner) => format!("{name} (session {session}, owner {})", escape_field(owner)),
        None => format!("{name} (session {session})"),
    }
}

/// The note under a diff some of whose lines were marked with `!`.
const MARKED: &str = "(! marks lines holding control or bidirectional characters, shown as escapes)";

/// ANSI colours, or none.
#[derive(Debug, Clone, Copy)]
struct Paint {
    on: bool,
}

impl Paint {
    /// Colours only on a terminal, and not when `NO_COLOR` is set to something.
    fn detect() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        Self { on: std::io::stdout().is_terminal() && !no_color }
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.on { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
    }

    fn bold(self, text: &str) -> String {
        self.wrap("1", text)
    }

    fn green(self, text: &str) -> String {
        self.wrap("32", text)
    }

    fn red(self, text: &str) -> String {
        self.wrap("31", text)
    }

    fn cyan(self, text: &str) -> String {
        self.wrap("36", text)
    }

    fn yellow(self, text: &str) -> String {
        self.wrap("33", text)
    }

    /// A unified diff, line by line: headers bold, hunks cyan, additions green, removals red.
    /// What the agent wrote may hold terminal controls: each line is shown escaped, a line that
    /// needed it is marked with a `!` before it, and a note under the diff says what `!` means.
    fn diff(self, diff: &str) -> String {
        let mut out = String::new();
        let mut marked = false;
        for line in diff.split_inclusive('\n') {
            let line = line.strip_suffix('\n').unwrap_or(line);
            let shown = escape_line(line);
            let painted = if line.starts_with("+++") || line.starts_with("---") {
                self.bold(&shown)
            } else if line.starts_with("@@") {
                self.cyan(&shown)
            } else if line.starts_with('+') {
                self.green(&shown)
            } else if line.starts_with('-') {
                self.red(&shown)
            } else {
                shown.clone().into_owned()
            };
            if let Cow::Owned(_) = shown {
                marked = true;
                out.push_str(&self.yellow("!"));
            }
            out.push_str(&painted);
            out.push('\n');
        }
        if marked {
            out.push_str(&self.yellow(MARKED));
            out.push('\n');
        }
        out
    }
}

/// The person's side: the intent shown (with when the daemon settles it), those waiting, and
/// whether the next line is a reason for a denial.
struct Person {
    paint: Paint,
    /// Whether stdout is a terminal, where an open question's line is cleared before news.
    tty: bool,
    policy: Policy,
    current: Option<(WriteIntent, Instant)>,
    queue: VecDeque<(WriteIntent, Instant)>,
    wants_reason: bool,
}

const PROMPT: &str = "Allow? [y]es / [n]o (a reason may follow: n use the helper instead): ";
const REASON_PROMPT: &str = "Reason for the agent (Enter for none): ";

impl Person {
    fn new(policy: Policy) -> Self {
        Self {
            paint: Paint::detect(),
            tty: std::io::stdout().is_terminal(),
            policy,
            current: None,
            queue: VecDeque::new(),
            wants_reason: false,
        }
    }

    fn say(&self, text: &str) -> anyhow::Result<()> {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).context("cannot write to stdout")
    }

    fn prompt(&self) -> &'static str {
        if self.wants_reason { REASON_PROMPT } else { PROMPT }
    }

    /// A line of news; when a question is open, it is asked again below.
    fn notice(&self, text: &str) -> anyhow::Result<()> {
        match &self.current {
            Some(_) => self.say(&format!("{}{text}\n{}", self.leave_prompt(), self.prompt())),
            None => self.say(&format!("{text}\n")),
        }
    }

    /// What ends the open question's line before news: on a terminal, the line is cleared (the
    /// question is asked again below); elsewhere, a newline.
    fn leave_prompt(&self) -> &'static str {
        if self.tty { "\r\x1b[K" } else { "\n" }
    }

    /// The intent's path, relative to the gated folder when there is one, escaped.
    fn shown_path(&self, gate: &Gate, path: &str) -> String {
        match relative_to_gate(gate.paths(), path) {
            Some((_, relative)) if gate.paths().len() == 1 => {
                escape_field(&relative.display().to_string()).into_owned()
            }
            _ => escape_field(path).into_owned(),
        }
    }

    fn settled_as(&self) -> &'static str {
        match self.policy.on_timeout {
            OnTimeout::Deny => "denied",
            OnTimeout::Allow => "allowed",
        }
    }

    fn banner(&self, gate: &Gate, rules: &Rules) -> anyhow::Result<()> {
        let paths: Vec<Cow<'_, str>> = gate.paths().iter().map(|path| escape_field(path)).collect();
        let mut text = format!(
            "filectx gate {}: asking before writes and edits in {}\n",
            escape_field(gate.gate_id()),
            paths.join(", ")
        );
        let rules = rules.describe();
        if !rules.is_empty() {
            text.push_str(&format!("Rules: {}\n", escape_field(&rules.join(", "))));
        }
        text.push_str(&format!(
            "Undecided after {} s: {} by the daemon. Ctrl-C or Ctrl-D stops the gate.\n",
            self.policy.wait.as_secs(),
            self.settled_as()
        ));
        self.say(&text)
    }

    fn arrived(&mut self, gate: &Gate, intent: WriteIntent) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.policy.wait;
        if self.current.is_none() {
            self.current = Some((intent, deadline));
            return self.show(gate);
        }
        let what = format!("{} {}", intent.operation.as_str(), self.shown_path(gate, &intent.path));
        let from = agent(&intent);
        self.queue.push_back((intent, deadline));
        self.notice(&format!("queued: {what} by {from} ({} waiting)", self.queue.len()))
    }

    /// Shows the current intent and asks; skips those the daemon settled meanwhile.
    fn show(&mut self, gate: &Gate) -> anyhow::Result<()> {
        loop {
            let Some((intent, deadline)) = &self.current else { return Ok(()) };
            if *deadline > Instant::now() && gate.is_pending(&intent.intent_id) {
                break;
            }
            let text = format!(
                "{}: {} {} by {} waited too long and was {} by the daemon",
                self.paint.yellow("timed out"),
                intent.operation.as_str(),
                self.shown_path(gate, &intent.path),
                agent(intent),
                self.settled_as()
            );
            self.current = self.queue.pop_front();
            self.say(&format!("{text}\n"))?;
        }
        let Some((intent, deadline)) = &self.current else { return Ok(()) };
        self.wants_reason = false;
        let verb = match intent.operation {
            Operation::Create => "create",
            Operation::Update => "overwrite",
            Operation::Edit => "edit",
        };
        let mut text = format!(
            "\n{} wants to {verb} {} ({} bytes)\n",
            self.paint.bold(&agent(intent)),
            self.paint.bold(&self.shown_path(gate, &intent.path)),
            intent.bytes
        );
        if let Some(links) = intent.links.filter(|links| *links > 1) {
            text.push_str(&format!(
                "(the file has {links} hard links: the change lands under each of its names, and one may lie in \
                 the gated folders)\n"
            ));
        }
        match intent.diff.as_str() {
            INTENT_DIFF_TOO_LARGE => text.push_str("(the change is too large to show)\n"),
            INTENT_DIFF_NOT_TEXT => text.push_str("(the file is not text: no diff to show)\n"),
            INTENT_DIFF_HIDDEN => {
                text.push_str("(hidden: this gate's session may not read the file, so no diff is shown)\n");
            }
            "" => text.push_str("(no line differs: only line endings or the encoding change)\n"),
            diff => text.push_str(&self.paint.diff(diff)),
        }
        let left = deadline.saturating_duration_since(Instant::now()).as_secs();
        let waiting = match self.queue.len() {
            0 => String::new(),
            n => format!("; {n} more waiting"),
        };
        text.push_str(&format!("(decide within {left} s, else {}{waiting})\n{PROMPT}", self.settled_as()));
        self.say(&text)
    }

    /// The next intent in line, if any.
    fn next(&mut self, gate: &Gate) -> anyhow::Result<()> {
        self.current = self.queue.pop_front();
        self.wants_reason = false;
        self.show(gate)
    }

    /// The daemon withdrew an intent: the agent cancelled, or the gate's timeout passed.
    fn withdrawn(&mut self, gate: &Gate, intent_id: &str, reason: IntentWithdrawal) -> anyhow::Result<()> {
        let timed_out = reason == IntentWithdrawal::Timeout;
        let label = if timed_out { self.paint.yellow("timed out") } else { self.paint.yellow("withdrawn") };
        if let Some((intent, _)) = self.current.as_ref().filter(|(i, _)| i.intent_id == intent_id) {
            let what = format!("{} {}", intent.operation.as_str(), self.shown_path(gate, &intent.path));
            let text = if timed_out {
                format!(
                    "{}{label}: {what} by {} waited too long and was {} by the daemon\n",
                    self.leave_prompt(),
                    agent(intent),
                    self.settled_as()
                )
            } else {
                format!(
                    "{}{label}: {} no longer waits for {what}; skipped\n",
                    self.leave_prompt(),
                    agent(intent)
                )
            };
            self.current = None;
            self.say(&text)?;
            return self.next(gate);
        }
        if let Some(index) = self.queue.iter().position(|(i, _)| i.intent_id == intent_id)
            && let Some((intent, _)) = self.queue.remove(index)
        {
            let what = format!("{} {}", intent.operation.as_str(), self.shown_path(gate, &intent.path));
            let how =
                if timed_out { format!(" and {} by the daemon", self.settled_as()) } else { String::new() };
            return self.notice(&format!("{label}: {what} by {} before it was shown{how}", agent(&intent)));
        }
        Ok(())
    }

    async fn answer(&mut self, gate: &Gate, line: &str) -> anyhow::Result<()> {
        let Some((intent, _)) = &self.current else {
            return self.say("(nothing waits for a decision)\n");
        };
        let line = line.trim();
        let decision = if self.wants_reason {
            Decision::deny(line)
        } else {
            let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            match word.to_ascii_lowercase().as_str() {
                "y" | "yes" => Decision::allow(),
                "n" | "no" if rest.trim().is_empty() => {
                    self.wants_reason = true;
                    return self.say(REASON_PROMPT);
                }
                "n" | "no" => Decision::deny(rest.trim()),
                _ => return self.say(&format!("Answer y to allow or n to deny.\n{PROMPT}")),
            }
        };
        let allow = decision.allow;
        let outcome = match gate.decide(&intent.intent_id, decision).await {
            Ok(()) if allow => self.paint.green("allowed"),
            Ok(()) => self.paint.red("denied"),
            Err(GateError::UnknownIntent { .. }) => {
                format!("{}: the daemon no longer waits for this one", self.paint.yellow("too late"))
            }
            Err(GateError::Client(error)) => return Err(error.into()),
            Err(other) => return Err(other.into()),
        };
        self.say(&format!("{outcome}\n"))?;
        self.next(gate)
    }

    /// The intent shown reached its deadline: the daemon settled it.
    fn expired(&mut self, gate: &Gate) -> anyhow::Result<()> {
        self.say(self.leave_prompt())?;
        // `show` reports it as timed out and moves on.
        self.show(gate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(path: &str, operation: Operation) -> WriteIntent {
        WriteIntent::from(filectx_client::gate::WriteIntentParams {
            gate_id: "g".to_owned(),
            intent_id: "i".to_owned(),
            session_id: "s".to_owned(),
            client_name: None,
            owner: None,
            path: path.to_owned(),
            operation,
            diff: String::new(),
            old_version: None,
            new_version: "v".to_owned(),
            bytes: 0,
            links: None,
        })
    }

    fn rules(deny: &[&str], allow: &[&str], allow_create: bool) -> Rules {
        let rule = |glob: &&str| Rule { glob: (*glob).to_owned(), matcher: compile_glob(glob).unwrap() };
        Rules { deny: deny.iter().map(rule).collect(), allow: allow.iter().map(rule).collect(), allow_create }
    }

    #[test]
    fn deny_wins_then_auto_allow_then_allow_create() {
        let folders = ["/p".to_owned()];
        let rules = rules(&["*.lock", "/p/secrets/**"], &["docs/**", "*.md"], true);
        let decide =
            |path: &str, op| rules.decide(&folders, &intent(path, op)).map(|(d, rule)| (d.allow, rule));
        assert_eq!(decide("/p/a/Cargo.lock", Operation::Create), Some((false, "--deny *.lock".to_owned())));
        assert_eq!(
            decide("/p/secrets/k.md", Operation::Edit),
            Some((false, "--deny /p/secrets/**".to_owned()))
        );
        assert_eq!(
            decide("/p/docs/x/y.txt", Operation::Edit),
            Some((true, "--auto-allow docs/**".to_owned()))
        );
        assert_eq!(
            decide("/p/src/README.md", Operation::Update),
            Some((true, "--auto-allow *.md".to_owned()))
        );
        assert_eq!(decide("/p/src/new.rs", Operation::Create), Some((true, "--allow-create".to_owned())));
        assert_eq!(decide("/p/src/lib.rs", Operation::Edit), None);
        // A relative glob with `/` is anchored at the gated folder, and `*` stays in one folder.
        assert_eq!(decide("/p/x/docs/a.txt", Operation::Edit), None);
        let reason =
            rules.decide(&folders, &intent("/p/Cargo.lock", Operation::Edit)).and_then(|(d, _)| d.reason);
        assert_eq!(reason.as_deref(), Some("denied by the gate's rule --deny *.lock"));
    }

    #[test]
    fn a_diff_line_holding_controls_is_shown_escaped_and_marked() {
        let diff =
            "--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-old\n+ok\r\x1b[2Kos.system('x')\n+\u{202e}txt.exe\n same\n";
        let shown = Paint { on: false }.diff(diff);
        assert_eq!(
            shown,
            "--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-old\n!+ok\\r\\x1b[2Kos.system('x')\n!+\\u{202e}txt.exe\n same\n\
             (! marks lines holding control or bidirectional characters, shown as escapes)\n"
        );
        assert!(!Paint { on: true }.diff(diff).contains('\r'));
    }

    #[test]
    fn diffs_are_coloured_only_when_asked() {
        let diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n";
        assert_eq!(Paint { on: false }.diff(diff), diff);
        let coloured = Paint { on: true }.diff(diff);
        assert!(
            coloured.contains("\x1b[31m-old\x1b[0m") && coloured.contains("\x1b[32m+new\x1b[0m"),
            "{coloured}"
        );
        assert!(coloured.contains("\x1b[1m--- a/x\x1b[0m") && coloured.contains("\x1b[36m@@"), "{coloured}");
        assert!(coloured.ends_with(" same\n"));
    }
}

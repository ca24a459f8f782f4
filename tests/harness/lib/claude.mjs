// Runs a scripted task (issue 27's, task.mjs, by default) through Claude Code, installed from npm
// into this package's node_modules, against the scripted model (model.mjs) on loopback: either
// with filectx's tools over MCP (`filectx mcp`, Claude Code's built-in file tools turned off) or
// with Claude Code's own Read/Edit/Write/Grep/Glob. Then measures what the model got: the
// characters of every tool result as Claude Code handed it over, per step, and the model turns.
//
// Binaries: `FILECTX` (the `filectx` client, whose `mcp` command is the bridge) and `FILECTXD`
// (the daemon), by default ../../target/debug/filectx and filectxd; `CLAUDE` for another Claude
// Code. `FILECTX_MCP_ARGS` (JSON array) replaces the bridge's options after `--root ROOT` (the
// recommended configuration below by default), to measure another one. The daemon runs none of
// its built-in language servers unless a run names their folders (`languageServers`), so that a
// server on the user's PATH changes neither the answers measured nor the time taken.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { TOOL_SEARCH, replay, startModel, toolCalls } from './model.mjs';
import { TOOLS, agent, checkOutcome, makeProject } from './task.mjs';

/** This package's folder. */
export const packageDir = fileURLToPath(new URL('../', import.meta.url));
const repo = path.resolve(packageDir, '../..');

/** A binary: the environment's `env` variable, else `fallback`; it must exist. */
function binary(env, fallback) {
  const file = process.env[env] || fallback;
  if (!fs.existsSync(file)) throw new Error(`${file} not found: build it (cargo build --workspace) or set ${env}`);
  return file;
}

export const binaries = () => ({
  filectx: binary('FILECTX', path.join(repo, 'target/debug/filectx')),
  filectxd: binary('FILECTXD', path.join(repo, 'target/debug/filectxd')),
  claude: binary('CLAUDE', path.join(packageDir, 'node_modules/.bin/claude')),
});

/** The words in a task's prompt that mark a request as the task's (not a side request). */
export const MARKER = 'filectx scripted task';
const PROMPT = `${MARKER}: in src/greeter.py, read the whole file, make greet_10 and greet_20 say Hi, read lines 601-650 \
twice, create src/farewell.py, overwrite config/settings.toml with the new settings, make greet_30 strip its \
result, then find greet_7, greet_77 and greet_147 and list the Python files.`;

/**
 * A task `runTask` runs: the `prompt` (holding MARKER), the `tools` its agent uses (filectx's
 * names), and `makeProject(root)`, `agent(root)` and `checkOutcome(root, notes)` as task.mjs
 * gives them for issue 27's task, this default.
 */
export const SCRIPTED_TASK = { prompt: PROMPT, tools: TOOLS, makeProject, agent, checkOutcome };

/**
 * What this `filectx mcp` offers, from its `--help`: `protocol3` (plain text by default, with
 * `--structured` to bring `structuredContent` back), `mergeStaleEdits` (`--merge-stale-edits`).
 * The test asserts Protocol 3's plain text only against a bridge that has it, so that it runs
 * against older builds (a before/after measurement) too.
 */
export function bridgeFeatures(filectx = binaries().filectx) {
  const help = spawnSync(filectx, ['mcp', '--help'], { encoding: 'utf8' });
  if (help.status !== 0) throw new Error(`${filectx} mcp --help failed: ${help.stderr}`);
  return {
    protocol3: /--structured\b/.test(help.stdout),
    mergeStaleEdits: /--merge-stale-edits\b/.test(help.stdout),
  };
}

/**
 * The bridge options beyond `--root`: `FILECTX_MCP_ARGS` (a JSON array) when set, else the
 * configuration recommended for Claude Code: `--merge-stale-edits` where the bridge has it
 * (Claude Code's own Edit applies an edit whose text still matches after an outside change, so
 * its users expect it; filectx does it only when the change is elsewhere). Everything else is
 * the bridge's default: all five tools, and from Protocol 3 plain text, `dedupReads` on and the
 * session named after the client (`claude-code`).
 */
export function mcpArgs(features = bridgeFeatures()) {
  if (process.env.FILECTX_MCP_ARGS) return JSON.parse(process.env.FILECTX_MCP_ARGS);
  return features.mergeStaleEdits ? ['--merge-stale-edits'] : [];
}

/** The two toolsets: tool names and argument shapes as each offers them. */
export const TOOLSETS = {
  filectx: {
    title: 'filectx over MCP',
    toolName: (tool) => `mcp__filectx__${tool}`,
    toolArgs: (_tool, args) => args,
  },
  builtin: {
    title: 'Claude Code built-ins',
    toolName: (tool) => ({ read: 'Read', edit: 'Edit', write: 'Write', grep: 'Grep', glob: 'Glob' })[tool],
    toolArgs: (tool, args) => (tool === 'grep' && args.output_mode === 'content' ? { ...args, '-n': true } : args),
  },
};
const BUILTIN_FILE_TOOLS = ['Read', 'Edit', 'Write', 'Grep', 'Glob', 'NotebookEdit'];

/**
 * Starts a daemon on a socket of its own in `dir`; resolves once it accepts connections.
 * `languageServers`: folders put first on its PATH, where it finds the built-in language servers
 * it runs; without them the built-ins are off (`--no-builtin-language-servers`, where this
 * filectxd has language servers at all).
 */
export async function startDaemon(filectxd, dir, languageServers) {
  const socket = path.join(dir, 'run/filectx.sock');
  const logPath = path.join(dir, 'daemon.log');
  const args = ['--socket', socket, '--log-level', 'info', '--no-fsync'];
  const userPath = process.env.PATH ?? '/usr/bin:/bin';
  if (!languageServers) {
    const help = spawnSync(filectxd, ['--help'], { encoding: 'utf8' });
    if (/--no-builtin-language-servers\b/.test(help.stdout ?? '')) args.push('--no-builtin-language-servers');
  } else {
    // A long wait: on a loaded machine an answer the run expects must not be "still running".
    args.push('--diagnostics-wait', '30');
  }
  const log = fs.openSync(logPath, 'a');
  const child = spawn(filectxd, args, {
    stdio: ['ignore', 'ignore', log],
    env: { PATH: [...(languageServers ?? []), userPath].join(path.delimiter), HOME: dir },
  });
  fs.closeSync(log);
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`filectxd exited: ${fs.readFileSync(logPath, 'utf8')}`);
    const ok = await new Promise((resolve) => {
      const probe = net.createConnection(socket);
      probe.once('error', () => resolve(false));
      probe.once('connect', () => {
        probe.end();
        probe.resume();
        probe.once('close', () => resolve(true));
      });
    });
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`filectxd did not start: ${fs.readFileSync(logPath, 'utf8')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    socket,
    log: () => fs.readFileSync(logPath, 'utf8'),
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

/** The filectx MCP server's entry in Claude Code's configuration. */
function serverEntry({ filectx, socket, root, alwaysLoad, bridgeArgs }) {
  const server = {
    type: 'stdio',
    command: filectx,
    args: ['--socket', socket, '--no-autostart', 'mcp', '--root', root, ...bridgeArgs],
  };
  if (alwaysLoad) server.alwaysLoad = true;
  return server;
}

/**
 * Claude Code's settings that make filectx its file tools: its own file tools denied (so they
 * are not offered at all) and filectx's allowed without a prompt.
 */
export const SETTINGS = {
  permissions: { allow: ['mcp__filectx'], deny: BUILTIN_FILE_TOOLS },
};

/**
 * Claude Code's command line for a toolset and a prompt (the task's by default). `register`: 'user' (filectx registered beforehand
 * with `claude mcp add-json --scope user` and SETTINGS in ~/.claude/settings.json, as a user
 * sets it up once) or 'flags' (all of it on this command line).
 */
export function claudeArgs(toolset, options, prompt = options.prompt) {
  const common = ['-p', prompt, '--output-format', 'json', '--no-session-persistence'];
  if (toolset === 'builtin') {
    const tools = BUILTIN_FILE_TOOLS.slice(0, 5).join(',');
    return [...common, '--strict-mcp-config', '--tools', tools, '--allowedTools', tools];
  }
  if (options.register === 'user') return common;
  return [
    ...common,
    '--strict-mcp-config',
    '--mcp-config',
    JSON.stringify({ mcpServers: { filectx: serverEntry(options) } }),
    '--disallowedTools',
    BUILTIN_FILE_TOOLS.join(','),
    '--allowedTools',
    'mcp__filectx',
  ];
}

/**
 * Registers filectx for the user `home` as the README says: `claude mcp add --scope user filectx
 * -- filectx mcp …` (with `alwaysLoad`, `claude mcp add-json`, which alone can set it), and
 * SETTINGS in ~/.claude/settings.json.
 */
export async function registerUser(claudeBin, home, env, options) {
  const entry = serverEntry(options);
  const args = options.alwaysLoad
    ? ['mcp', 'add-json', '--scope', 'user', 'filectx', JSON.stringify(entry)]
    : ['mcp', 'add', '--scope', 'user', 'filectx', '--', entry.command, ...entry.args];
  const added = await run(claudeBin, args, { cwd: home, env }, 60_000);
  if (added.code !== 0) throw new Error(`claude ${args.slice(0, 2).join(' ')} failed (${added.code}): ${added.stderr}${added.stdout}`);
  fs.mkdirSync(path.join(home, '.claude'), { recursive: true });
  fs.writeFileSync(path.join(home, '.claude/settings.json'), `${JSON.stringify(SETTINGS, null, 2)}\n`);
}

/** Claude Code's environment: nothing of ours but PATH and a home of its own, every nonessential traffic off. */
export function claudeEnv(home, modelUrl) {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    TMPDIR: path.join(home, 'tmp'),
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    NO_COLOR: '1',
    ANTHROPIC_BASE_URL: modelUrl,
    ANTHROPIC_API_KEY: 'sk-ant-scripted-model-on-loopback',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_BUG_COMMAND: '1',
    CLAUDE_CODE_DISABLE_TERMINAL_TITLE: '1',
    // Anything that would still try to go out goes to the scripted model, which refuses and
    // records it (and the test runs in a network namespace with only loopback).
    HTTP_PROXY: modelUrl,
    HTTPS_PROXY: modelUrl,
    http_proxy: modelUrl,
    https_proxy: modelUrl,
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
  };
}

/** Runs `command` with a deadline; resolves `{code, signal, stdout, stderr}`. */
export function run(command, args, options, timeoutMs) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Characters as the model counts them (code points). */
export const chars = (text) => [...text].length;

/**
 * One run of the task through Claude Code with `toolset` ('filectx' or 'builtin'). Options:
 * `keep` (leave the run's folder), `alwaysLoad` (`"alwaysLoad": true` in the server's Claude Code
 * configuration, which loads its tools up front; without it, and without the bridge's own
 * `_meta` `anthropic/alwaysLoad` on each tool, Claude Code defers them and the model loads them
 * with ToolSearch first), `args` (the bridge's options beyond `--root`;
 * default `mcpArgs()`), `register` ('user': registered once with `claude mcp add --scope user`
 * and settings, as the README says; 'flags': on Claude Code's command line), `task` (default
 * SCRIPTED_TASK), `languageServers` (folders of the language servers the daemon runs as
 * built-ins, first on its PATH; default none, the built-ins off). Returns
 * `{toolset, title, calls: [{step, tool, chars, isError, text}], toolChars, turns, notes,
 * steps, sideRequests, stray, errors, harnessNotes, claude, mcpArgs, features, toolsOffered}`.
 */
export async function runTask(
  toolset,
  { keep = false, alwaysLoad = false, args: givenArgs, register = 'user', task = SCRIPTED_TASK, languageServers } = {},
) {
  const bins = binaries();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `filectx-harness-${toolset}-`));
  const root = path.join(dir, 'project');
  const home = path.join(dir, 'home');
  fs.mkdirSync(path.join(home, 'tmp'), { recursive: true });
  fs.mkdirSync(root);
  task.makeProject(root);
  const set = TOOLSETS[toolset];
  const features = toolset === 'filectx' ? bridgeFeatures(bins.filectx) : undefined;
  const bridgeArgs = features ? (givenArgs ?? mcpArgs(features)) : undefined;
  const script = task.agent(root);
  const daemon = toolset === 'filectx' ? await startDaemon(bins.filectxd, dir, languageServers) : undefined;
  const model = await startModel({ script, marker: MARKER, toolName: set.toolName, toolArgs: set.toolArgs, tools: task.tools });
  let claude;
  try {
    const options = { filectx: bins.filectx, socket: daemon?.socket, root, alwaysLoad, bridgeArgs, register, prompt: task.prompt };
    const env = claudeEnv(home, model.url);
    if (toolset === 'filectx' && register === 'user') await registerUser(bins.claude, home, env, options);
    claude = await run(bins.claude, claudeArgs(toolset, options), { cwd: root, env }, 180_000);
  } finally {
    await model.close();
  }
  const { state } = model;
  const messages = state.last?.messages ?? [];
  const all = toolCalls(messages);
  const calls = all
    .filter((call) => call.name === TOOL_SEARCH)
    .map((call) => ({ step: '0 load the tools (ToolSearch)', tool: call.name, chars: chars(call.text ?? ''), isError: call.isError, text: call.text ?? '', input: call.input }));
  const notes = {};
  const replayErrors = [];
  try {
    // The outside changes the run made are not made again.
    replay(script, all.filter((call) => call.name !== TOOL_SEARCH), new Set(state.effects), set.toolName, {
      notes,
      onCall: ({ step, tool, call }) =>
        calls.push({ step, tool: call.name, chars: chars(call.text), isError: call.isError, text: call.text, input: call.input }),
    });
  } catch (error) {
    replayErrors.push(String(error));
  }
  // What else the harness wrote into the model's turns besides tool results and the prompt
  // (reminders, notes of changed files).
  const harnessNotes = [];
  messages.forEach((message, index) => {
    if (message.role !== 'user' || !Array.isArray(message.content)) return;
    for (const block of message.content) {
      if (block.type === 'text' && !(index === 0 && block.text.includes(MARKER))) harnessNotes.push(block.text);
    }
  });
  const steps = task.checkOutcome(root, notes);
  const result = {
    toolset,
    title: set.title,
    calls,
    toolChars: calls.reduce((sum, c) => sum + c.chars, 0),
    turns: state.turns,
    notes,
    steps,
    sideRequests: state.sideRequests,
    stray: state.stray,
    errors: [...state.errors, ...replayErrors],
    harnessNotes,
    toolsOffered: (state.last?.tools ?? []).map((t) => t.name),
    claude: { code: claude.code, signal: claude.signal, stdout: claude.stdout, stderr: claude.stderr },
    mcpArgs: bridgeArgs,
    features,
    daemonLog: daemon?.log(),
    dir,
    lastRequest: keep ? state.last : undefined,
  };
  await daemon?.stop();
  if (!keep) fs.rmSync(dir, { recursive: true, force: true });
  return result;
}

/** A per-step table of a run: step, tool, characters, and the first words of the result. */
export function report(result) {
  const rows = [`${result.title}: ${result.toolChars} characters of tool results in ${result.turns} model turns`];
  for (const c of result.calls) {
    const first = c.text.split('\n')[0].slice(0, 80);
    rows.push(`  ${c.step.padEnd(40)} ${c.tool.padEnd(22)} ${String(c.chars).padStart(6)}${c.isError ? ' (error)' : '        '}  ${first}`);
  }
  const ok = result.steps.filter((s) => s.ok).length;
  rows.push(`  steps correct: ${ok} of ${result.steps.length}`);
  for (const s of result.steps) if (!s.ok) rows.push(`    not correct: ${s.step}: ${s.why}`);
  if (result.harnessNotes.length > 0) {
    const total = result.harnessNotes.reduce((sum, t) => sum + chars(t), 0);
    rows.push(`  besides: ${result.harnessNotes.length} notes of the harness in the model's turns, ${total} characters`);
  }
  return rows.join('\n');
}

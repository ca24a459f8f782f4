// The race: N Claude Code agents (each its own process, home and scripted model on loopback) on
// one workspace, scripted to edit the same file at the same moment, round after round; once with
// Claude Code's own Read/Edit and once through one filectxd (`filectx mcp` per agent). Counts, per
// toolset, the changes lost: an edit the agent was told succeeded whose change is not in the files
// at the end.
//
// Each agent's script, per round: read the round's file, then change its own line of it (a line
// no other agent touches, lines apart from the others'); on a refusal it does what a model does:
// reads again when told to, retries when told the change counts as read. The model servers hold
// each round's read until every agent asked for it (so no one reads before the last round's
// edits are done), and each round's first edit until every agent asked for it, then release the
// edits together, or `spreadMs` apart (agent i after i × spreadMs).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { bridgeFeatures, binaries, claudeArgs, claudeEnv, registerUser, run, startDaemon, TOOLSETS } from './claude.mjs';
import { TOOL_SEARCH, replay, startModel, toolCalls } from './model.mjs';
import { refusal } from './task.mjs';

/** The words of the prompt that mark a request as the race's. */
const MARKER = 'filectx race';
/** Filler lines between two agents' lines, so that no edit is next to another. */
const GAP = 12;
/** How long a barrier waits for the last agent before it lets the others go (a crashed agent). */
const BARRIER_TIMEOUT_MS = 120_000;
/** How many times an agent tries one change. */
const ATTEMPTS = 5;

/** The files of the workspace, by round. */
const fileOf = (round, files) => `src/module_${round % files}.py`;
/** The line agent `a` changes in round `r`, before and after. */
const before = (a, r) => `    slot_a${a}_r${r} = "as it was"`;
const after = (a, r) => `    slot_a${a}_r${r} = "changed by agent ${a} in round ${r}"`;

/** Writes the workspace: one file per `files`, holding every agent's line of its rounds. */
function makeWorkspace(root, { agents, rounds, files }) {
  for (let f = 0; f < files; f += 1) {
    const lines = [`"""Module ${f}: each agent changes its own lines, all agents at once."""`, '', '', `def module_${f}():`];
    for (let r = 0; r < rounds; r += 1) {
      if (r % files !== f) continue;
      for (let a = 0; a < agents; a += 1) {
        lines.push(before(a, r));
        for (let g = 0; g < GAP; g += 1) lines.push(`    filler_${r}_${a}_${g} = ${g}`);
      }
    }
    lines.push('    return None', '');
    const file = path.join(root, fileOf(f, files));
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, lines.join('\n'));
  }
}

/** Agent `a`'s script (see the module's comment); notes each change's attempts in `t.notes`. */
function raceAgent(root, a, { rounds, files }) {
  return (t) => {
    for (let r = 0; r < rounds; r += 1) {
      const file = path.join(root, fileOf(r, files));
      t.call('read', { file_path: file }, `read ${r}`);
      const attempts = [];
      for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
        const result = t.call('edit', { file_path: file, old_string: before(a, r), new_string: after(a, r) }, attempt === 0 ? `edit ${r}` : `retry ${r}`);
        attempts.push({ isError: result.isError, text: result.text });
        if (!result.isError) break;
        const kind = refusal(result.text);
        if (kind === 'read') t.call('read', { file_path: file }, `reread ${r}`);
        else if (kind !== 'stale') break;
      }
      if (t.notes) t.notes[r] = attempts;
    }
  };
}

/**
 * The agents' meeting points: `wait(key, agent)` resolves once all `agents` waited for `key`
 * (or the timeout passed), agent i `spreadMs × i` later than the first.
 */
function barriers(agents, spreadMs) {
  const open = new Map();
  return {
    timeouts: 0,
    wait(key, agent, spread) {
      let meeting = open.get(key);
      if (!meeting) {
        meeting = { arrived: new Map(), released: false };
        meeting.release = () => {
          if (meeting.released) return;
          meeting.released = true;
          clearTimeout(meeting.timer);
          for (const [who, go] of meeting.arrived) {
            const delay = spread ? who * spreadMs : 0;
            if (delay === 0) go();
            else setTimeout(go, delay);
          }
        };
        meeting.timer = setTimeout(() => {
          this.timeouts += 1;
          meeting.release();
        }, BARRIER_TIMEOUT_MS);
        open.set(key, meeting);
      }
      if (meeting.released) return Promise.resolve();
      const arrived = new Promise((go) => {
        const earlier = meeting.arrived.get(agent);
        meeting.arrived.set(agent, earlier ? () => (earlier(), go()) : go);
      });
      if (meeting.arrived.size === agents) meeting.release();
      return arrived;
    },
  };
}

/**
 * One race: `agents` Claude Code agents, `rounds` rounds over `files` files, with `toolset`
 * ('builtin' or 'filectx', with `bridgeArgs` for the bridge). Returns `{toolset, label, changes,
 * lost, failed, refusals, turns, minimalTurns, errors, lostChanges, failedChanges}`.
 */
export async function race({ toolset, label, agents, rounds, files, spreadMs = 0, bridgeArgs = [], keep = false }) {
  const bins = binaries();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `filectx-race-${toolset}-`));
  const root = path.join(dir, 'workspace');
  fs.mkdirSync(root);
  makeWorkspace(root, { agents, rounds, files });
  const set = TOOLSETS[toolset];
  const daemon = toolset === 'filectx' ? await startDaemon(bins.filectxd, dir) : undefined;
  const meet = barriers(agents, spreadMs);
  const prompt = `${MARKER}: change your lines of the modules, round after round.`;
  const runs = [];
  try {
    for (let a = 0; a < agents; a += 1) {
      const script = raceAgent(root, a, { rounds, files });
      const hold = (next) => {
        if (next.done || !/^(read|edit) /.test(next.step ?? '')) return undefined;
        return meet.wait(next.step, a, next.step.startsWith('edit'));
      };
      const model = await startModel({ script, marker: MARKER, toolName: set.toolName, toolArgs: set.toolArgs, tools: ['read', 'edit'], hold });
      const home = path.join(dir, `home-${a}`);
      fs.mkdirSync(path.join(home, 'tmp'), { recursive: true });
      runs.push({ a, script, model, home, env: claudeEnv(home, model.url) });
    }
    const options = { filectx: bins.filectx, socket: daemon?.socket, root, alwaysLoad: false, bridgeArgs, register: 'user' };
    if (toolset === 'filectx') {
      for (const agent of runs) await registerUser(bins.claude, agent.home, agent.env, { ...options, bridgeArgs: [...bridgeArgs, '--name', `agent-${agent.a}`] });
    }
    const exits = await Promise.all(
      runs.map((agent) => run(bins.claude, claudeArgs(toolset, options, prompt), { cwd: root, env: agent.env }, 600_000)),
    );
    runs.forEach((agent, i) => (agent.claude = exits[i]));
  } finally {
    for (const agent of runs) await agent.model.close();
    await daemon?.stop();
  }

  const errors = [];
  let lost = 0;
  let failed = 0;
  let refusals = 0;
  let turns = 0;
  let minimalTurns = 0;
  const lostChanges = [];
  const failedChanges = [];
  for (const agent of runs) {
    const { state } = agent.model;
    errors.push(...state.errors.map((e) => `agent ${agent.a}: ${e}`));
    if (agent.claude.code !== 0) errors.push(`agent ${agent.a}: claude exited ${agent.claude.code}: ${agent.claude.stderr.slice(-500)}`);
    if (state.stray.length > 0) errors.push(`agent ${agent.a}: requests besides the Messages API: ${state.stray.join(', ')}`);
    const calls = toolCalls(state.last?.messages ?? []);
    const notes = {};
    try {
      replay(agent.script, calls.filter((call) => call.name !== TOOL_SEARCH), new Set(), set.toolName, { notes });
    } catch (error) {
      errors.push(`agent ${agent.a}: ${error}`);
    }
    turns += state.turns;
    // A read and an edit per round, the closing answer, and one ToolSearch turn when the
    // harness deferred the tools.
    minimalTurns += rounds * 2 + 1 + (calls.some((call) => call.name === TOOL_SEARCH) ? 1 : 0);
    for (let r = 0; r < rounds; r += 1) {
      const attempts = notes[r] ?? [];
      refusals += attempts.filter((attempt) => attempt.isError).length;
      const told = attempts.length > 0 && !attempts.at(-1).isError;
      const text = fs.readFileSync(path.join(root, fileOf(r, files)), 'utf8');
      if (!told) {
        failed += 1;
        failedChanges.push({ agent: agent.a, round: r, told: attempts.at(-1)?.text.split('\n')[0] ?? '(never tried)' });
      } else if (!text.split('\n').includes(after(agent.a, r))) {
        lost += 1;
        lostChanges.push({ agent: agent.a, round: r, told: attempts.at(-1).text.split('\n')[0] });
      }
    }
  }
  if (meet.timeouts > 0) errors.push(`${meet.timeouts} meeting points let agents go before all came`);
  if (!keep) fs.rmSync(dir, { recursive: true, force: true });
  return { toolset, label, agents, changes: agents * rounds, lost, failed, refusals, turns, minimalTurns, errors, lostChanges, failedChanges, dir };
}

/** The configurations raced: the built-ins, filectx's defaults, and filectx merging stale edits. */
export function configurations() {
  const merge = bridgeFeatures().mergeStaleEdits;
  const configs = [
    { toolset: 'builtin', label: 'Claude Code built-ins' },
    { toolset: 'filectx', label: 'filectx', bridgeArgs: [] },
  ];
  if (merge) configs.push({ toolset: 'filectx', label: 'filectx --merge-stale-edits', bridgeArgs: ['--merge-stale-edits'] });
  return configs;
}

/** The table of results, one row per configuration. */
export function table(results) {
  const rows = [
    `${'toolset'.padEnd(30)}${'changes'.padStart(8)}${'lost'.padStart(6)}${'failed'.padStart(8)}${'refusals'.padStart(10)}${'turns/agent'.padStart(13)}${'extra/agent'.padStart(13)}`,
  ];
  for (const r of results) {
    const perAgent = (n) => (n / r.agents).toFixed(1);
    rows.push(
      `${r.label.padEnd(30)}${String(r.changes).padStart(8)}${String(r.lost).padStart(6)}${String(r.failed).padStart(8)}` +
        `${String(r.refusals).padStart(10)}${perAgent(r.turns).padStart(13)}${perAgent(r.turns - r.minimalTurns).padStart(13)}`,
    );
  }
  return rows.join('\n');
}

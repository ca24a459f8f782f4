// The comparison of issue 27, measured from outside: the same scripted task through Claude Code
// with its own Read/Edit/Write/Grep/Glob and with filectx over MCP (its defaults, and the
// configuration README.md recommends), printing per step the characters of tool
// results the model got, the model turns, and whether every step was correct.
//
//   npm run compare                        # target/debug/filectx and filectxd
//   FILECTX=… FILECTXD=… npm run compare   # another build, e.g. after a merge
//   FILECTX_MCP_ARGS='["--name","claude-code","--dedup-reads"]' npm run compare
//   npm run compare -- --json              # the runs as JSON (every text the model got)

import { bridgeFeatures, mcpArgs, report, runTask } from './lib/claude.mjs';

const features = bridgeFeatures();
const configs = [
  { label: 'Claude Code built-ins', toolset: 'builtin' },
  {
    label: 'filectx over MCP, its defaults (`claude mcp add --scope user filectx -- filectx mcp --root ROOT`)',
    toolset: 'filectx',
    options: { args: [] },
  },
  {
    label: `filectx over MCP, as README.md recommends (\`claude mcp add --scope user filectx -- ${['filectx mcp --root ROOT', ...mcpArgs(features)].join(' ')}\`)`,
    toolset: 'filectx',
    options: {},
  },
];

const runs = [];
for (const config of configs) {
  const result = await runTask(config.toolset, config.options ?? {});
  runs.push({ ...config, result });
}
if (process.argv.includes('--json')) {
  console.log(JSON.stringify(runs, null, 1));
  process.exit(0);
}

console.log(`filectx mcp: protocol 3 ${features.protocol3 ? 'yes' : 'no'}, --merge-stale-edits ${features.mergeStaleEdits ? 'yes' : 'no'}\n`);
for (const run of runs) {
  console.log(`== ${run.label}`);
  console.log(report(run.result));
  if (run.result.errors.length > 0) console.log(`  model errors: ${run.result.errors.join('; ')}`);
  if (run.result.stray.length > 0) console.log(`  stray requests: ${run.result.stray.join(', ')}`);
  console.log('');
}

// Per step: characters (calls) of each run side by side.
const stepOf = (call) => call.step.split(' ')[0];
const steps = [];
for (const run of runs) for (const call of run.result.calls) if (!steps.includes(stepOf(call))) steps.push(stepOf(call));
const names = new Map();
for (const run of runs) for (const call of run.result.calls) if (!names.has(stepOf(call))) names.set(stepOf(call), call.step.replace(/ \(continued\)|:.*$/, ''));
const head = ['step'.padEnd(34), ...runs.map((_, i) => `run ${i + 1}`.padStart(14))].join('');
console.log('characters (calls) per step:');
console.log(head);
for (const step of steps) {
  const cells = runs.map((run) => {
    const calls = run.result.calls.filter((c) => stepOf(c) === step);
    const sum = calls.reduce((s, c) => s + c.chars, 0);
    return `${sum} (${calls.length})`.padStart(14);
  });
  console.log([names.get(step).padEnd(34), ...cells].join(''));
}
const base = runs[0].result;
console.log(['total'.padEnd(34), ...runs.map((run) => String(run.result.toolChars).padStart(14))].join(''));
console.log(['turns'.padEnd(34), ...runs.map((run) => String(run.result.turns).padStart(14))].join(''));
console.log(['steps correct'.padEnd(34), ...runs.map((run) => `${run.result.steps.filter((s) => s.ok).length} of ${run.result.steps.length}`.padStart(14))].join(''));
console.log(['× built-ins characters'.padEnd(34), ...runs.map((run) => (run.result.toolChars / base.toolChars).toFixed(2).padStart(14))].join(''));
runs.forEach((run, i) => console.log(`run ${i + 1}: ${run.label}`));

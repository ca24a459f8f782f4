// `npm run race`: N Claude Code agents on one workspace, scripted to edit the same file at the
// same moment, round after round (lib/race.mjs), with Claude Code's built-in tools and through
// one filectxd (its defaults, and with --merge-stale-edits). Prints per toolset the changes lost
// (reported to the agent as done, absent from the files at the end), the changes that failed,
// the refusals and the model turns; exits 1 if filectx lost any change or a run broke.
//
//   npm run race                                   # 3 agents, 24 rounds, edits at once
//   npm run race -- --agents 5 --rounds 10 --spread 25   # edits 25 ms apart
//   npm run race -- --only filectx --json
//
// Binaries as for `npm test`: FILECTX and FILECTXD (default ../../target/debug), CLAUDE.

import { configurations, race, table } from './lib/race.mjs';

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 ? argv[at + 1] : fallback;
};
const agents = Number(option('agents', 3));
const rounds = Number(option('rounds', 24));
const files = Number(option('files', 2));
const spreadMs = Number(option('spread', 0));
const only = option('only', undefined);
if (![agents, rounds, files].every((n) => Number.isInteger(n) && n > 0) || !(spreadMs >= 0)) {
  console.error('usage: npm run race -- [--agents N] [--rounds N] [--files N] [--spread MS] [--only builtin|filectx] [--json]');
  process.exit(2);
}

const results = [];
for (const config of configurations().filter((c) => !only || c.toolset === only)) {
  const started = Date.now();
  const result = await race({ ...config, agents, rounds, files, spreadMs });
  result.seconds = (Date.now() - started) / 1000;
  results.push(result);
}
if (argv.includes('--json')) {
  console.log(JSON.stringify(results, null, 1));
} else {
  console.log(
    `${agents} Claude Code agents, ${rounds} rounds over ${files} files, each round's edits ` +
      `${spreadMs ? `${spreadMs} ms apart` : 'at the same moment'}:\n`,
  );
  console.log(table(results));
  for (const r of results) {
    for (const change of r.lostChanges) {
      console.log(`  ${r.label}: agent ${change.agent}'s change of round ${change.round} lost; it was told: ${change.told}`);
    }
    for (const change of r.failedChanges) {
      console.log(`  ${r.label}: agent ${change.agent}'s change of round ${change.round} never went through; last told: ${change.told}`);
    }
    for (const error of r.errors) console.log(`  ${r.label}: ${error}`);
    console.log(`  ${r.label}: ${r.seconds.toFixed(0)} s`);
  }
}
const broken = results.filter((r) => r.errors.length > 0);
const filectxLost = results.filter((r) => r.toolset === 'filectx' && r.lost > 0);
process.exit(broken.length > 0 || filectxLost.length > 0 ? 1 : 0);

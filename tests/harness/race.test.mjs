// The race's short run (lib/race.mjs; `npm run race` is the long one): three Claude Code agents
// edit the same file at the same moment, three rounds, with the built-ins and through filectx.
// Asserts only that filectx lost no change and that its runs did not break: what the built-ins
// lose depends on timing, so it is printed, never asserted.

import assert from 'node:assert/strict';
import test from 'node:test';

import { configurations, race, table } from './lib/race.mjs';

test('agents racing on one file: filectx loses no change (the built-ins\' losses are only reported)', async () => {
  const results = [];
  for (const config of configurations()) results.push(await race({ ...config, agents: 3, rounds: 3, files: 1 }));
  console.log(table(results));
  for (const r of results) {
    for (const change of r.lostChanges) console.log(`  ${r.label}: agent ${change.agent}, round ${change.round} lost (told: ${change.told})`);
    for (const error of r.errors) console.log(`  ${r.label}: ${error}`);
  }
  for (const r of results.filter((result) => result.toolset === 'filectx')) {
    assert.deepEqual(r.errors, [], `${r.label}: the run broke`);
    assert.equal(r.failed, 0, `${r.label}: changes that never went through`);
    assert.equal(r.lost, 0, `${r.label}: changes lost`);
  }
});

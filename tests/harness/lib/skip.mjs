// The one way a harness test is skipped: `skip` records the test's name and the reason in the
// file FILECTX_SKIPPED_LOG names (set by tests/run, which names every skipped test with its
// reason and, under FILECTX_REQUIRE_ALL_TESTS=1, fails), then skips it (node:test's `t.skip`);
// the test returns at once.

import { appendFileSync } from 'node:fs';

/** Skips the test `t`, saying why (`reason`: what is missing, and how to get it), and records it. */
export function skip(t, reason) {
  const log = process.env.FILECTX_SKIPPED_LOG;
  const oneLine = reason.replace(/[\r\n]+/g, ' ');
  // One append of one line: the lines of test files running at once do not mix.
  if (log) appendFileSync(log, `harness filectx-harness ${t.name}: ${oneLine}\n`);
  t.skip(oneLine);
}

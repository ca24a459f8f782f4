// The one way a TypeScript test is skipped: `skip` records the test's name and the reason in the
// file FILECTX_SKIPPED_LOG names (set by tests/run, which names every skipped test with its
// reason and, under FILECTX_REQUIRE_ALL_TESTS=1, fails), then skips it (node:test's `t.skip`);
// the test returns at once. Also `canPlayAnotherUser`, the one decision on the tests that play
// another local user (uid/gid 65534, `nobody`: an impostor daemon, a folder or socket given to
// it), which needs root, as CI has.
import { appendFileSync } from 'node:fs';
import type { TestContext } from 'node:test';

/** The other user's uid and gid. */
export const NOBODY = 65534;

/** The environment variable naming the record of skipped tests (one line per test). */
export const SKIPPED_LOG_ENV = 'FILECTX_SKIPPED_LOG';

/** Skips the test `t`, saying why (`reason`: what is missing, and how to get it), and records it. */
export function skip(t: TestContext, reason: string): void {
  const log = process.env[SKIPPED_LOG_ENV];
  const oneLine = reason.replace(/[\r\n]+/g, ' ');
  // One append of one line: the lines of test files running at once do not mix.
  if (log) appendFileSync(log, `typescript @filectx/client ${t.name}: ${oneLine}\n`);
  t.skip(oneLine);
}

/**
 * Whether this process may play another local user (it runs as root). When not, skips the test
 * `t` and records it; the test then returns at once.
 */
export function canPlayAnotherUser(t: TestContext): boolean {
  if (process.geteuid?.() === 0) return true;
  skip(t, `it plays another local user (uid ${NOBODY}), which needs root; run the tests as root`);
  return false;
}

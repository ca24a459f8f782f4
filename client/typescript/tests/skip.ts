// The tests that play another local user (uid/gid 65534, `nobody`: an impostor daemon, a folder
// or socket given to it) need root, which CI has. `canPlayAnotherUser` decides that in one place
// for every TypeScript test: as root the test runs; otherwise it is skipped (node:test's
// `t.skip`) and recorded in the file FILECTX_SKIPPED_LOG names (set by tests/run, which prints
// how many were skipped and, under FILECTX_REQUIRE_ALL_TESTS=1, fails).
import { appendFileSync } from 'node:fs';
import type { TestContext } from 'node:test';

/** The other user's uid and gid. */
export const NOBODY = 65534;

/** The environment variable naming the record of skipped tests (one line per test). */
export const SKIPPED_LOG_ENV = 'FILECTX_SKIPPED_LOG';

/**
 * Whether this process may play another local user (it runs as root). When not, skips the test
 * `t` and records it; the test then returns at once.
 */
export function canPlayAnotherUser(t: TestContext): boolean {
  if (process.geteuid?.() === 0) return true;
  const log = process.env[SKIPPED_LOG_ENV];
  // One append of one line: the lines of test files running at once do not mix.
  if (log) appendFileSync(log, `typescript @filectx/client ${t.name}\n`);
  t.skip(`it plays another local user (uid ${NOBODY}), which needs root`);
  return false;
}

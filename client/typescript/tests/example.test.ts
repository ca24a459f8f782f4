// The README's example (examples/quickstart.ts) runs against a real daemon, found as the
// library finds it by default (FILECTX_SOCKET).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { packageDir, startDaemon } from './daemon.js';

test('the quickstart example runs', async () => {
  const daemon = await startDaemon();
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(packageDir, 'dist', 'examples', 'quickstart.js'), daemon.root],
      { env: { ...process.env, FILECTX_SOCKET: daemon.socket }, timeout: 30_000 },
    );
    assert.match(stdout, /\[ 'hello', 'world' \]/);
    assert.match(stdout, /^\s+2\tfilectx$/m);
    assert.match(stdout, /this agent must read first/);
    assert.match(stdout, /edited: 1/);
    assert.equal(await readFile(join(daemon.root, 'notes.txt'), 'utf8'), 'hi\nfilectx\n');
  } finally {
    await daemon.stop();
  }
});

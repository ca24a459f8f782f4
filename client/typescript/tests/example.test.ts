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
    assert.match(stdout, /^2\tfilectx$/m);
    assert.match(stdout, /this agent must read first/);
    assert.match(stdout, /edited: 1/);
    assert.equal(await readFile(join(daemon.root, 'notes.txt'), 'utf8'), 'hi\nfilectx\n');
  } finally {
    await daemon.stop();
  }
});

test('the repository README shows the quickstart example as it is', async () => {
  const top = await readFile(join(packageDir, '..', '..', 'README.md'), 'utf8');
  const section = top.split('## From TypeScript')[1]?.split('\n## ')[0] ?? '';
  const shown = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  const example = await readFile(join(packageDir, 'examples', 'quickstart.ts'), 'utf8');
  assert.deepEqual(shown, [example]);
});

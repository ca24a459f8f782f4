// The README's examples (examples/quickstart.ts, examples/undo.ts) run against a real daemon,
// found as the library finds it by default (FILECTX_SOCKET).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { connect } from '../src/index.js';
import { packageDir, startDaemon } from './daemon.js';
import { skip } from './skip.js';

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

test('the undo example runs: a stale restore shows what changed since, newest first restores', async (t) => {
  const daemon = await startDaemon();
  try {
    const probe = await connect({ socket: daemon.socket, roots: [daemon.root] });
    const journaled = probe.hasFeature('journal');
    await probe.close();
    if (!journaled) {
      skip(t, 'this filectxd does not announce the feature "journal": set FILECTXD to a build with it');
      return;
    }
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(packageDir, 'dist', 'examples', 'undo.js'), daemon.root],
      { env: { ...process.env, FILECTX_SOCKET: daemon.socket }, timeout: 30_000 },
    );
    assert.match(stdout, /^\S+ edit \S+ \+1 -1$/m);
    assert.match(stdout, /^\S+ create \S+ \+2 -[0?]$/m);
    assert.match(stdout, /^-draft one$/m);
    assert.match(stdout, /^changed since:$/m);
    assert.match(stdout, /^-title$/m);
    assert.match(stdout, /^restored notes\.txt in entry \S+$/m);
    assert.match(stdout, /\[ 'title', 'draft one' \]/);
    assert.equal(await readFile(join(daemon.root, 'notes.txt'), 'utf8'), 'title\ndraft one\n');
  } finally {
    await daemon.stop();
  }
});

test("the README's undo example is examples/undo.ts", async () => {
  const readme = await readFile(join(packageDir, 'README.md'), 'utf8');
  const example = await readFile(join(packageDir, 'examples', 'undo.ts'), 'utf8');
  const block = /## Undo[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.equal(block, example);
});

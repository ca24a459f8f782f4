// The connection's failures stay the caller's: a daemon that drops the connection while a
// request is being written fails that call with a TransportError, and never leaves a rejection
// unhandled (which would end the harness's whole process).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { connect, TransportError } from '../src/index.js';

/** How many connections the test makes; each may lose the race with the peer's close. */
const ATTEMPTS = 300;

test('a daemon that drops the connection mid-write fails the call with TransportError, unhandled nowhere', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'filectx-ts-drop-'));
  const socket = join(dir, 'filectx.sock');
  // The peer runs in its own process, so that its close truly races the client's writes: it ends
  // every connection at the first bytes it gets (the client writes a frame's header and its body
  // separately, so the body meets a closed connection often enough).
  const code = `
    const server = require('node:net').createServer((c) => {
      c.on('error', () => {});
      c.on('data', () => c.destroy());
    });
    server.listen(${JSON.stringify(socket)}, () => process.stdout.write('ready\\n'));
  `;
  const peer = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    await new Promise((resolve, reject) => {
      peer.stdout.once('data', resolve);
      peer.once('exit', reject);
    });
    const failures = new Map<string, number>();
    for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
      await assert.rejects(connect({ socket, roots: [dir] }), (error: unknown) => {
        assert.ok(error instanceof TransportError, String(error));
        failures.set(error.message, (failures.get(error.message) ?? 0) + 1);
        return true;
      });
    }
    t.diagnostic(JSON.stringify([...failures]));
    // Let a rejection left behind by the last attempts surface.
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(
      unhandled.map(String),
      [],
      `unhandled rejections in ${ATTEMPTS} connects (${JSON.stringify([...failures])})`,
    );
  } finally {
    process.off('unhandledRejection', onUnhandled);
    peer.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
});

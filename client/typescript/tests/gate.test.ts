// The write gate's client side (feature `gate`): the handler's decision is the answer to
// `gate/writeIntent`, the daemon's `$/cancelRequest` aborts the handler's signal, and a daemon
// without the feature is never sent `gate/register`. Checked against a scripted peer that
// speaks the gate's wire exactly (vscode-jsonrpc's server side), and against the real filectxd
// when it announces `gate`.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { CancellationTokenSource } from 'vscode-jsonrpc/node.js';
import { connect, FsError, UnsupportedFeatureError, type WriteIntentParams } from '../src/index.js';
import { startDaemon } from './daemon.js';
import { scriptedPeer } from './peer.js';
import { skip } from './skip.js';

const intent = (overrides: Partial<WriteIntentParams> = {}): WriteIntentParams => ({
  gateId: 'gate-1',
  intentId: 'i-1',
  sessionId: 's-writer',
  clientName: 'writer',
  path: '/srv/app/a.txt',
  operation: 'update',
  diff: '--- a.txt\n+++ a.txt\n@@ -1 +1 @@\n-a\n+b\n',
  oldVersion: 'v1',
  newVersion: 'v2',
  bytes: 2,
  ...overrides,
});

test('gate.register: the handler decides each write intent; a withdrawn intent aborts its signal', async () => {
  const peer = await scriptedPeer(['gate', 'owners']);
  try {
    const s = await connect({ socket: peer.socket, roots: ['/srv/app'] });
    const conn = await peer.connected;
    const seen: WriteIntentParams[] = [];
    let aborted = false;
    const gate = await s.gate.register(
      { paths: ['/srv/app'], operations: ['update', 'edit'], name: 'review', timeoutMs: 5000, onTimeout: 'deny' },
      async (proposed, signal) => {
        seen.push(proposed);
        if (proposed.intentId === 'slow') {
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
          aborted = signal.aborted;
          return { allow: false, reason: 'withdrawn' };
        }
        if (proposed.intentId === 'boom') throw new Error('reviewer crashed');
        if (proposed.intentId === 'yes') return true;
        return { allow: !proposed.diff.includes('+b'), reason: 'no b please' };
      },
    );
    assert.equal(gate.gateId, 'gate-1');
    assert.deepEqual(peer.received.find((r) => r.method === 'gate/register')?.params, {
      paths: ['/srv/app'],
      operations: ['update', 'edit'],
      name: 'review',
      timeoutMs: 5000,
      onTimeout: 'deny',
    });

    assert.deepEqual(await conn.sendRequest('gate/writeIntent', intent()), { allow: false, reason: 'no b please' });
    assert.deepEqual(seen[0], intent());
    assert.deepEqual(await conn.sendRequest('gate/writeIntent', intent({ intentId: 'yes' })), { allow: true });
    const failed = (await conn.sendRequest('gate/writeIntent', intent({ intentId: 'boom' }))) as {
      allow: boolean;
      reason: string;
    };
    assert.equal(failed.allow, false);
    assert.match(failed.reason, /reviewer crashed/);
    // An intent for a gate this client does not know is refused, not left hanging.
    const unknown = (await conn.sendRequest('gate/writeIntent', intent({ gateId: 'other' }))) as { allow: boolean };
    assert.equal(unknown.allow, false);

    // The daemon withdraws an intent with $/cancelRequest {id}: the handler's signal aborts.
    const withdraw = new CancellationTokenSource();
    const slow = conn.sendRequest('gate/writeIntent', intent({ intentId: 'slow' }), withdraw.token);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(aborted, false);
    withdraw.cancel();
    assert.deepEqual(await slow, { allow: false, reason: 'withdrawn' });
    assert.equal(aborted, true);

    await gate.unregister();
    assert.deepEqual(peer.received.at(-1), { method: 'gate/unregister', params: { gateId: 'gate-1' } });
    // Once unregistered, its handler is asked nothing more.
    const after = (await conn.sendRequest('gate/writeIntent', intent({ intentId: 'yes' }))) as { allow: boolean };
    assert.equal(after.allow, false);
    assert.equal(seen.filter((i) => i.intentId === 'yes').length, 1);
    await s.close();
  } finally {
    await peer.stop();
  }
});

test('gate.register on a daemon without the feature fails locally and sends nothing', async () => {
  const peer = await scriptedPeer(['owners']);
  try {
    const s = await connect({ socket: peer.socket, roots: ['/srv/app'] });
    await assert.rejects(
      s.gate.register({ paths: ['/srv/app'] }, () => true),
      (e: unknown) => e instanceof UnsupportedFeatureError && e.feature === 'gate',
    );
    assert.equal(peer.received.filter((r) => r.method === 'gate/register').length, 0);
    await s.close();
  } finally {
    await peer.stop();
  }
});

test('a gate on the real filectxd: allowed writes land, refused ones are FS_PERMISSION_DENIED with data.gate', async (t) => {
  const daemon = await startDaemon();
  try {
    const reviewer = await connect({ socket: daemon.socket, roots: [daemon.root] });
    const writer = await connect({ socket: daemon.socket, roots: [daemon.root], clientInfo: { name: 'writer' } });
    if (!reviewer.hasFeature('gate')) {
      skip(t, `this filectxd (${reviewer.info.serverInfo.version}) does not announce the feature "gate"`);
      await reviewer.close();
      await writer.close();
      return;
    }
    const seen: WriteIntentParams[] = [];
    const gate = await reviewer.gate.register({ paths: [daemon.root], name: 'reviewer' }, (proposed) => {
      seen.push(proposed);
      return proposed.path.endsWith('deny.txt') ? { allow: false, reason: 'not this file' } : { allow: true };
    });
    const created = await writer.file.write({ path: 'allow.txt', content: 'fine\n' });
    assert.equal(await readFile(join(daemon.root, 'allow.txt'), 'utf8'), 'fine\n');
    const asked = seen.find((i) => i.path.endsWith('allow.txt'));
    assert.ok(asked, 'the handler was asked');
    assert.equal(asked.gateId, gate.gateId);
    assert.equal(asked.sessionId, writer.sessionId);
    assert.equal(asked.operation, 'create');
    assert.equal(asked.newVersion, created.version);
    assert.equal(asked.bytes, 5);
    assert.match(asked.diff, /\+fine/);

    await assert.rejects(writer.file.write({ path: 'deny.txt', content: 'no\n' }), (e: unknown) => {
      assert.ok(e instanceof FsError, String(e));
      assert.equal(e.code, 'FS_PERMISSION_DENIED');
      const gateData = e.data['gate'] as { gateId: string; reason: string; outcome: string };
      assert.equal(gateData.gateId, gate.gateId);
      assert.equal(gateData.outcome, 'denied');
      assert.match(gateData.reason, /not this file/);
      return true;
    });
    await assert.rejects(readFile(join(daemon.root, 'deny.txt')), { code: 'ENOENT' });

    await gate.unregister();
    const asks = seen.length;
    await writer.file.write({ path: 'deny.txt', content: 'now\n' });
    assert.equal(seen.length, asks);
    await writer.close();
    await reviewer.close();
  } finally {
    await daemon.stop();
  }
});

test('a gate that does not answer in time: the daemon withdraws the intent (the signal aborts) and applies onTimeout', async (t) => {
  const daemon = await startDaemon();
  try {
    const reviewer = await connect({ socket: daemon.socket, roots: [daemon.root] });
    const writer = await connect({ socket: daemon.socket, roots: [daemon.root] });
    if (!reviewer.hasFeature('gate')) {
      skip(t, `this filectxd (${reviewer.info.serverInfo.version}) does not announce the feature "gate"`);
      await reviewer.close();
      await writer.close();
      return;
    }
    let withdrawn = false;
    await reviewer.gate.register({ paths: [daemon.root], timeoutMs: 300, onTimeout: 'deny' }, async (_intent, signal) => {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 10_000);
        signal.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      withdrawn = signal.aborted;
      return { allow: true };
    });
    await assert.rejects(writer.file.write({ path: 'late.txt', content: 'x\n' }), (e: unknown) => {
      assert.ok(e instanceof FsError, String(e));
      assert.equal(e.code, 'FS_PERMISSION_DENIED');
      assert.equal((e.data['gate'] as { outcome: string }).outcome, 'timeout');
      return true;
    });
    // The late "allow" changed nothing.
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(withdrawn, true);
    await assert.rejects(readFile(join(daemon.root, 'late.txt')), { code: 'ENOENT' });
    await writer.close();
    await reviewer.close();
  } finally {
    await daemon.stop();
  }
});

// How a stream's endings reach the loop, with the chunks a daemon could send scripted exactly:
// an error item, chunks out of order or of another version.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MessageConnection } from 'vscode-jsonrpc/node.js';
import { connect, FsError, StreamError, type wire } from '../src/index.js';
import { scriptedPeer } from './peer.js';

const chunk = (startLine: number, lines: string[], extra: Partial<wire.TextChunk> = {}): wire.TextChunk => ({
  version: 'v1',
  startLine,
  lines,
  totalLines: 10,
  done: false,
  ...extra,
});

/** A peer whose fs/streamText answers subscription 7 and then sends `chunks`. */
async function streamingPeer(chunks: wire.TextChunk[]) {
  return scriptedPeer(['cancelRequest'], {
    answer: (method: string, _params: unknown, conn: MessageConnection) => {
      if (method === 'fs/streamCancel') return true;
      if (method !== 'fs/streamText') return null;
      setTimeout(() => {
        for (const result of chunks) void conn.sendNotification('fs/textChunk', { subscription: 7, result });
      }, 10);
      return 7;
    },
  });
}

async function collect(stream: AsyncIterable<wire.TextChunk>): Promise<{ lines: string[]; error?: unknown }> {
  const lines: string[] = [];
  try {
    for await (const c of stream) lines.push(...c.lines);
    return { lines };
  } catch (error) {
    return { lines, error };
  }
}

test('an error item ends the loop with its FsError after the chunks before it', async () => {
  const peer = await streamingPeer([
    chunk(1, ['a', 'b']),
    chunk(3, [], { done: true, error: { code: 'FS_STALE_VERSION', message: 'the file changed' } }),
  ]);
  try {
    const s = await connect({ socket: peer.socket, roots: ['/srv'] });
    const stream = await s.fs.streamText({ path: 'f' });
    assert.equal(stream.subscription, 7);
    const { lines, error } = await collect(stream);
    assert.deepEqual(lines, ['a', 'b']);
    assert.ok(error instanceof FsError && error.code === 'FS_STALE_VERSION', String(error));
    assert.match(error.message, /the file changed/);
    // The daemon ended it: nothing to cancel.
    assert.equal(await stream.cancel(), false);
    assert.ok(!peer.methods().includes('fs/streamCancel'));
    await s.close();
  } finally {
    await peer.stop();
  }
});

test('a chunk out of order, or of another version, is a StreamError and cancels the stream', async () => {
  for (const bad of [chunk(5, ['e']), chunk(3, ['c'], { version: 'v2' })]) {
    const peer = await streamingPeer([chunk(1, ['a', 'b']), bad, chunk(4, ['d'], { done: true })]);
    try {
      const s = await connect({ socket: peer.socket, roots: ['/srv'] });
      const { lines, error } = await collect(await s.fs.streamText({ path: 'f' }));
      assert.deepEqual(lines, ['a', 'b']);
      assert.ok(error instanceof StreamError && !error.lagged, String(error));
      await s.status().catch(() => undefined); // after the cancel on the wire
      assert.deepEqual(peer.received.find((r) => r.method === 'fs/streamCancel')?.params, [7]);
      await s.close();
    } finally {
      await peer.stop();
    }
  }
});

test('an offset starts the order check at that line', async () => {
  const peer = await streamingPeer([chunk(4, ['d']), chunk(5, ['e'], { done: true })]);
  try {
    const s = await connect({ socket: peer.socket, roots: ['/srv'] });
    const { lines, error } = await collect(await s.fs.streamText({ path: 'f', offset: 4 }));
    assert.equal(error, undefined);
    assert.deepEqual(lines, ['d', 'e']);
    await s.close();
  } finally {
    await peer.stop();
  }
});

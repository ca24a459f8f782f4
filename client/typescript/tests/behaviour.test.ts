// What a harness relies on, through the real socket: streams broken off, stale edits with
// their diff, outside changes announced, owners and sessions kept apart, resume, dedup,
// cancellation, and the daemon going away mid-call.
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connect, FsError, RpcError, StreamError, TransportError, type Session, type wire } from '../src/index.js';
import { startDaemon, type Daemon } from './daemon.js';

let daemon: Daemon;
before(async () => {
  daemon = await startDaemon();
});
after(async () => {
  await daemon.stop();
});

function session(options: Partial<Parameters<typeof connect>[0]> = {}): Promise<Session> {
  return connect({ socket: daemon.socket, roots: [daemon.root], ...options });
}

/** The next `file/didChange` that `match` accepts, or a failure after 10 s. */
function nextChange(s: Session, match: (c: wire.FileDidChange) => boolean): Promise<wire.FileDidChange> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      listener.dispose();
      reject(new Error('no file/didChange within 10 s'));
    }, 10_000);
    const listener = s.onDidChange((change) => {
      if (!match(change)) return;
      clearTimeout(timer);
      listener.dispose();
      resolve(change);
    });
  });
}

const isFs = (code: string) => (e: unknown) => e instanceof FsError && e.code === code;

test('a stream broken off early is cancelled on the daemon; the session goes on', async () => {
  const s = await session();
  try {
    const lines = Array.from({ length: 200_000 }, (_, i) => `${i + 1}`);
    await writeFile(join(daemon.root, 'long.txt'), lines.join('\n'));
    const stream = await s.fs.streamText({ path: 'long.txt', chunkLines: 1 });
    let seen = 0;
    for await (const chunk of stream) {
      assert.deepEqual(chunk.lines, ['1']);
      seen += 1;
      break;
    }
    assert.equal(seen, 1);
    // The loop's break sent fs/streamCancel; the daemon answered that it stopped a running stream.
    assert.equal(await stream.cancel(), true);
    const read = await s.file.read({ path: 'long.txt', offset: 199_999 });
    assert.deepEqual(read.lines, ['199999', '200000']);
  } finally {
    await s.close();
  }
});

test('a reader that falls behind gets a StreamError, not an unbounded buffer', async () => {
  const s = await session({ streamBufferChunks: 4 });
  try {
    await writeFile(join(daemon.root, 'lag.txt'), Array.from({ length: 5000 }, (_, i) => `${i}`).join('\n'));
    const stream = await s.fs.streamText({ path: 'lag.txt', chunkLines: 1 });
    // Read nothing while the chunks arrive: the buffer fills, and the next chunk ends the stream.
    for (let waited = 0; stream.buffered < 4 && waited < 10_000; waited += 20) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(stream.buffered, 4);
    await new Promise((r) => setTimeout(r, 300));
    await assert.rejects(
      (async () => {
        for await (const _ of stream) {
          // draining what was buffered
        }
      })(),
      (e: unknown) => e instanceof StreamError && e.lagged,
    );
    assert.ok((await s.status()).sessions >= 1);
  } finally {
    await s.close();
  }
});

test('an AbortSignal ends a stream with FS_ABORTED', async () => {
  const s = await session();
  try {
    await writeFile(join(daemon.root, 'abort.txt'), Array.from({ length: 100_000 }, (_, i) => `${i}`).join('\n'));
    const controller = new AbortController();
    const stream = await s.fs.streamText({ path: 'abort.txt', chunkLines: 10 }, { signal: controller.signal });
    let chunks = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of stream) {
          chunks += 1;
          if (chunks === 2) controller.abort();
        }
      })(),
      isFs('FS_ABORTED'),
    );
    assert.equal(chunks, 2);
  } finally {
    await s.close();
  }
});

test('a stale edit is refused with the diff of what changed, and counts as read', async () => {
  const s = await session();
  try {
    const path = join(daemon.root, 'stale.txt');
    await writeFile(path, 'one\ntwo\nthree\n');
    await s.file.read({ path: 'stale.txt' });
    await writeFile(path, 'one\ntwo\nthree\nfour\n'); // another process
    const error = await s.file.edit({ path: 'stale.txt', oldString: 'two', newString: 'TWO' }).then(
      () => assert.fail('the edit of a changed file went through'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof FsError, String(error));
    assert.equal(error.code, 'FS_STALE_VERSION');
    const diff = String(error.data['diff']);
    assert.match(diff, /^--- stale\.txt \(as you last saw it\)\n\+\+\+ stale\.txt \(now\)\n/);
    assert.match(diff, /\n\+four\n?$/);
    assert.equal(error.data['reauthorized'], true);
    assert.equal(typeof error.data['currentVersion'], 'string');
    // Re-authorized: the same edit now goes through without a read.
    await s.file.edit({ path: 'stale.txt', oldString: 'two', newString: 'TWO' });
    assert.equal(await readFile(path, 'utf8'), 'one\nTWO\nthree\nfour\n');
  } finally {
    await s.close();
  }
});

test('a change by another process is announced with file/didChange', async () => {
  const s = await session();
  try {
    const path = join(daemon.root, 'watched.txt');
    await writeFile(path, 'before\n');
    const read = await s.file.read({ path: 'watched.txt' });
    const changed = nextChange(s, (c) => c.displayPath === 'watched.txt');
    await writeFile(path, 'after\n');
    const change = await changed;
    assert.equal(change.path, path);
    assert.equal(typeof change.version, 'string');
    assert.notEqual(change.version, read.version);
    assert.equal(change.owner, undefined);
    const now = await s.fs.stat('watched.txt');
    assert.equal(now?.version, change.version);
  } finally {
    await s.close();
  }
});

test("two owners of one session: one's read never authorizes the other's write", async () => {
  const s = await session();
  try {
    await writeFile(join(daemon.root, 'owners.txt'), 'shared\n');
    await s.file.read({ path: 'owners.txt', owner: 'planner' });
    await assert.rejects(s.file.write({ path: 'owners.txt', content: 'x\n', owner: 'coder' }), isFs('FS_NOT_OBSERVED'));
    await assert.rejects(s.file.write({ path: 'owners.txt', content: 'x\n' }), isFs('FS_NOT_OBSERVED'));
    await s.file.read({ path: 'owners.txt', owner: 'coder' });
    // The coder's edit makes the planner's record stale: the planner is told, by name.
    const planner = nextChange(s, (c) => c.owner === 'planner');
    await s.file.edit({ path: 'owners.txt', oldString: 'shared', newString: 'coded', owner: 'coder' });
    assert.equal((await planner).displayPath, 'owners.txt');
    await assert.rejects(
      s.file.edit({ path: 'owners.txt', oldString: 'coded', newString: 'planned', owner: 'planner' }),
      isFs('FS_STALE_VERSION'),
    );
    assert.equal((await s.file.stat('owners.txt', { owner: 'coder' })).fresh, true);
  } finally {
    await s.close();
  }
});

test('resume: a new connection takes over what an ended session had read; the token is single-use', async () => {
  const path = join(daemon.root, 'resume.txt');
  await writeFile(path, 'kept\n');
  const first = await session({ resumable: true });
  const token = first.resumeToken;
  assert.match(token ?? '', /^[0-9a-f]{64}$/);
  await first.file.read({ path: 'resume.txt', owner: 'agent' });
  await first.close();

  const second = await session({ resume: token, resumable: true });
  try {
    assert.notEqual(second.resumeToken, token);
    // Authorized by the first session's read, without reading again.
    await second.file.edit({ path: 'resume.txt', oldString: 'kept', newString: 'resumed', owner: 'agent' });
    assert.equal(await readFile(path, 'utf8'), 'resumed\n');
  } finally {
    await second.close();
  }
  await assert.rejects(session({ resume: token }), (e: unknown) => {
    assert.ok(e instanceof RpcError, String(e));
    assert.equal(e.code, -32602);
    assert.deepEqual(e.data, { resume: 'refused' });
    return true;
  });
});

test('dedupReads: the same text of the same version is not sent twice to one owner', async () => {
  const s = await session({ dedupReads: true });
  try {
    await writeFile(join(daemon.root, 'dedup.txt'), 'a fairly long line of text\n'.repeat(30));
    const text = async (owner?: string) =>
      (await s.tools.call('read', { file_path: 'dedup.txt' }, owner ? { owner } : {})).content[0]?.text ?? '';
    assert.match(await text('a'), /^1\ta fairly long line/);
    assert.match(await text('a'), /^\(Unchanged: you already have this text of dedup\.txt from line 1\./);
    // Another owner has not received it.
    assert.match(await text('b'), /^1\ta fairly long line/);
    // file/read, the harness's layer, is never deduplicated.
    assert.equal((await s.file.read({ path: 'dedup.txt', owner: 'a' })).lines.length, 30);
  } finally {
    await s.close();
  }
});

test('staleEdits merge: an edit tool call is applied over an outside change elsewhere', async () => {
  const lines = (change: (i: number) => string | undefined) =>
    Array.from({ length: 20 }, (_, k) => `${change(k + 1) ?? `line ${k + 1}`}\n`).join('');
  const path = join(daemon.root, 'merge.txt');
  const outside = lines((i) => (i === 2 ? 'two' : undefined));
  for (const staleEdits of ['refuse', 'merge'] as const) {
    const s = await session({ staleEdits });
    try {
      assert.ok(s.hasFeature('staleEdits'));
      await writeFile(path, lines(() => undefined));
      await s.tools.call('read', { file_path: 'merge.txt' });
      await writeFile(path, outside);
      const edit = await s.tools.call('edit', { file_path: 'merge.txt', old_string: 'line 15\n', new_string: 'fifteen\n' });
      const text = edit.content[0]?.text ?? '';
      if (staleEdits === 'merge') {
        assert.equal(edit.isError, false, text);
        assert.match(text, /\nApplied over an outside change since your last read/);
        assert.equal(await readFile(path, 'utf8'), lines((i) => (i === 2 ? 'two' : i === 15 ? 'fifteen' : undefined)));
      } else {
        assert.equal(edit.isError, true, text);
        assert.equal(await readFile(path, 'utf8'), outside);
      }
    } finally {
      await s.close();
    }
  }
});

test('two sessions are isolated: reads, roots and notifications', async () => {
  const a = await session();
  const b = await session();
  try {
    const path = join(daemon.root, 'iso.txt');
    await writeFile(path, 'a\n');
    await a.file.read({ path: 'iso.txt' });
    // a's read does not authorize b.
    await assert.rejects(b.file.write({ path: 'iso.txt', content: 'b\n' }), isFs('FS_NOT_OBSERVED'));
    await b.file.read({ path: 'iso.txt' });
    let bHeard = 0;
    const listening = b.onDidChange(() => (bHeard += 1));
    const aHears = nextChange(a, (c) => c.path === path);
    await b.file.write({ path: 'iso.txt', content: 'b\n' });
    // a is told of b's write; b is not told of its own.
    assert.equal((await aHears).displayPath, 'iso.txt');
    assert.equal(bHeard, 0);
    listening.dispose();
    await assert.rejects(a.file.edit({ path: 'iso.txt', oldString: 'a', newString: 'c' }), isFs('FS_STALE_VERSION'));
  } finally {
    await a.close();
    await b.close();
  }
  // A session rooted elsewhere cannot reach this root at all.
  const elsewhere = await connect({ socket: daemon.socket, roots: [join(daemon.dir, 'run')] });
  try {
    await assert.rejects(elsewhere.file.read({ path: join(daemon.root, 'iso.txt') }), isFs('FS_OUTSIDE_ROOT'));
  } finally {
    await elsewhere.close();
  }
});

test('an aborted read rejects with FS_ABORTED at once; an already aborted signal sends nothing', async () => {
  const own = await startDaemon();
  try {
    await writeFile(join(own.root, 'r.txt'), 'r\n');
    const s = await connect({ socket: own.socket, roots: [own.root] });
    const before = (await s.status()).requests;
    await assert.rejects(s.file.read({ path: 'r.txt' }, { signal: AbortSignal.abort() }), isFs('FS_ABORTED'));
    // The daemon never saw it: only this status request was added.
    assert.equal((await s.status()).requests, before + 1);
    // A daemon that does not answer (stopped): the abort still ends the call.
    await own.freeze();
    const controller = new AbortController();
    const pending = s.fs.readText({ path: 'r.txt' }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await assert.rejects(pending, isFs('FS_ABORTED'));
    own.thaw();
    assert.deepEqual((await s.file.read({ path: 'r.txt' })).lines, ['r']);
    await s.close();
  } finally {
    own.thaw();
    await own.stop();
  }
});

test('an aborted write reports what happened: FS_ABORTED and nothing written, or the write', async () => {
  const own = await startDaemon();
  try {
    const s = await connect({ socket: own.socket, roots: [own.root] });
    await own.freeze();
    const controller = new AbortController();
    const pending = s.file.write({ path: 'w.txt', content: 'landed\n' }, { signal: controller.signal });
    setTimeout(() => {
      controller.abort();
      setTimeout(() => own.thaw(), 50);
    }, 50);
    const outcome = await pending.then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
    const onDisk = await readFile(join(own.root, 'w.txt'), 'utf8').catch(() => null);
    if ('result' in outcome) {
      assert.equal(outcome.result.operation, 'create');
      assert.equal(onDisk, 'landed\n');
    } else {
      assert.ok(isFs('FS_ABORTED')(outcome.error), String(outcome.error));
      assert.equal(onDisk, null);
    }
    await s.close();
  } finally {
    own.thaw();
    await own.stop();
  }
});

test('the daemon going away mid-call fails the call, streams and later calls with TransportError', async () => {
  const own = await startDaemon();
  try {
    // Far more one-line chunks than can arrive before the daemon is stopped, and a buffer that
    // holds them all, so the stream is still running (and not lagging) when the daemon dies.
    await writeFile(join(own.root, 'g.txt'), Array.from({ length: 1_000_000 }, (_, i) => `${i}`).join('\n'));
    const s = await connect({ socket: own.socket, roots: [own.root], streamBufferChunks: 2_000_000 });
    const stream = await s.fs.streamText({ path: 'g.txt', chunkLines: 1 });
    const iterator = stream[Symbol.asyncIterator]();
    assert.equal((await iterator.next()).done, false);
    // The call below is surely pending when the daemon dies.
    await own.freeze();
    const pending = s.status();
    const closed = s.whenClosed();
    setTimeout(() => process.kill(own.pid, 'SIGKILL'), 50);
    await assert.rejects(pending, (e: unknown) => e instanceof TransportError);
    await closed;
    assert.equal(s.closed, true);
    // The stream ends with the same error once its buffered chunks are read.
    await assert.rejects(
      (async () => {
        for (;;) if ((await iterator.next()).done) break;
      })(),
      (e: unknown) => e instanceof TransportError,
    );
    await assert.rejects(s.file.read({ path: 'g.txt' }), (e: unknown) => e instanceof TransportError);
    await s.close();
  } finally {
    await own.stop();
  }
});

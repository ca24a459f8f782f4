// Every method of the protocol through the typed session, against a real filectxd.
import assert from 'node:assert/strict';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connect, FsError, RpcError, UnsupportedFeatureError, type Session } from '../src/index.js';
import { startDaemon, type Daemon } from './daemon.js';

let daemon: Daemon;
before(async () => {
  daemon = await startDaemon();
});
after(async () => {
  await daemon.stop();
});

async function session(options: Partial<Parameters<typeof connect>[0]> = {}): Promise<Session> {
  return connect({ socket: daemon.socket, roots: [daemon.root], ...options });
}

test('initialize: the session, its features and limits', async () => {
  const s = await session({ clientInfo: { name: 'methods-test', version: '1' } });
  try {
    assert.equal(s.info.serverInfo.name, 'filectxd');
    assert.equal(s.info.protocolVersion, 2);
    assert.match(s.sessionId, /\S/);
    assert.ok(s.info.instructions.length > 0);
    for (const feature of ['owners', 'cancelRequest', 'contextReset', 'resume', 'dedupReads']) {
      assert.ok(s.hasFeature(feature), feature);
    }
    assert.deepEqual(s.info.capabilities.tools, ['read', 'write', 'edit']);
    assert.ok(s.info.capabilities.methods.includes('fs/streamText'));
    assert.equal(s.resumeToken, undefined);
    assert.throws(() => s.require('no-such-feature'), UnsupportedFeatureError);
  } finally {
    await s.close();
  }
});

test('daemon/status counts this session', async () => {
  const s = await session();
  try {
    const status = await s.status();
    assert.equal(typeof status.version, 'string');
    assert.equal(status.pid, daemon.pid);
    assert.ok(status.sessions >= 1);
  } finally {
    await s.close();
  }
});

test('tools/list and tools/call, with an owner', async () => {
  const s = await session({ tools: ['read', 'write', 'edit', 'glob', 'grep'] });
  try {
    const { tools } = await s.tools.list();
    assert.deepEqual(
      tools.map((t) => t.name),
      ['read', 'write', 'edit', 'glob', 'grep'],
    );
    await writeFile(join(daemon.root, 'tool.txt'), 'alpha\nbeta\n');
    const read = await s.tools.call('read', { file_path: 'tool.txt' }, { owner: 'sub-1' });
    assert.equal(read.isError, false);
    assert.match(read.content[0]?.text ?? '', /^1\talpha\n2\tbeta\n/);
    // The read authorized sub-1's edit, not the default owner's.
    const denied = await s.tools.call('edit', { file_path: 'tool.txt', old_string: 'beta', new_string: 'gamma' });
    assert.equal(denied.isError, true);
    assert.equal(denied.error?.code, 'FS_NOT_OBSERVED');
    const edited = await s.tools.call(
      'edit',
      { file_path: 'tool.txt', old_string: 'beta', new_string: 'gamma' },
      { owner: 'sub-1' },
    );
    assert.equal(edited.isError, false, edited.content[0]?.text);
    assert.equal(await readFile(join(daemon.root, 'tool.txt'), 'utf8'), 'alpha\ngamma\n');
    const glob = await s.tools.call('glob', { pattern: '*.txt' });
    assert.match(glob.content[0]?.text ?? '', /tool\.txt/);
  } finally {
    await s.close();
  }
});

test('file/read, file/write, file/edit, file/stat', async () => {
  const s = await session();
  try {
    const created = await s.file.write({ path: 'f.txt', content: 'one\ntwo\nthree\n' });
    assert.equal(created.operation, 'create');
    assert.equal(created.displayPath, 'f.txt');
    const read = await s.file.read({ path: 'f.txt', offset: 2, limit: 1 });
    assert.deepEqual(read.lines, ['two']);
    assert.equal(read.startLine, 2);
    assert.equal(read.totalLines, 3);
    assert.equal(read.partial, true);
    assert.equal(read.version, created.version);
    const edited = await s.file.edit({ path: 'f.txt', oldString: 'two', newString: 'TWO' });
    assert.equal(edited.replacements, 1);
    assert.equal(edited.replaceAll, false);
    assert.notEqual(edited.version, created.version);
    const updated = await s.file.write({ path: 'f.txt', content: 'x\n' });
    assert.equal(updated.operation, 'update');
    const stat = await s.file.stat('f.txt');
    assert.equal(stat.exists, true);
    assert.equal(stat.kind, 'file');
    assert.equal(stat.size, 2);
    assert.equal(stat.version, updated.version);
    assert.equal(stat.observedVersion, updated.version);
    assert.equal(stat.fresh, true);
    const other = await s.file.stat('f.txt', { owner: 'nobody-read-it' });
    assert.equal(other.fresh, false);
    assert.equal(other.observedVersion, undefined);
    const none = await s.file.stat('missing.txt');
    assert.equal(none.kind, 'none');
    assert.equal(none.exists, false);
  } finally {
    await s.close();
  }
});

test('fs/resolve, fs/stat, fs/readText, fs/writeText, fs/editText', async () => {
  const s = await session();
  try {
    await mkdir(join(daemon.root, 'sub'), { recursive: true });
    const resolved = await s.fs.resolve('sub/../sub/p.txt');
    assert.equal(resolved.path, join(daemon.root, 'sub', 'p.txt'));
    assert.equal(resolved.displayPath, 'sub/p.txt');
    assert.equal(resolved.exists, false);
    assert.equal(resolved.root, daemon.root);
    assert.equal(await s.fs.stat('sub/p.txt'), null);
    const folder = await s.fs.stat('sub');
    assert.deepEqual(folder, { version: null, type: 'directory' });

    const created = await s.fs.writeText({ path: 'sub/p.txt', content: 'a\nb\n', expect: { kind: 'createIfAbsent' } });
    assert.equal(created.operation, 'create');
    const info = await s.fs.stat('sub/p.txt');
    assert.deepEqual(info, { version: created.version, type: 'file', size: 4 });
    const text = await s.fs.readText({ path: 'sub/p.txt' });
    assert.deepEqual(text.lines, ['a', 'b']);
    // createIfAbsent over an existing file: the design's FS_NOT_OBSERVED.
    await assert.rejects(
      s.fs.writeText({ path: 'sub/p.txt', content: 'z', expect: { kind: 'createIfAbsent' } }),
      (e: unknown) => e instanceof FsError && e.code === 'FS_NOT_OBSERVED',
    );
    const edited = await s.fs.editText({
      path: 'sub/p.txt',
      oldString: 'b',
      newString: 'B',
      expectedVersion: created.version,
    });
    assert.equal(edited.replacements, 1);
    // The provider layer records nothing and checks the version it is given.
    await assert.rejects(
      s.fs.writeText({ path: 'sub/p.txt', content: 'z', expect: { kind: 'replaceIfVersion', version: created.version } }),
      (e: unknown) => e instanceof FsError && e.code === 'FS_STALE_VERSION' && e.data['currentVersion'] === edited.version,
    );
    const replaced = await s.fs.writeText({
      path: 'sub/p.txt',
      content: 'z\n',
      expect: { kind: 'replaceIfVersion', version: edited.version },
    });
    assert.equal(replaced.operation, 'update');
    assert.equal(await readFile(join(daemon.root, 'sub', 'p.txt'), 'utf8'), 'z\n');
  } finally {
    await s.close();
  }
});

test('fs/streamText: every chunk of one version, in order, to the end', async () => {
  const s = await session();
  try {
    const lines = Array.from({ length: 2500 }, (_, i) => `line ${i + 1}`);
    await writeFile(join(daemon.root, 'big.txt'), lines.join('\n') + '\n');
    const stream = await s.fs.streamText({ path: 'big.txt', chunkLines: 1000 });
    const got: string[] = [];
    const starts: number[] = [];
    const versions = new Set<string>();
    for await (const chunk of stream) {
      starts.push(chunk.startLine);
      versions.add(chunk.version);
      got.push(...chunk.lines);
      assert.equal(chunk.totalLines, 2500);
    }
    assert.deepEqual(starts, [1, 1001, 2001]);
    assert.equal(versions.size, 1);
    assert.deepEqual(got, lines);
    const fromOffset = await s.fs.streamText({ path: 'big.txt', offset: 2400 });
    const tail: string[] = [];
    for await (const chunk of fromOffset) tail.push(...chunk.lines);
    assert.deepEqual(tail, lines.slice(2399));
    // Failures before the first chunk are the answer to fs/streamText itself.
    await assert.rejects(s.fs.streamText({ path: 'nope.txt' }), (e: unknown) => e instanceof FsError && e.code === 'FS_NOT_FOUND');
  } finally {
    await s.close();
  }
});

test('session/contextReset, for one owner and for all', async () => {
  const s = await session({ dedupReads: true });
  try {
    // Long enough that the short "Unchanged" line is shorter than the text.
    await writeFile(join(daemon.root, 'ctx.txt'), 'hello\n' + 'some more text\n'.repeat(20));
    const first = await s.tools.call('read', { file_path: 'ctx.txt' });
    assert.match(first.content[0]?.text ?? '', /hello/);
    const again = await s.tools.call('read', { file_path: 'ctx.txt' });
    assert.match(again.content[0]?.text ?? '', /^\(Unchanged: you already have this text/);
    await s.tools.call('read', { file_path: 'ctx.txt' }); // the short answer took its entry out: full text again
    await s.contextReset();
    const afterReset = await s.tools.call('read', { file_path: 'ctx.txt' });
    assert.match(afterReset.content[0]?.text ?? '', /1\thello/);
    await s.contextReset('someone');
    await assert.rejects(s.contextReset(''), (e: unknown) => e instanceof FsError && e.code === 'FS_INVALID_ARGUMENT');
  } finally {
    await s.close();
  }
});

test('errors: FsError for FS_* refusals, RpcError for the others', async () => {
  const s = await session();
  try {
    await assert.rejects(s.file.read({ path: 'missing.txt' }), (e: unknown) => {
      assert.ok(e instanceof FsError);
      assert.equal(e.name, 'FsError');
      assert.equal(e.code, 'FS_NOT_FOUND');
      assert.equal(e.data.code, 'FS_NOT_FOUND');
      assert.equal(e.rpcCode, -31002);
      return true;
    });
    await assert.rejects(s.file.read({ path: '/etc/passwd' }), (e: unknown) => e instanceof FsError && e.code === 'FS_OUTSIDE_ROOT');
    // fs/readText takes no owner: the daemon refuses the field (-32602), which is not an FS_* error.
    await assert.rejects(
      s.fs.readText({ path: 'x', owner: 'a' } as never),
      (e: unknown) => e instanceof RpcError && e.code === -32602 && !(e instanceof FsError),
    );
    // The session still works after refusals.
    assert.ok((await s.status()).sessions >= 1);
  } finally {
    await s.close();
  }
});

test('close: shutdown and exit; later calls fail with TransportError', async () => {
  const s = await session();
  await s.close();
  assert.equal(s.closed, true);
  await assert.rejects(s.status(), { name: 'TransportError' });
  await s.close();
});

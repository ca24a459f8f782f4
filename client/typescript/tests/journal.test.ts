// The journal (feature `journal`): `journalList`, `journalEntries`, `journalDiff` and
// `journalRestore` against the real filectxd (skipped, saying so, on a daemon without the
// feature), and against a scripted peer for what the client alone decides: the feature check
// before anything is sent, the params on the wire, following the cursor.
import assert from 'node:assert/strict';
import { mkdir, readFile, realpath, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { connect, FsError, UnsupportedFeatureError, type Session, type wire } from '../src/index.js';
import { startDaemon, type Daemon } from './daemon.js';
import { scriptedPeer } from './peer.js';
import { skip } from './skip.js';

let daemon: Daemon;
let journaled = false;
before(async () => {
  daemon = await startDaemon();
  const probe = await connect({ socket: daemon.socket, roots: [daemon.root] });
  journaled = probe.hasFeature('journal');
  await probe.close();
});
after(async () => {
  await daemon.stop();
});

/** A session on the shared daemon, rooted at its root; `undefined` (the test skipped) without a journal. */
async function session(t: TestContext, roots = [daemon.root]): Promise<Session | undefined> {
  if (!journaled) {
    skip(t, 'this filectxd does not announce the feature "journal": set FILECTXD to a build with it');
    return undefined;
  }
  return connect({ socket: daemon.socket, roots });
}

const isFs = (code: string) => (e: unknown) => e instanceof FsError && e.code === code;

test('journalList: writes and edits through the client, newest first, with operations and versions', async (t) => {
  const s = await session(t);
  if (!s) return;
  try {
    await mkdir(join(daemon.root, 'list'));
    const start = Date.now();
    const created = await s.file.write({ path: 'list/notes.txt', content: 'one\ntwo\n' });
    const edited = await s.file.edit({ path: 'list/notes.txt', oldString: 'two', newString: 'TWO' });
    const replaced = await s.file.write({ path: 'list/notes.txt', content: 'one\nTWO\nthree\n' });
    await s.file.read({ path: 'list/notes.txt', owner: 'helper' });
    const byHelper = await s.file.edit({ path: 'list/notes.txt', oldString: 'three', newString: '3', owner: 'helper' });

    const { entries, cursor } = await s.journalList({ path: 'list/notes.txt' });
    assert.equal(cursor ?? undefined, undefined);
    assert.deepEqual(
      entries.map((e) => [e.operation, e.before ?? undefined, e.after ?? undefined]),
      [
        ['edit', replaced.version, byHelper.version],
        ['write', edited.version, replaced.version],
        ['edit', created.version, edited.version],
        ['create', undefined, created.version],
      ],
    );
    const canonical = await realpath(join(daemon.root, 'list', 'notes.txt'));
    for (const e of entries) {
      assert.equal(e.path, canonical);
      assert.equal(e.displayPath, 'list/notes.txt');
      assert.equal(e.sessionId, s.sessionId);
      assert.equal(e.clientName, 'filectx-ts');
      assert.equal(e.restorable, true);
      assert.ok(e.time >= start - 1000 && e.time <= Date.now() + 1000, `time ${e.time}`);
    }
    assert.deepEqual(
      entries.map((e) => e.seq),
      [...entries.map((e) => e.seq)].sort((a, b) => b - a),
    );
    assert.equal(new Set(entries.map((e) => e.entry)).size, 4);
    // The diff stat: one line changed is one added and one removed.
    assert.equal(entries[2]?.added, 1);
    assert.equal(entries[2]?.removed, 1);
    assert.equal(entries[3]?.added, 2);
    assert.equal(entries[0]?.owner, 'helper');
    assert.equal(entries[1]?.owner ?? undefined, undefined);

    // Filters: by owner, by session, by time; a folder holds its files' entries.
    const helpers = await s.journalList({ path: 'list', owner: 'helper' });
    assert.deepEqual(
      helpers.entries.map((e) => e.entry),
      [entries[0]?.entry],
    );
    const mine = await s.journalList({ path: 'list', sessionId: s.sessionId });
    assert.deepEqual(
      mine.entries.map((e) => e.entry),
      entries.map((e) => e.entry),
    );
    const since = entries[1]?.time ?? 0;
    const recent = await s.journalList({ path: 'list', since });
    assert.ok(recent.entries.length >= 2);
    assert.ok(recent.entries.every((e) => e.time >= since));
    const none = await s.journalList({ path: 'list', sessionId: 'no-such-session' });
    assert.deepEqual(none.entries, []);

    const status = await s.status();
    assert.equal(status.journal, true);
    assert.ok((status.journalEntries ?? 0) >= 4, `journalEntries ${status.journalEntries}`);
    assert.ok((status.journalBytes ?? 0) > 0, `journalBytes ${status.journalBytes}`);
  } finally {
    await s.close();
  }
});

test('journalDiff shows the change; journalRestore puts the old content back as an entry of its own', async (t) => {
  const s = await session(t);
  if (!s) return;
  try {
    await mkdir(join(daemon.root, 'undo'));
    const file = join(daemon.root, 'undo', 'x.txt');
    const created = await s.file.write({ path: 'undo/x.txt', content: 'alpha\nbeta\n' });
    const edited = await s.file.edit({ path: 'undo/x.txt', oldString: 'beta', newString: 'gamma' });
    const [edit, create] = (await s.journalList({ path: 'undo/x.txt' })).entries;
    assert.ok(edit && create);
    assert.equal(edit.operation, 'edit');

    const diff = await s.journalDiff(edit.entry);
    assert.equal(diff.truncated, false);
    assert.match(diff.diff, /^--- .*x\.txt \(before\)$/m);
    assert.match(diff.diff, /^\+\+\+ .*x\.txt \(after\)$/m);
    assert.match(diff.diff, /^@@ -\d+(,\d+)? \+\d+(,\d+)? @@/m);
    assert.match(diff.diff, /^-beta$/m);
    assert.match(diff.diff, /^\+gamma$/m);
    assert.doesNotMatch(diff.diff, /^[-+]alpha$/m);
    const creation = await s.journalDiff(create.entry);
    assert.match(creation.diff, /^\+alpha$/m);

    const restored = await s.journalRestore(edit.entry);
    assert.equal(restored.displayPath, 'undo/x.txt');
    assert.equal(restored.version, created.version);
    assert.equal(await readFile(file, 'utf8'), 'alpha\nbeta\n');
    assert.deepEqual((await s.file.read({ path: 'undo/x.txt' })).lines, ['alpha', 'beta']);
    const [restore] = (await s.journalList({ path: 'undo/x.txt' })).entries;
    assert.ok(restore);
    assert.equal(restore.entry, restored.entry);
    assert.equal(restore.operation, 'restore');
    assert.equal(restore.before, edited.version);
    assert.equal(restore.after, created.version);
    assert.ok(restore.seq > edit.seq);

    // The restore is undone like any change: the edit is back.
    const redone = await s.journalRestore(restored.entry);
    assert.equal(redone.version, edited.version);
    assert.equal(await readFile(file, 'utf8'), 'alpha\ngamma\n');

    // Restoring the creation deletes the file; restoring that deletion recreates it.
    const [latest] = (await s.journalList({ path: 'undo/x.txt' })).entries;
    assert.ok(latest);
    await s.journalRestore(latest.entry);
    const removed = await s.journalRestore(create.entry);
    assert.equal(removed.version ?? undefined, undefined);
    await assert.rejects(readFile(file, 'utf8'), /ENOENT/);
    const [deletion] = (await s.journalList({ path: 'undo/x.txt' })).entries;
    assert.ok(deletion);
    assert.equal(deletion.entry, removed.entry);
    assert.equal(deletion.after ?? undefined, undefined);
    const recreated = await s.journalRestore(deletion.entry);
    assert.equal(recreated.version, created.version);
    assert.equal(await readFile(file, 'utf8'), 'alpha\nbeta\n');

    await assert.rejects(s.journalDiff('999999999'), isFs('FS_NOT_FOUND'));
    await assert.rejects(s.journalRestore('999999999'), isFs('FS_NOT_FOUND'));
  } finally {
    await s.close();
  }
});

test('journalRestore of an entry whose file changed since is FS_STALE_VERSION with data.diff; force restores anyway', async (t) => {
  const s = await session(t);
  if (!s) return;
  try {
    await mkdir(join(daemon.root, 'stale'));
    const file = join(daemon.root, 'stale', 'y.txt');
    await s.file.write({ path: 'stale/y.txt', content: 'one\n' });
    await s.file.edit({ path: 'stale/y.txt', oldString: 'one', newString: 'two' });
    const [edit] = (await s.journalList({ path: 'stale/y.txt' })).entries;
    assert.ok(edit);
    await s.file.write({ path: 'stale/y.txt', content: 'three\n' });

    await assert.rejects(s.journalRestore(edit.entry), (e: unknown) => {
      assert.ok(e instanceof FsError, String(e));
      assert.equal(e.code, 'FS_STALE_VERSION');
      const diff = e.data['diff'];
      assert.equal(typeof diff, 'string');
      assert.match(diff as string, /^-two$/m);
      assert.match(diff as string, /^\+three$/m);
      return true;
    });
    assert.equal(await readFile(file, 'utf8'), 'three\n');

    const forced = await s.journalRestore(edit.entry, { force: true });
    assert.equal(await readFile(file, 'utf8'), 'one\n');
    const [restore] = (await s.journalList({ path: 'stale/y.txt' })).entries;
    assert.equal(restore?.entry, forced.entry);
    assert.equal(restore?.operation, 'restore');
  } finally {
    await s.close();
  }
});

test("a path outside the session's roots is refused, and another root's entries are never shown nor restored", async (t) => {
  if (!journaled) {
    skip(t, 'this filectxd does not announce the feature "journal": set FILECTXD to a build with it');
    return;
  }
  const mineDir = join(daemon.root, 'mine');
  const theirsDir = join(daemon.root, 'theirs');
  await mkdir(mineDir);
  await mkdir(theirsDir);
  const mine = await session(t, [mineDir]);
  const theirs = await session(t, [theirsDir]);
  assert.ok(mine && theirs);
  try {
    await theirs.file.write({ path: 'secret.txt', content: 'v1\n' });
    await theirs.file.write({ path: 'secret.txt', content: 'v2\n' });
    const [theirEntry] = (await theirs.journalList()).entries;
    assert.ok(theirEntry);
    await mine.file.write({ path: 'own.txt', content: 'mine\n' });

    await assert.rejects(mine.journalList({ path: theirsDir }), isFs('FS_OUTSIDE_ROOT'));
    await assert.rejects(mine.journalList({ path: '/etc' }), isFs('FS_OUTSIDE_ROOT'));
    const listed: wire.JournalEntry[] = [];
    for await (const e of mine.journalEntries()) listed.push(e);
    assert.ok(listed.some((e) => e.displayPath === 'own.txt'));
    const mineReal = await realpath(mineDir);
    assert.ok(
      listed.every((e) => e.path.startsWith(`${mineReal}/`)),
      `listed outside its root: ${listed.map((e) => e.path).join(', ')}`,
    );
    await assert.rejects(mine.journalDiff(theirEntry.entry), isFs('FS_NOT_FOUND'));
    await assert.rejects(mine.journalRestore(theirEntry.entry, { force: true }), (e: unknown) => {
      assert.ok(e instanceof FsError, String(e));
      assert.ok(['FS_NOT_FOUND', 'FS_OUTSIDE_ROOT'].includes(e.code), e.code);
      return true;
    });
    assert.equal(await readFile(join(theirsDir, 'secret.txt'), 'utf8'), 'v2\n');
  } finally {
    await mine.close();
    await theirs.close();
  }
});

test('paging with limit and cursor visits every entry once, newest first', async (t) => {
  const s = await session(t);
  if (!s) return;
  try {
    await mkdir(join(daemon.root, 'pages'));
    for (let i = 0; i < 7; i++) await s.file.write({ path: `pages/f${i}.txt`, content: `${i}\n` });
    const pages: wire.JournalEntry[][] = [];
    let cursor: string | undefined;
    do {
      const page = await s.journalList(cursor === undefined ? { path: 'pages', limit: 3 } : { path: 'pages', limit: 3, cursor });
      assert.ok(page.entries.length <= 3);
      pages.push(page.entries);
      cursor = page.cursor ?? undefined;
      assert.ok(pages.length <= 7, 'the cursor never ends');
    } while (cursor !== undefined);
    const seen = pages.flat();
    assert.deepEqual(
      pages.map((p) => p.length),
      [3, 3, 1],
    );
    assert.deepEqual(
      seen.map((e) => e.displayPath),
      [6, 5, 4, 3, 2, 1, 0].map((i) => `pages/f${i}.txt`),
    );
    assert.equal(new Set(seen.map((e) => e.entry)).size, 7);
    assert.ok(seen.every((e) => e.operation === 'create'));

    const iterated: string[] = [];
    for await (const e of s.journalEntries({ path: 'pages', limit: 2 })) iterated.push(e.entry);
    assert.deepEqual(
      iterated,
      seen.map((e) => e.entry),
    );
  } finally {
    await s.close();
  }
});

test('with the journal off (--no-journal) the feature is absent and the calls fail before anything is sent', async (t) => {
  if (!journaled) {
    skip(t, 'this filectxd does not announce the feature "journal": set FILECTXD to a build with it');
    return;
  }
  const off = await startDaemon(['--no-journal']);
  try {
    const s = await connect({ socket: off.socket, roots: [off.root] });
    assert.equal(s.hasFeature('journal'), false);
    await s.file.write({ path: 'f.txt', content: 'x\n' });
    const refused = (e: unknown) => e instanceof UnsupportedFeatureError && e.feature === 'journal';
    await assert.rejects(s.journalList(), refused);
    await assert.rejects(s.journalDiff('1'), refused);
    await assert.rejects(s.journalRestore('1'), refused);
    const status = await s.status();
    assert.equal(status.journal, false);
    assert.equal(status.journalEntries ?? 0, 0);
    await s.close();
  } finally {
    await off.stop();
  }
});

test('a daemon without the feature "journal" is sent no journal request', async () => {
  const peer = await scriptedPeer(['owners']);
  try {
    const s = await connect({ socket: peer.socket, roots: ['/srv/app'] });
    const refused = (e: unknown) => e instanceof UnsupportedFeatureError && e.feature === 'journal';
    await assert.rejects(s.journalList({ path: 'a.txt' }), refused);
    await assert.rejects(s.journalEntries().next(), refused);
    await assert.rejects(s.journalDiff('7'), refused);
    await assert.rejects(s.journalRestore('7', { force: true }), refused);
    assert.deepEqual(peer.methods(), ['initialize']);
    await s.close();
  } finally {
    await peer.stop();
  }
});

test('the journal calls send the wire params exactly, and journalEntries follows the cursor to the end', async () => {
  const entry = (seq: number): wire.JournalEntry => ({
    entry: String(seq),
    seq,
    time: 1_700_000_000_000 + seq,
    path: `/srv/app/f${seq}.txt`,
    displayPath: `f${seq}.txt`,
    sessionId: 's-1',
    operation: 'edit',
    before: `v${seq - 1}`,
    after: `v${seq}`,
    restorable: true,
  });
  const pages: Record<string, wire.JournalListResult> = {
    first: { entries: [entry(5), entry(4)], cursor: 'c1' },
    c1: { entries: [entry(3), entry(2)], cursor: 'c2' },
    c2: { entries: [entry(1)] },
  };
  const peer = await scriptedPeer(['journal', 'owners'], {
    answer: (method, params) => {
      const p = params as Record<string, unknown>;
      if (method === 'journal/list') return pages[typeof p['cursor'] === 'string' ? p['cursor'] : 'first'];
      if (method === 'journal/diff') return { diff: '--- a (before)\n+++ a (after)\n', truncated: false };
      if (method === 'journal/restore') return { entry: '6', displayPath: 'f5.txt', version: 'v4' };
      return null;
    },
  });
  try {
    const s = await connect({ socket: peer.socket, roots: ['/srv/app'] });
    const seqs: number[] = [];
    for await (const e of s.journalEntries({ path: 'src', limit: 2 })) seqs.push(e.seq);
    assert.deepEqual(seqs, [5, 4, 3, 2, 1]);
    assert.deepEqual(await s.journalDiff('5'), { diff: '--- a (before)\n+++ a (after)\n', truncated: false });
    assert.deepEqual(await s.journalRestore('5'), { entry: '6', displayPath: 'f5.txt', version: 'v4' });
    await s.journalRestore('5', { force: true, owner: 'sub' });
    await s.journalList();
    assert.deepEqual(
      peer.received.filter((r) => r.method.startsWith('journal/')).map((r) => [r.method, r.params]),
      [
        ['journal/list', { path: 'src', limit: 2 }],
        ['journal/list', { path: 'src', limit: 2, cursor: 'c1' }],
        ['journal/list', { path: 'src', limit: 2, cursor: 'c2' }],
        ['journal/diff', { entry: '5' }],
        ['journal/restore', { entry: '5' }],
        ['journal/restore', { entry: '5', force: true, owner: 'sub' }],
        ['journal/list', {}],
      ],
    );
    await s.close();
  } finally {
    await peer.stop();
  }
});

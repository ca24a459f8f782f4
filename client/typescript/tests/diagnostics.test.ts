// Language servers (feature `diagnostics`) against the real filectxd with the repository's
// scripted server fake-lsp (tests/src/bin/fake_lsp; a line `ERROR: MESSAGE` of an open `.fk`
// document is an error): what a write, an edit or a restore introduced, `lspDiagnostics`, the
// `diagnostics` tool, `diagnostics: 'off'`; and against a scripted peer what the client alone
// decides: an older daemon's refusals read as the feature, `lspDiagnostics` refused before
// anything is sent. The daemon's tests are skipped, saying so, without fake-lsp or on a daemon
// without the feature.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { connect, FEATURES, UnsupportedFeatureError, type ConnectOptions, type Session } from '../src/index.js';
import { fakeLspBinary, startDaemon, type Daemon } from './daemon.js';
import { scriptedPeer } from './peer.js';
import { skip } from './skip.js';

const NOT_ANNOUNCED = 'this filectxd does not announce the feature "diagnostics": set FILECTXD to a build with it';
/** Whether the daemon under test has the feature. */
let announced = false;
/** A daemon whose one language server is fake-lsp, for `.fk` files; absent: `unable` says why. */
let lab: Daemon | undefined;
let unable = NOT_ANNOUNCED;

before(async () => {
  const probe = await startDaemon();
  try {
    const s = await connect({ socket: probe.socket, roots: [probe.root] });
    announced = s.hasFeature(FEATURES.diagnostics);
    await s.close();
  } finally {
    await probe.stop();
  }
  if (!announced) return;
  const fake = fakeLspBinary();
  if (!existsSync(fake)) {
    unable = `fake-lsp not found at ${fake}: build it (cargo build -p filectx-tests --bin fake-lsp) or set FILECTX_FAKE_LSP`;
    return;
  }
  const config = [
    '[[language_server]]',
    'name = "fake"',
    `command = ${JSON.stringify(fake)}`,
    'args = ["--stdio"]',
    'extensions = [".fk"]',
    'root_markers = ["fake.toml"]',
    '',
  ].join('\n');
  lab = await startDaemon(['--no-builtin-language-servers'], config);
  await mkdir(join(lab.root, 'proj'));
  await writeFile(join(lab.root, 'proj', 'fake.toml'), '');
});
after(async () => {
  await lab?.stop();
});

/** A session on the lab's daemon, rooted at its root; `undefined` (the test skipped) without one. */
async function session(t: TestContext, options: Partial<ConnectOptions> = {}): Promise<[Session, Daemon] | undefined> {
  if (lab === undefined) {
    skip(t, unable);
    return undefined;
  }
  return [await connect({ socket: lab.socket, roots: [lab.root], ...options }), lab];
}

test('an edit that introduces an error reports it fresh; lspDiagnostics and a restore see it too', async (t) => {
  const opened = await session(t);
  if (!opened) return;
  const [s, daemon] = opened;
  try {
    assert.equal(s.info.capabilities.diagnostics, true);
    assert.ok(s.hasFeature(FEATURES.diagnostics));
    await writeFile(join(daemon.root, 'proj', 'a.fk'), 'ok\nfine\n');
    await s.file.read({ path: 'proj/a.fk' });
    const edited = await s.file.edit({ path: 'proj/a.fk', oldString: 'fine', newString: 'ERROR: x' });
    assert.equal(edited.diagnostics?.status, 'fresh', JSON.stringify(edited));
    assert.equal(edited.diagnostics.server, 'fake');
    assert.deepEqual(edited.diagnostics.introduced, [
      { path: 'proj/a.fk', line: 2, column: 1, severity: 'error', message: 'x', source: 'fake' },
    ]);
    assert.equal(edited.diagnostics.remaining, 0);
    assert.deepEqual(edited.diagnostics.otherFiles, []);

    const now = await s.lspDiagnostics('proj/a.fk');
    assert.equal(now.status, 'fresh', JSON.stringify(now));
    assert.equal(now.server, 'fake');
    assert.equal(now.version, edited.version);
    assert.deepEqual(
      now.diagnostics.map((d) => [d.line, d.message]),
      [[2, 'x']],
    );
    await writeFile(join(daemon.root, 'notes.md'), 'ERROR: not checked\n');
    const none = await s.lspDiagnostics('notes.md');
    assert.equal(none.status, 'none');
    assert.deepEqual(none.diagnostics, []);

    // Fixed by a write: nothing introduced. Undoing the fix brings the error back.
    const fixed = await s.file.write({ path: 'proj/a.fk', content: 'ok\nfine\n' });
    assert.equal(fixed.diagnostics?.status, 'fresh', JSON.stringify(fixed));
    assert.deepEqual(fixed.diagnostics.introduced, []);
    const [fix] = (await s.journalList({ path: 'proj/a.fk', limit: 1 })).entries;
    assert.equal(fix?.after, fixed.version);
    const restored = await s.journalRestore(fix.entry);
    assert.equal(restored.diagnostics?.status, 'fresh', JSON.stringify(restored));
    assert.deepEqual(
      restored.diagnostics.introduced.map((d) => d.message),
      ['x'],
    );

    const status = await s.status();
    assert.deepEqual(
      status.languageServers?.map((server) => server.name),
      ['fake'],
    );
  } finally {
    await s.close();
  }
});

test('the model-facing edit says what it broke, and the diagnostics tool lists the file errors', async (t) => {
  const opened = await session(t, { tools: ['read', 'edit', 'diagnostics'] });
  if (!opened) return;
  const [s, daemon] = opened;
  try {
    assert.deepEqual(s.info.capabilities.tools, ['read', 'edit', 'diagnostics']);
    await writeFile(join(daemon.root, 'proj', 'tool.fk'), 'one\n');
    await s.tools.call('read', { file_path: 'proj/tool.fk' });
    const edit = await s.tools.call('edit', { file_path: 'proj/tool.fk', old_string: 'one', new_string: 'ERROR: broken' });
    assert.equal(edit.isError, false);
    assert.match(edit.content[0]?.text ?? '', /\nNew errors \(fake\):\n1:1 broken$/);
    const listed = await s.tools.call('diagnostics', { file_path: 'proj/tool.fk' });
    assert.match(listed.content[0]?.text ?? '', /^Errors in proj\/tool\.fk \(fake\):\n1:1 broken/);
  } finally {
    await s.close();
  }
});

test("with diagnostics: 'off' writes and edits carry no report; lspDiagnostics still answers", async (t) => {
  const opened = await session(t, { diagnostics: 'off' });
  if (!opened) return;
  const [s] = opened;
  try {
    assert.equal(s.info.capabilities.diagnostics, true);
    const written = await s.file.write({ path: 'proj/off.fk', content: 'ERROR: unseen\n' });
    assert.equal('diagnostics' in written, false, JSON.stringify(written));
    const edited = await s.file.edit({ path: 'proj/off.fk', oldString: 'unseen', newString: 'still unseen' });
    assert.equal('diagnostics' in edited, false, JSON.stringify(edited));
    // Asked for, the file's errors are there all the same.
    const now = await s.lspDiagnostics('proj/off.fk');
    assert.equal(now.version, edited.version);
    assert.deepEqual(
      now.diagnostics.map((d) => d.message),
      ['still unseen'],
    );
  } finally {
    await s.close();
  }
});

test('a daemon without language servers: capabilities.diagnostics false, no report, status none', async (t) => {
  if (!announced) {
    skip(t, NOT_ANNOUNCED);
    return;
  }
  const plain = await startDaemon(['--no-builtin-language-servers']);
  try {
    const s = await connect({ socket: plain.socket, roots: [plain.root], tools: ['read', 'diagnostics'] });
    assert.equal(s.info.capabilities.diagnostics, false);
    assert.deepEqual(s.info.capabilities.tools, ['read']);
    const written = await s.file.write({ path: 'a.fk', content: 'ERROR: x\n' });
    assert.equal('diagnostics' in written, false, JSON.stringify(written));
    const now = await s.lspDiagnostics('a.fk');
    assert.equal(now.status, 'none');
    assert.equal(now.version, written.version);
    await s.close();
  } finally {
    await plain.stop();
  }
});

test('an older daemon refusing the option or a tool name is UnsupportedFeatureError of its feature', async () => {
  const cases: [Partial<ConnectOptions>, string, string][] = [
    [{ diagnostics: 'off' }, 'unknown field `diagnostics`, expected one of `clientInfo`, `roots`', 'diagnostics'],
    [{ tools: ['read', 'diagnostics'] }, 'unknown variant `diagnostics`, expected one of `read`, `write`', 'diagnostics'],
    [{ tools: ['read', 'undo'] }, 'unknown variant `undo`, expected one of `read`, `write`', 'journal'],
    [{ tools: ['read', 'grep'] }, 'unknown variant `grep`, expected one of `read`, `write`', 'search'],
  ];
  for (const [options, message, feature] of cases) {
    const peer = await scriptedPeer([], { refuseInitialize: { code: -32602, message: `Invalid params: ${message}` } });
    try {
      await assert.rejects(
        connect({ socket: peer.socket, roots: ['/srv'], ...options }),
        (e: unknown) => e instanceof UnsupportedFeatureError && e.feature === feature,
        message,
      );
    } finally {
      await peer.stop();
    }
  }
});

test('lspDiagnostics is refused before anything is sent without the feature, and sends { path } with it', async () => {
  const without = await scriptedPeer(['owners']);
  try {
    const s = await connect({ socket: without.socket, roots: ['/srv'], diagnostics: 'wait' });
    await assert.rejects(
      s.lspDiagnostics('a.fk'),
      (e: unknown) => e instanceof UnsupportedFeatureError && e.feature === 'diagnostics',
    );
    assert.deepEqual(without.methods(), ['initialize']);
    assert.equal((without.received[0]?.params as { diagnostics?: string }).diagnostics, 'wait');
    await s.close();
  } finally {
    await without.stop();
  }
  const answer = { status: 'none', version: 'v1', diagnostics: [], elapsedMs: 0 };
  const peer = await scriptedPeer(['diagnostics'], { answer: () => answer });
  try {
    const s = await connect({ socket: peer.socket, roots: ['/srv'] });
    assert.deepEqual(await s.lspDiagnostics('src/a.fk'), answer);
    assert.deepEqual(peer.received[1], { method: 'lsp/diagnostics', params: { path: 'src/a.fk' } });
    await s.close();
  } finally {
    await peer.stop();
  }
});

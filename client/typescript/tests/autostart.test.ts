// connect({ autostart }) starts the daemon when nothing answers, as `filectx` does, and never
// where the socket is refused; findDaemon's order (option, FILECTX_DAEMON, @filectx/cli, PATH).
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { readlinkSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { connect, findDaemon, TransportError, UntrustedSocketError } from '../src/index.js';
import { daemonBinary } from './daemon.js';

async function withFolder(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'filectx-ts-autostart-'));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('with autostart, a missing daemon is started, detached, and serves the session', async () => {
  await withFolder(async (dir) => {
    const root = join(dir, 'root');
    await mkdir(root);
    await writeFile(join(root, 'a.txt'), 'one\ntwo\n');
    const socket = join(dir, 'run', 'filectx.sock');
    const log = join(dir, 'state', 'filectxd.log');
    await assert.rejects(connect({ socket, roots: [root] }), TransportError, 'without autostart nothing is started');
    const session = await connect({
      socket,
      roots: [root],
      autostart: { daemon: daemonBinary(), log, args: ['--no-fsync'] },
    });
    let pid: number | undefined;
    try {
      pid = (await session.status()).pid;
      assert.equal(readlinkSync(`/proc/${pid}/exe`), realpathSync(daemonBinary()));
      const read = await session.file.read({ path: 'a.txt' });
      assert.deepEqual(read.lines, ['one', 'two']);
      // A second client finds it running: nothing else is started.
      const second = await connect({ socket, roots: [root], autostart: { daemon: '/nonexistent/filectxd' } });
      assert.equal((await second.status()).pid, pid);
      await second.close();
    } finally {
      await session.close();
      if (pid !== undefined) process.kill(pid, 'SIGTERM');
    }
    assert.match(await readFile(log, 'utf8'), /listening/);
  });
});

test('autostart never starts a daemon where the socket is refused', async () => {
  await withFolder(async (dir) => {
    const folder = join(dir, 'shared');
    await mkdir(folder);
    await chmod(folder, 0o777);
    const marker = join(dir, 'started');
    const fake = join(dir, 'fake-filectxd');
    await writeFile(fake, `#!/bin/sh\ntouch '${marker}'\n`, { mode: 0o755 });
    await assert.rejects(
      connect({ socket: join(folder, 'filectx.sock'), roots: [dir], autostart: { daemon: fake } }),
      UntrustedSocketError,
    );
    await assert.rejects(readFile(marker), /ENOENT/);
  });
});

test('a daemon that never answers ends in a TransportError naming it and its log', async () => {
  await withFolder(async (dir) => {
    const quiet = join(dir, 'quiet-filectxd');
    await writeFile(quiet, '#!/bin/sh\nexit 7\n', { mode: 0o755 });
    const log = join(dir, 'quiet.log');
    await assert.rejects(
      connect({ socket: join(dir, 'run', 'filectx.sock'), roots: [dir], autostart: { daemon: quiet, log, timeoutMs: 300 } }),
      (error: unknown) =>
        error instanceof TransportError && error.message.includes(quiet) && error.message.includes('exited with 7') && error.message.includes(log),
    );
  });
});

test('findDaemon: the option, then FILECTX_DAEMON, then filectxd on PATH, else what was tried', async () => {
  await withFolder(async (dir) => {
    const bin = join(dir, 'bin');
    await mkdir(bin);
    await writeFile(join(bin, 'filectxd'), '#!/bin/sh\n', { mode: 0o755 });
    assert.equal(findDaemon('/opt/x/filectxd', { PATH: bin }), '/opt/x/filectxd');
    assert.equal(findDaemon(undefined, { FILECTX_DAEMON: 'rel/filectxd', PATH: bin }), join(process.cwd(), 'rel/filectxd'));
    assert.equal(findDaemon(undefined, { FILECTX_DAEMON: 'filectxd', PATH: bin }), join(bin, 'filectxd'));
    // @filectx/cli is not installed beside this package in the repository: PATH is next.
    assert.equal(findDaemon(undefined, { PATH: bin }), join(bin, 'filectxd'));
    assert.throws(
      () => findDaemon(undefined, { PATH: join(dir, 'empty') }),
      (error: unknown) => error instanceof TransportError && /@filectx\/cli is not installed, and there is no filectxd on PATH/.test(error.message),
    );
  });
});

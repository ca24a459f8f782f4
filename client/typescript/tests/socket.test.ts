// The default socket path (as the Rust client finds it) and the trust checks before connecting.
import assert from 'node:assert/strict';
import { chmod, chown, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { checkSocketTrust, connect, defaultSocketPath, TransportError, UntrustedSocketError } from '../src/index.js';
import { canPlayAnotherUser, NOBODY } from './skip.js';

test('the default socket path: FILECTX_SOCKET, then XDG_RUNTIME_DIR, then /tmp/filectx-UID', () => {
  assert.equal(defaultSocketPath({ FILECTX_SOCKET: '/x/s.sock', XDG_RUNTIME_DIR: '/run/user/7' }, 7), '/x/s.sock');
  assert.equal(defaultSocketPath({ FILECTX_SOCKET: '', XDG_RUNTIME_DIR: '/run/user/7' }, 7), '/run/user/7/filectx.sock');
  assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: 'relative' }, 7), '/tmp/filectx-7/filectx.sock');
  assert.equal(defaultSocketPath({}, 1000), '/tmp/filectx-1000/filectx.sock');
});

async function withFolder(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'filectx-ts-trust-'));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function listen(path: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((c) => c.destroy());
    server.once('error', reject);
    server.listen(path, () => resolve(server));
  });
}

test('a folder others may write is refused before connecting, sticky bit or not', async () => {
  await withFolder(async (dir) => {
    const folder = join(dir, 'run');
    await mkdir(folder);
    const socket = join(folder, 'filectx.sock');
    const server = await listen(socket);
    let accepted = 0;
    server.on('connection', () => (accepted += 1));
    try {
      for (const mode of [0o777, 0o1777, 0o720]) {
        await chmod(folder, mode);
        await assert.rejects(connect({ socket, roots: [dir] }), (error: unknown) => {
          assert.ok(error instanceof UntrustedSocketError, String(error));
          assert.match(error.message, new RegExp(`mode ${mode.toString(8)}`));
          assert.match(error.message, /chmod go-w/);
          return true;
        });
      }
      await chmod(folder, 0o755);
      await checkSocketTrust(socket);
      assert.equal(accepted, 0, 'nothing was sent to a refused socket');
    } finally {
      server.close();
    }
  });
});

test('a symlink in place of the socket, or a file, is refused; no folder or no socket is "no daemon"', async () => {
  await withFolder(async (dir) => {
    const real = join(dir, 'real.sock');
    const server = await listen(real);
    let accepted = 0;
    server.on('connection', () => (accepted += 1));
    try {
      const link = join(dir, 'filectx.sock');
      await symlink(real, link);
      await assert.rejects(connect({ socket: link, roots: [dir] }), (error: unknown) => {
        assert.ok(error instanceof UntrustedSocketError, String(error));
        assert.equal(error.kind, 'notASocket');
        assert.match(error.reason, /^it is a symbolic link, which the client does not follow/);
        return true;
      });
      const file = join(dir, 'file');
      await writeFile(file, '');
      await assert.rejects(checkSocketTrust(file), /refusing the socket \S+: it is not a socket; choose another socket/);
      await assert.rejects(checkSocketTrust(join(file, 'filectx.sock')), (error: unknown) => {
        assert.ok(error instanceof UntrustedSocketError && error.kind === 'notAFolder', String(error));
        return true;
      });
      assert.equal(accepted, 0, 'nothing was sent to a refused socket');
      await checkSocketTrust(real);
    } finally {
      server.close();
    }
    for (const socket of [join(dir, 'none', 'filectx.sock'), join(dir, 'none.sock')]) {
      await checkSocketTrust(socket);
      await assert.rejects(connect({ socket, roots: [dir] }), (error: unknown) => {
        assert.ok(error instanceof TransportError, String(error));
        assert.equal(
          error.message,
          `cannot connect to filectxd at ${socket}: connect ENOENT ${socket} (is filectxd running? ` +
            'start it with `filectxd`, or give the socket of a running one)',
        );
        return true;
      });
    }
  });
});

test('a socket nobody listens on is a TransportError under its own path', async () => {
  await withFolder(async (dir) => {
    // A server killed outright leaves its socket behind (a clean close removes it).
    const socket = join(dir, 'stale.sock');
    const listen = `require('node:net').createServer().listen(${JSON.stringify(socket)}`;
    const code = `${listen}, () => process.kill(process.pid, 'SIGKILL'))`;
    await new Promise((resolve) => spawn(process.execPath, ['-e', code], { stdio: 'ignore' }).once('exit', resolve));
    await checkSocketTrust(socket);
    await assert.rejects(connect({ socket, roots: [dir] }), (error: unknown) => {
      assert.ok(error instanceof TransportError, String(error));
      assert.equal(
        error.message,
        `cannot connect to filectxd at ${socket}: connect ECONNREFUSED ${socket} (is filectxd running? ` +
          'start it with `filectxd`, or give the socket of a running one)',
      );
      return true;
    });
  });
});

test("a folder or a socket of another user is refused", async (t) => {
  if (!canPlayAnotherUser(t)) return;
  await withFolder(async (dir) => {
    const folder = join(dir, 'theirs');
    await mkdir(folder, { mode: 0o755 });
    await chown(folder, NOBODY, NOBODY);
    await assert.rejects(
      checkSocketTrust(join(folder, 'filectx.sock')),
      new RegExp(`belongs to uid ${NOBODY}, not to you \\(uid 0\\)`),
    );
    const ours = join(dir, 'ours');
    await mkdir(ours, { mode: 0o700 });
    const socket = join(ours, 'filectx.sock');
    const server = await listen(socket);
    try {
      await chown(socket, NOBODY, NOBODY);
      await assert.rejects(checkSocketTrust(socket), new RegExp(`it belongs to uid ${NOBODY}`));
    } finally {
      server.close();
    }
  });
});

test('no daemon at the socket is a TransportError that says so', async () => {
  await withFolder(async (dir) => {
    await assert.rejects(connect({ socket: join(dir, 'none.sock'), roots: [dir] }), (error: unknown) => {
      assert.ok(error instanceof TransportError);
      assert.match(error.message, /is filectxd running\?/);
      return true;
    });
  });
});

// The client trusts only its own daemon: an impostor run as another user (uid 65534) never
// receives a byte — not from a socket in its folder, nor in a folder of ours it may write, nor
// when it swaps the socket's folder while the client connects, nor at the prefix Node would cut
// a long socket path to. Our own socket is still reached (through a symlinked folder of ours
// too, and at a path longer than a Unix socket address). These tests need root (to run the
// impostor as another user): without it they are skipped and recorded (skip.ts).
import assert from 'node:assert/strict';
import { chmod, chown, lchown, mkdir, open, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { connect, TransportError, UntrustedSocketError } from '../src/index.js';
import { canPlayAnotherUser, NOBODY } from './skip.js';
import { scene, startImpostor, startSwapper, type Impostor, type Scene } from './impostor.js';
import { scriptedPeer } from './peer.js';

/** How many times the race test connects while the folders are swapped. */
const RACE_ATTEMPTS = 300;

/** Connecting to `socket` is refused with an UntrustedSocketError whose message matches `why`. */
async function refused(socket: string, roots: string[], ...why: RegExp[]): Promise<void> {
  await assert.rejects(connect({ socket, roots }), (error: unknown) => {
    assert.ok(error instanceof UntrustedSocketError, `expected a refusal, got ${String(error)}`);
    assert.equal(error.socket, socket);
    assert.match(error.message, /^refusing the socket /);
    assert.match(error.message, /option socket, or FILECTX_SOCKET/);
    for (const pattern of why) assert.match(error.message, pattern);
    return true;
  });
}

/** The impostor was never even connected to, and it works (so that its silence means something). */
async function untouched(impostor: Impostor): Promise<void> {
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(impostor.connections(), 0, `the impostor was reached: ${JSON.stringify(impostor.received())}`);
  await impostor.proveLive();
}

/** Runs `fn` in a new scene, then removes it; skips the test `t` when it cannot play another user. */
async function inScene(t: TestContext, fn: (s: Scene) => Promise<void>): Promise<void> {
  if (!canPlayAnotherUser(t)) return;
  const s = await scene();
  try {
    await fn(s);
  } finally {
    await s.remove();
  }
}

test('a socket in a folder another user owns is refused before connecting', async (t) => {
  await inScene(t, async (s) => {
    const impostor = await startImpostor(join(s.theirs, 'filectx.sock'));
    try {
      await refused(impostor.socket, [s.work], /its folder \S+theirs belongs to uid 65534, not to you \(uid 0\)/);
      await untouched(impostor);
    } finally {
      await impostor.stop();
    }
  });
});

test('a folder of ours that others may write is refused before connecting, sticky bit or not', async (t) => {
  await inScene(t, async (s) => {
    const folder = await s.ourFolder(join(s.dir, 'open'), 0o777);
    const impostor = await startImpostor(join(folder, 'filectx.sock'));
    try {
      for (const mode of [0o777, 0o1777, 0o733, 0o1733]) {
        await chmod(folder, mode);
        const why = new RegExp(`has mode ${mode.toString(8)}, so other users can write`);
        await refused(impostor.socket, [s.work], why, /chmod go-w /);
      }
      await untouched(impostor);
    } finally {
      await impostor.stop();
    }
  });
});

test("a socket another user bound in a folder of ours, or a link to one, is refused before connecting", async (t) => {
  await inScene(t, async (s) => {
    // The folder let others write while the impostor bound its socket, and no longer does: the
    // socket stays, owned by its binder.
    const folder = await s.ourFolder(join(s.dir, 'ours'), 0o777);
    const impostor = await startImpostor(join(folder, 'filectx.sock'));
    const elsewhere = await startImpostor(join(s.theirs, 'impostor.sock'));
    try {
      await chmod(folder, 0o700);
      await refused(impostor.socket, [s.work], /it belongs to uid 65534, not to you \(uid 0\)/);
      await untouched(impostor);
      // A symbolic link of ours in a folder of ours, to the other user's socket.
      const closed = await s.ourFolder(join(s.dir, 'linked'), 0o700);
      const link = join(closed, 'filectx.sock');
      await symlink(elsewhere.socket, link);
      await refused(link, [s.work], /it is a symbolic link, which the client does not follow/);
      await untouched(elsewhere);
    } finally {
      await impostor.stop();
      await elsewhere.stop();
    }
  });
});

const SWAP_TEST = "an impostor that keeps swapping the socket's folder for its own never receives a byte";
test(SWAP_TEST, { timeout: 60_000 }, async (t) => {
  await inScene(t, async (s) => {
    // theirs/run is our folder (0700, our peer inside); theirs/evil is the impostor's. Both live in
    // the other user's folder, so that user may rename them: it keeps putting its own folder at
    // theirs/run while the client connects to theirs/run/filectx.sock, again and again.
    const run = await s.ourFolder(join(s.theirs, 'run'), 0o700);
    const evil = join(s.theirs, 'evil');
    const socket = join(run, 'filectx.sock');
    const peer = await scriptedPeer([], { socket });
    await mkdir(evil, { mode: 0o755 });
    await chown(evil, NOBODY, NOBODY);
    const impostor = await startImpostor(join(evil, 'filectx.sock'));
    // Each attempt: our peer reached, refused (the impostor's folder was met), or no socket there
    // (the folder was between two renames).
    const outcomes = { connected: 0, refused: 0, absent: 0 };
    const metBoth = () => outcomes.connected > 0 && outcomes.refused > 0;
    let attempts = 0;
    try {
      const swapper = await startSwapper(run, evil, join(s.theirs, 'parked'));
      try {
        // At least RACE_ATTEMPTS, and on until both our folder and the impostor's were met.
        for (; attempts < RACE_ATTEMPTS || (!metBoth() && attempts < 10 * RACE_ATTEMPTS); attempts += 1) {
          try {
            const session = await connect({ socket, roots: [s.work] });
            outcomes.connected += 1;
            await session.close();
          } catch (error) {
            if (error instanceof UntrustedSocketError) outcomes.refused += 1;
            else if (error instanceof TransportError) outcomes.absent += 1;
            else throw error;
          }
        }
      } finally {
        await swapper.stop();
      }
      t.diagnostic(`${attempts} attempts: ${JSON.stringify(outcomes)}`);
      const received = impostor.received();
      assert.deepEqual(
        { connections: impostor.connections(), received: received.length },
        { connections: 0, received: 0 },
        `the impostor was reached (${JSON.stringify(outcomes)}); it received ${JSON.stringify(received.slice(0, 2))}`,
      );
      // The race was run: the client reached our peer, and met the impostor's folder too.
      assert.ok(metBoth(), JSON.stringify(outcomes));
      assert.ok(peer.methods().includes('initialize'));
    } finally {
      await impostor.stop();
      await peer.stop();
    }
  });
});

test('a socket path longer than a socket address reaches that socket, never a prefix of its path', async (t) => {
  await inScene(t, async (s) => {
    // Our folder theirs/ddd…d (0700) has a path so long that the socket's path in it exceeds the
    // 108 bytes of a socket address; its first 108 bytes name theirs/ddd… one folder up, where the
    // other user may bind.
    const socketName = 'filectx.sock';
    const prefixLength = 108;
    const stem = join(s.theirs, '/');
    const impostorPath = stem + 'd'.repeat(prefixLength - Buffer.byteLength(stem));
    const folder = await s.ourFolder(impostorPath + 'ddd', 0o700);
    const socket = join(folder, socketName);
    assert.ok(Buffer.byteLength(socket) > prefixLength && socket.startsWith(impostorPath));
    const impostor = await startImpostor(impostorPath);
    // Our peer binds the long path through its folder's descriptor, as the client connects.
    const handle = await open(folder, 'r');
    const peer = await scriptedPeer([], { socket: `/proc/self/fd/${handle.fd}/${socketName}` });
    try {
      const session = await connect({ socket, roots: [s.work] });
      assert.equal(session.socketPath, socket);
      await session.close();
      assert.deepEqual(peer.methods().slice(0, 1), ['initialize']);
      await untouched(impostor);
      // A file name too long for any socket address is not cut either: nothing is reached.
      const long = join(folder, 'f'.repeat(100));
      await assert.rejects(connect({ socket: long, roots: [s.work] }), (error: unknown) => {
        assert.ok(error instanceof TransportError, String(error));
        assert.match(error.message, /too long/);
        return true;
      });
      assert.equal(impostor.connections(), 1, 'only proveLive reached the impostor');
    } finally {
      await peer.stop();
      await handle.close();
      await impostor.stop();
    }
  });
});

test('a symlinked folder is followed when the link is ours and leads to a folder of ours', async (t) => {
  await inScene(t, async (s) => {
    const real = await s.ourFolder(join(s.dir, 'real'), 0o700);
    const peer = await scriptedPeer([], { socket: join(real, 'filectx.sock') });
    const link = join(s.dir, 'link');
    await symlink(real, link);
    try {
      const session = await connect({ socket: join(link, 'filectx.sock'), roots: [s.work] });
      await session.close();
      assert.ok(peer.methods().includes('initialize'));
      // A link of another user: that user decides where it leads.
      const theirLink = join(s.dir, 'their-link');
      await symlink(real, theirLink);
      await lchown(theirLink, NOBODY, NOBODY);
      await refused(
        join(theirLink, 'filectx.sock'),
        [s.work],
        /its folder \S+their-link is a symbolic link that belongs to uid 65534, not to you \(uid 0\)/,
      );
      // A link of ours to the other user's folder.
      const impostor = await startImpostor(join(s.theirs, 'filectx.sock'));
      try {
        const toTheirs = join(s.dir, 'to-theirs');
        await symlink(s.theirs, toTheirs);
        await refused(join(toTheirs, 'filectx.sock'), [s.work], /belongs to uid 65534, not to you \(uid 0\)/);
        await untouched(impostor);
      } finally {
        await impostor.stop();
      }
    } finally {
      await peer.stop();
    }
  });
});

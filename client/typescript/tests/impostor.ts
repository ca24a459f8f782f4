// Another user playing the daemon, for the trust tests: a scene under /tmp with a folder that
// uid 65534 (`nobody`) owns, an impostor server run as that uid that records every connection
// and every byte it receives, and a swapper run as that uid that keeps renaming folders in its
// own folder. Running a process as another user needs root, which CI has: the tests that use
// this ask canPlayAnotherUser (skip.ts) first, and are skipped and recorded without it.
import { spawn, type ChildProcess } from 'node:child_process';
import { createConnection } from 'node:net';
import { chmod, chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { NOBODY } from './skip.js';

/** How long a test waits for anything that should happen promptly. */
const PATIENCE_MS = 10_000;

/**
 * A temp folder under /tmp that uid 65534 may enter, holding `theirs/` (owned by 65534, mode
 * 0755: the other user's folder) and `work/` (ours, 0700: a session root).
 */
export interface Scene {
  dir: string;
  theirs: string;
  work: string;
  /** A new folder of ours at `path` with exactly `mode` (the umask does not cut it). */
  ourFolder(path: string, mode: number): Promise<string>;
  /** Removes the scene. */
  remove(): Promise<void>;
}

/** Makes a {@link Scene} (giving `theirs/` away needs root: ask canPlayAnotherUser first). */
export async function scene(): Promise<Scene> {
  const dir = await mkdtemp('/tmp/filectx-ts-impostor-');
  await chmod(dir, 0o755);
  const theirs = join(dir, 'theirs');
  await mkdir(theirs);
  await chown(theirs, NOBODY, NOBODY);
  await chmod(theirs, 0o755);
  const work = join(dir, 'work');
  await mkdir(work, { mode: 0o700 });
  return {
    dir,
    theirs,
    work,
    async ourFolder(path: string, mode: number) {
      await mkdir(path);
      await chmod(path, mode);
      return path;
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/** Runs `code` (CommonJS, for `node -e`) as uid/gid 65534 with `env`, its stdout piped. */
function runAsNobody(code: string, env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['-e', code], {
    uid: NOBODY,
    gid: NOBODY,
    cwd: '/',
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

// The impostor: listens on IMPOSTOR_SOCKET (mode 0777, so that only the client's own checks can
// stop it), prints `ready`, then for every connection `connected` and, for every chunk it
// receives, `data <the chunk as JSON>`; it ends a connection at its first chunk (so a client
// that was fooled fails at once instead of waiting for an answer).
const IMPOSTOR = `
const net = require('node:net');
const fs = require('node:fs');
const path = process.env.IMPOSTOR_SOCKET;
const server = net.createServer((c) => {
  process.stdout.write('connected\\n');
  c.on('error', () => {});
  c.on('data', (chunk) => {
    process.stdout.write('data ' + JSON.stringify(chunk.toString('utf8')) + '\\n');
    c.destroy();
  });
});
server.listen(path, () => {
  fs.chmodSync(path, 0o777);
  process.stdout.write('ready\\n');
});
`;

/** A running impostor. */
export interface Impostor {
  /** Where it listens. */
  socket: string;
  /** How many connections it accepted. */
  connections(): number;
  /** Everything it received, one entry per chunk. */
  received(): string[];
  /** Connects without any check and sends a message, and waits until it is recorded. */
  proveLive(): Promise<void>;
  /** Waits (at most `ms`) for connections still on their way, then kills it. */
  stop(ms?: number): Promise<void>;
}

/** Starts an impostor as uid 65534 on `socket` (in a folder that uid may write). */
export async function startImpostor(socket: string): Promise<Impostor> {
  const child = runAsNobody(IMPOSTOR, { IMPOSTOR_SOCKET: socket });
  const lines: string[] = [];
  let partial = '';
  const waiters = new Set<() => void>();
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (text: string) => {
    const parts = (partial + text).split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
    for (const wake of [...waiters]) wake();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const waitFor = (what: string, done: () => boolean): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = () => {
        if (done()) {
          finish();
          resolve();
        } else if (child.exitCode !== null || child.signalCode !== null) {
          finish();
          reject(new Error(`the impostor exited before ${what}; it printed ${JSON.stringify(lines)}`));
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`timed out waiting for ${what}; the impostor printed ${JSON.stringify(lines)}`));
      }, PATIENCE_MS);
      const finish = () => {
        clearTimeout(timer);
        waiters.delete(check);
        child.off('exit', check);
      };
      waiters.add(check);
      child.once('exit', check);
      check();
    });
  try {
    await waitFor('it listens', () => lines.includes('ready'));
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const received = () => lines.filter((l) => l.startsWith('data ')).map((l) => JSON.parse(l.slice(5)) as string);
  return {
    socket,
    connections: () => lines.filter((l) => l === 'connected').length,
    received,
    async proveLive() {
      const before = received().length;
      await new Promise<void>((resolve, reject) => {
        const raw = createConnection(socket);
        raw.once('error', reject);
        raw.once('connect', () => {
          raw.end('Content-Length: 2\r\n\r\n{}');
          raw.resume();
          raw.once('close', () => resolve());
        });
      });
      await waitFor('the raw message', () => received().length > before);
    },
    async stop(ms = 100) {
      await new Promise((r) => setTimeout(r, ms));
      child.kill('SIGKILL');
      await exited;
    },
  };
}

// The swapper: renames RUN to PARKED, EVIL to RUN, RUN back to EVIL and PARKED back to RUN, over
// and over, so that RUN is by turns the good folder, missing and the impostor's; it prints
// `swapping` once started and `failed <why>` if a rename fails.
const SWAPPER = `
const fs = require('node:fs');
const { RUN, EVIL, PARKED } = process.env;
process.stdout.write('swapping\\n');
for (;;) {
  try {
    fs.renameSync(RUN, PARKED);
    fs.renameSync(EVIL, RUN);
    fs.renameSync(RUN, EVIL);
    fs.renameSync(PARKED, RUN);
  } catch (error) {
    process.stdout.write('failed ' + error.message + '\\n');
    process.exit(1);
  }
}
`;

/** A running swapper. */
export interface Swapper {
  /** Stops it; throws if a rename had failed (the race then was not run). */
  stop(): Promise<void>;
}

/**
 * Starts a swapper as uid 65534 that keeps exchanging the folders `run` and `evil` (through
 * `parked`), all three in a folder that uid owns.
 */
export async function startSwapper(run: string, evil: string, parked: string): Promise<Swapper> {
  const child = runAsNobody(SWAPPER, { RUN: run, EVIL: evil, PARKED: parked });
  let printed = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (text: string) => (printed += text));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + PATIENCE_MS;
  while (!printed.includes('swapping')) {
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`the swapper did not start: ${printed}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  return {
    async stop() {
      child.kill('SIGKILL');
      await exited;
      if (printed.includes('failed')) throw new Error(`the swapper stopped early: ${printed}`);
    },
  };
}

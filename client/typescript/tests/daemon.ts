// Test harness: starts a real filectxd in a temp folder on its own socket (the binary from env
// FILECTXD, else ../../target/debug/filectxd relative to the package), and stops it. Its
// XDG_STATE_HOME is in that folder too, so its journal (and staging token) are its own, never
// the developer's. Also where the scripted language server fake-lsp is.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, closeSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's folder (this file runs from dist/tests/). */
export const packageDir = fileURLToPath(new URL('../../', import.meta.url));

/** The filectxd binary the tests run. */
export function daemonBinary(): string {
  const path = process.env['FILECTXD'] ?? resolve(packageDir, '../../target/debug/filectxd');
  if (!existsSync(path)) {
    throw new Error(`filectxd not found at ${path}: build it (cargo build -p filectx-daemon) or set FILECTXD`);
  }
  return path;
}

/**
 * The repository's scripted language server (tests/src/bin/fake_lsp): env FILECTX_FAKE_LSP, else
 * ../../target/debug/fake-lsp relative to the package (`cargo test --workspace` builds it; alone:
 * `cargo build -p filectx-tests --bin fake-lsp`). It may not exist: the caller says so and skips.
 */
export function fakeLspBinary(): string {
  return process.env['FILECTX_FAKE_LSP'] ?? resolve(packageDir, '../../target/debug/fake-lsp');
}

export interface Daemon {
  /** The temp folder holding everything. */
  dir: string;
  /** A folder to use as a session root. */
  root: string;
  socket: string;
  child: ChildProcess;
  pid: number;
  /** What the daemon logged. */
  log(): string;
  /**
   * Stops the daemon (SIGSTOP) and waits until every one of its threads is stopped: the kernel
   * wakes one thread to start a group stop, and the others run on until it does.
   */
  freeze(): Promise<void>;
  /** Lets a frozen daemon run again (SIGCONT). */
  thaw(): void;
  /** Sends SIGTERM and waits for the exit, then removes the temp folder. */
  stop(): Promise<void>;
}

async function waitReady(socket: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`filectxd exited with ${child.exitCode}:\n${log()}`);
    const ok = await new Promise<boolean>((done) => {
      const probe = createConnection(socket);
      probe.once('error', () => done(false));
      probe.once('connect', () => {
        // Half-close and wait for the daemon to end the probe's connection, so that it does not
        // count as a session in the test.
        probe.end();
        probe.resume();
        probe.once('close', () => done(true));
      });
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`filectxd did not start:\n${log()}`);
}

/** Whether every thread of `pid` is stopped, as each /proc/PID/task/TID/stat says (state T or t). */
async function allStopped(pid: number): Promise<boolean> {
  let tasks: string[];
  try {
    tasks = await readdir(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  const states: string[] = [];
  for (const task of tasks) {
    try {
      const stat = await readFile(`/proc/${pid}/task/${task}/stat`, 'utf8');
      states.push(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return states.length > 0 && states.every((state) => state === 'T' || state === 't');
}

/** Starts a daemon with extra flags, and with `config` (TOML) as its config file when given. */
export async function startDaemon(extra: string[] = [], config?: string): Promise<Daemon> {
  const dir = await mkdtemp(join(tmpdir(), 'filectx-ts-'));
  const root = join(dir, 'root');
  await mkdir(root);
  if (config !== undefined) {
    await writeFile(join(dir, 'config.toml'), config);
    extra = ['--config', join(dir, 'config.toml'), ...extra];
  }
  const socket = join(dir, 'run', 'filectx.sock');
  const logPath = join(dir, 'daemon.log');
  const state = join(dir, 'state');
  await mkdir(state, { mode: 0o700 });
  const logFd = openSync(logPath, 'a');
  const child = spawn(daemonBinary(), ['--socket', socket, '--log-level', 'info', '--no-fsync', ...extra], {
    stdio: ['ignore', 'ignore', logFd],
    env: { ...process.env, RUST_LOG: '', XDG_STATE_HOME: state },
  });
  closeSync(logFd);
  const log = () => {
    try {
      return readFileSync(logPath, 'utf8');
    } catch {
      return '';
    }
  };
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    await waitReady(socket, child, log);
  } catch (error) {
    child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    dir,
    root,
    socket,
    child,
    pid: child.pid ?? -1,
    log,
    async freeze() {
      child.kill('SIGSTOP');
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline) {
        if (await allStopped(child.pid ?? -1)) return;
        await new Promise((r) => setTimeout(r, 2));
      }
      throw new Error('filectxd did not stop');
    },
    thaw() {
      child.kill('SIGCONT');
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

// Autostart, as the Rust client and `filectx` do it: when nothing answers at the socket,
// `connect({ autostart: true })` starts `filectxd --socket PATH` detached (its own process group,
// in `/`, stdin and stdout on /dev/null, stderr appended to a log file) and connects as soon as a
// daemon answers there. Starts that race are safe: every filectxd takes the lock `<socket>.lock`
// before it touches the socket, one that finds it held exits, and each client keeps trying until
// its deadline, so all reach the winner. A socket the trust checks refuse is never a reason to
// start anything: that refusal ends the attempt at once.
//
// The daemon: the option `daemon`, else FILECTX_DAEMON, else the filectxd of `@filectx/cli` (its
// platform package, installed beside it by npm), else `filectxd` on PATH.
import { spawn } from 'node:child_process';
import { closeSync, constants, mkdirSync, openSync, accessSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import type { Socket } from 'node:net';
import { TransportError } from './errors.js';
import { connectTrusted, nobodyAnswers } from './socket.js';

/** Environment variable naming the daemon to start (a path, or a name looked up on PATH). */
export const DAEMON_ENV = 'FILECTX_DAEMON';
/** How long {@link connectOrStart} waits, from the start, for a daemon to answer. */
export const DEFAULT_AUTOSTART_TIMEOUT_MS = 5000;

/** How `connect` starts the daemon when none answers (`autostart: true` takes the defaults). */
export interface AutostartOptions {
  /** The daemon binary: a path, or a name on PATH; default as the module's comment says. */
  daemon?: string;
  /** Extra arguments for the daemon, after `--socket PATH`. */
  args?: string[];
  /** The file its stderr is appended to (created 0600, its folder 0700); default {@link defaultLogPath}. */
  log?: string;
  /** How long to wait for a daemon to answer, in milliseconds (default 5000). */
  timeoutMs?: number;
}

/**
 * Where a started daemon logs by default: `$XDG_STATE_HOME/filectx/filectxd.log` when that is
 * absolute, else `~/.local/state/filectx/filectxd.log`.
 */
export function defaultLogPath(env: Record<string, string | undefined> = process.env): string {
  const state = env['XDG_STATE_HOME'];
  const folder = state && isAbsolute(state) ? state : join(env['HOME'] || homedir(), '.local/state');
  return join(folder, 'filectx', 'filectxd.log');
}

/** Variables of the client's own service manager that a daemon it starts must not inherit. */
const SERVICE_MANAGER_ENV = ['NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_PID', 'LISTEN_FDNAMES', 'WATCHDOG_USEC', 'WATCHDOG_PID'];

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** The first executable `name` in a folder of PATH. */
function onPath(name: string, env: Record<string, string | undefined>): string | undefined {
  for (const folder of (env['PATH'] ?? '').split(delimiter)) {
    if (!isAbsolute(folder)) continue;
    const candidate = join(folder, name);
    if (executable(candidate)) return candidate;
  }
  return undefined;
}

/** What `require('@filectx/cli')` offers, when it is installed where this module can see it. */
interface CliPackage {
  binaryPath(name: 'filectxd'): string;
}

/**
 * The daemon binary to start: `requested` (a path, made absolute, or a name on PATH), else
 * `FILECTX_DAEMON`, else `@filectx/cli`'s filectxd, else `filectxd` on PATH. Throws
 * `TransportError` saying what was tried when none is found.
 */
export function findDaemon(requested?: string, env: Record<string, string | undefined> = process.env): string {
  const named = requested || env[DAEMON_ENV];
  if (named) {
    if (named.includes('/')) return resolve(named);
    const found = onPath(named, env);
    if (found === undefined) throw new TransportError(`cannot start the daemon: ${named} is not an executable on PATH`);
    return found;
  }
  let why = '@filectx/cli is not installed';
  try {
    const cli = createRequire(import.meta.url)('@filectx/cli') as CliPackage;
    const binary = cli.binaryPath('filectxd');
    if (executable(binary)) return binary;
    why = `@filectx/cli's filectxd, ${binary}, is not executable`;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'MODULE_NOT_FOUND') why = `@filectx/cli has no filectxd here: ${(error as Error).message}`;
  }
  const found = onPath('filectxd', env);
  if (found !== undefined) return found;
  throw new TransportError(
    `cannot start the daemon: ${why}, and there is no filectxd on PATH; install @filectx/cli ` +
      `(npm install @filectx/cli), or name the daemon with the option autostart.daemon or ${DAEMON_ENV}`,
  );
}

/** Starts `daemon --socket SOCKET ARGS…` detached, its stderr appended to `log`. */
async function start(daemon: string, socket: string, log: string, args: string[]): Promise<{ exited: () => string | undefined }> {
  mkdirSync(join(log, '..'), { recursive: true, mode: 0o700 });
  const fd = openSync(log, 'a', 0o600);
  const env = { ...process.env };
  for (const name of SERVICE_MANAGER_ENV) delete env[name];
  let failure: string | undefined;
  let exit: string | undefined;
  try {
    const child = spawn(daemon, ['--socket', socket, ...args], { cwd: '/', detached: true, stdio: ['ignore', 'ignore', fd], env });
    child.once('error', (error) => (failure = error.message));
    child.once('exit', (code, signal) => (exit = signal ? `was killed by ${signal}` : `exited with ${code}`));
    child.unref();
  } finally {
    closeSync(fd);
  }
  // A binary that cannot be run says so before the next turn of the event loop.
  await new Promise((done) => setImmediate(done));
  if (failure !== undefined) throw new TransportError(`cannot start the daemon ${daemon}: ${failure}`);
  return { exited: () => exit };
}

/**
 * Connects to `socket` (as `connectTrusted`), starting the daemon when nothing answers there
 * and waiting for it; see the module's comment.
 */
export async function connectOrStart(socket: string, options: AutostartOptions = {}): Promise<Socket> {
  try {
    return await connectTrusted(socket);
  } catch (error) {
    if (!nobodyAnswers(error)) throw error;
  }
  const started = Date.now();
  const deadline = started + (options.timeoutMs ?? DEFAULT_AUTOSTART_TIMEOUT_MS);
  const absolute = resolve(socket);
  const daemon = findDaemon(options.daemon);
  const log = options.log ?? defaultLogPath();
  const child = await start(daemon, absolute, log, options.args ?? []);
  let pause = 5;
  for (;;) {
    try {
      return await connectTrusted(socket);
    } catch (error) {
      if (!nobodyAnswers(error)) throw error;
    }
    const now = Date.now();
    if (now >= deadline) {
      const exited = child.exited();
      throw new TransportError(
        `the daemon ${daemon} was started for ${absolute} but did not answer there within ` +
          `${now - started} ms${exited ? ` (it ${exited})` : ''}; its log: ${log}`,
      );
    }
    await new Promise((done) => setTimeout(done, Math.min(pause, deadline - now)));
    pause = Math.min(pause * 2, 100);
  }
}

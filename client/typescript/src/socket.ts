// Where the daemon's socket is by default (as the Rust client finds it), and whom the client
// trusts there: only a daemon of its own user, reached through a folder only that user controls.
//
// The Rust and Python clients check the folder by its path, then prove who serves the socket
// with SO_PEERCRED once connected. Node has no SO_PEERCRED, so this client proves it by what it
// connects through instead, and judges exactly what it connects to:
//
// - It opens the socket's folder (following a symlink, which must then be ours) and judges the
//   open descriptor (fstat): a folder owned by our effective uid that neither group nor others
//   may write (a sticky bit is no excuse: it keeps others from removing our socket, not from
//   taking its name while it is free).
// - It judges the socket's entry through that descriptor (lstat of /proc/self/fd/N/NAME): a
//   socket (not a symlink) owned by our effective uid.
// - It connects to /proc/self/fd/N/NAME: the kernel looks NAME up in that very folder, however
//   its path was renamed or replaced since it was opened (/proc/self/fd/N is checked to be that
//   folder first; that path is also short, so a long socket path is never cut to a prefix the
//   way Node cuts a path beyond a socket address's 108 bytes).
//
// Why that proves the daemon is ours: in a folder only our uid may write, only our uid (or root)
// can create, rename or remove entries; a socket there owned by our uid was bound by our uid (or
// root), and only the binder, or a process it hands the socket to, can listen on it. Between
// the checks and the connection nobody else can change what NAME is. What this cannot see, and
// SO_PEERCRED would: a socket bound by our uid or root and handed, before listen(), to a
// process of another uid — which takes root or our own uid's doing.
import type { Stats } from 'node:fs';
import { constants } from 'node:fs';
import { lstat, open, stat, type FileHandle } from 'node:fs/promises';
import { createConnection, type Socket } from 'node:net';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { TransportError, UntrustedSocketError } from './errors.js';

/** Environment variable that overrides the socket path (the daemon and the CLI read it too). */
export const SOCKET_ENV = 'FILECTX_SOCKET';
/** File name of the socket inside its folder. */
export const SOCKET_FILE_NAME = 'filectx.sock';

/**
 * Most bytes of a path the client connects to: a socket address holds 108 bytes with the final
 * NUL, and Node silently cuts a longer path to its first 108 (so to another socket's name).
 */
export const MAX_SOCKET_ADDRESS_BYTES = 107;

/** Our effective uid: the one the daemon we trust runs as. */
export function ourUid(): number {
  if (typeof process.geteuid !== 'function') {
    throw new Error('filectx needs a POSIX system (process.geteuid)');
  }
  return process.geteuid();
}

/**
 * The default socket path: `$FILECTX_SOCKET` when set and not empty, else
 * `$XDG_RUNTIME_DIR/filectx.sock` when that is absolute, else `/tmp/filectx-$UID/filectx.sock`.
 */
export function defaultSocketPath(
  env: Record<string, string | undefined> = process.env,
  uid: number = ourUid(),
): string {
  const explicit = env[SOCKET_ENV];
  if (explicit) return explicit;
  const runtime = env['XDG_RUNTIME_DIR'];
  if (runtime && isAbsolute(runtime)) return join(runtime, SOCKET_FILE_NAME);
  return join(`/tmp/filectx-${uid}`, SOCKET_FILE_NAME);
}

const HOW = 'choose a socket in a folder of your own (option socket, or FILECTX_SOCKET)';
const ANOTHER = 'choose another socket (option socket, or FILECTX_SOCKET)';
const NO_DAEMON = ' (is filectxd running? start it with `filectxd`, or give the socket of a running one)';

/** Marks a `TransportError` that means nothing answers at the socket (no socket, or nobody listening). */
const NOBODY_ANSWERS = Symbol('nobodyAnswers');

/** A `TransportError` saying nothing answers at `socket`. */
function nobodyThere(message: string, cause?: unknown): TransportError {
  const error = new TransportError(message, cause === undefined ? undefined : { cause });
  Object.defineProperty(error, NOBODY_ANSWERS, { value: true });
  return error;
}

/**
 * Whether `error` (from {@link connectTrusted}) means that nothing answers at the socket: no
 * socket file, or a socket nobody listens on (left by a daemon that died). Only then may a client
 * start a daemon there; never after a refusal.
 */
export function nobodyAnswers(error: unknown): boolean {
  return error instanceof TransportError && (error as unknown as Record<symbol, unknown>)[NOBODY_ANSWERS] === true;
}

/** The socket's folder, opened and judged, and the path that reaches the socket through it. */
interface Reached {
  /** The open folder; closed by whoever asked for it. */
  folder: FileHandle;
  /** `/proc/self/fd/N/NAME`. */
  via: string;
  /** Whether a socket is there (judged ours); when not, nothing listens. */
  present: boolean;
}

/**
 * Opens the folder of `socket` and judges it and the socket's entry through the descriptor (see
 * the module's comment). Returns `undefined` when there is no folder; throws
 * {@link UntrustedSocketError} for a refusal, {@link TransportError} when the folder cannot be
 * opened or the name is too long for a socket address.
 */
async function reach(socket: string, uid: number): Promise<Reached | undefined> {
  const folder = dirname(socket);
  const link = await lstatOrNull(folder).catch((error: unknown) => {
    throw uninspectable(socket, `its folder ${folder}`, error);
  });
  if (link === null) return undefined;
  if (link.isSymbolicLink() && link.uid !== uid) {
    throw new UntrustedSocketError(
      socket,
      `its folder ${folder} is a symbolic link that belongs to uid ${link.uid}, not to you (uid ${uid}), ` +
        `so that user decides where it leads; remove the link, or ${HOW}`,
      'linkNotOurs',
    );
  }
  let handle: FileHandle;
  try {
    // O_DIRECTORY: anything else fails at once (a FIFO is never opened, so never waited on).
    handle = await open(folder, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // A link of ours leading nowhere, or a folder removed since: nothing listens there.
    if (code === 'ENOENT') return undefined;
    if (code === 'ENOTDIR') {
      throw new UntrustedSocketError(socket, `${folder} is not a folder; ${ANOTHER}`, 'notAFolder');
    }
    throw uninspectable(socket, `its folder ${folder}`, error);
  }
  try {
    const meta = await handle.stat();
    judgeFolder(socket, folder, meta, uid);
    const base = `/proc/self/fd/${handle.fd}`;
    const seen = await stat(base).catch(() => null);
    if (seen === null || seen.dev !== meta.dev || seen.ino !== meta.ino) {
      throw new UntrustedSocketError(
        socket,
        `${base} does not lead to its folder (is /proc mounted?), and without it the client cannot ` +
          'connect through the folder it checked, so nothing was sent to it',
        'unreachable',
      );
    }
    const via = `${base}/${basename(socket)}`;
    const bytes = Buffer.byteLength(via);
    if (bytes > MAX_SOCKET_ADDRESS_BYTES) {
      throw new TransportError(
        `cannot connect to filectxd at ${socket}: its file name is too long for a socket address ` +
          `(${base}/ and the name take ${bytes} bytes, at most ${MAX_SOCKET_ADDRESS_BYTES}); give the ` +
          'socket a shorter name',
      );
    }
    const entry = await lstatOrNull(via).catch((error: unknown) => {
      throw uninspectable(socket, 'it', error);
    });
    if (entry !== null) judgeEntry(socket, entry, uid);
    return { folder: handle, via, present: entry !== null };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** The folder rule, on the opened folder's own metadata. */
function judgeFolder(socket: string, folder: string, meta: Stats, uid: number): void {
  if (!meta.isDirectory()) {
    throw new UntrustedSocketError(socket, `${folder} is not a folder; ${ANOTHER}`, 'notAFolder');
  }
  if (meta.uid !== uid) {
    throw new UntrustedSocketError(
      socket,
      `its folder ${folder} belongs to uid ${meta.uid}, not to you (uid ${uid}), so that user could ` +
        `serve a fake daemon there; remove the folder if it should not exist, or ${HOW}`,
      'folderNotOurs',
    );
  }
  const mode = meta.mode & 0o7777;
  if ((mode & 0o022) !== 0) {
    throw new UntrustedSocketError(
      socket,
      `its folder ${folder} has mode ${mode.toString(8)}, so other users can write there and put ` +
        `a fake daemon's socket in its place (a sticky bit does not prevent that); run ` +
        `\`chmod go-w ${folder}\`, or ${HOW}`,
      'folderWritableByOthers',
    );
  }
}

/** The socket's own entry, seen in the opened folder: a socket of ours. */
function judgeEntry(socket: string, entry: Stats, uid: number): void {
  if (entry.isSymbolicLink()) {
    throw new UntrustedSocketError(
      socket,
      `it is a symbolic link, which the client does not follow (it cannot ask the kernel who ` +
        `serves the socket it leads to); give the socket's own path, or ${ANOTHER}`,
      'notASocket',
    );
  }
  if (!entry.isSocket()) {
    throw new UntrustedSocketError(socket, `it is not a socket; ${ANOTHER}`, 'notASocket');
  }
  if (entry.uid !== uid) {
    throw new UntrustedSocketError(
      socket,
      `it belongs to uid ${entry.uid}, not to you (uid ${uid}), so it is not your filectx daemon's ` +
        `and nothing was sent to it; remove it, or ${ANOTHER}`,
      'socketNotOurs',
    );
  }
}

/**
 * Checks `socket` and its folder as {@link connectTrusted} does, without connecting; throws
 * {@link UntrustedSocketError} when another user could control them (or {@link TransportError}
 * when the folder cannot be opened). Nothing there yet is not a refusal. `connect` makes these
 * checks itself, on the folder it connects through: this is for telling a user in advance.
 */
export async function checkSocketTrust(socket: string, uid: number = ourUid()): Promise<void> {
  const reached = await reach(socket, uid);
  await reached?.folder.close();
}

/**
 * Connects to `socket` once it passes every check, through the folder descriptor it judged (see
 * the module's comment), and returns the connected socket, to which nothing has been sent (give
 * it an `error` listener at once). Throws {@link UntrustedSocketError} for a refusal (nothing
 * was sent, nor even connected), and {@link TransportError} when no daemon listens there.
 */
export async function connectTrusted(socket: string, uid: number = ourUid()): Promise<Socket> {
  const reached = await reach(socket, uid);
  if (reached === undefined || !reached.present) {
    await reached?.folder.close();
    throw nobodyThere(`cannot connect to filectxd at ${socket}: connect ENOENT ${socket}${NO_DAEMON}`);
  }
  try {
    return await connectVia(reached.via, socket);
  } finally {
    // Only now: until the connection is made, the descriptor keeps `via` leading to that folder.
    // Not awaited, so that the caller gets the socket before any of its events can fire.
    reached.folder.close().catch(() => undefined);
  }
}

/** Connects to `via`, reporting failures under the path the caller gave, `socket`. */
function connectVia(via: string, socket: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const connection = createConnection(via);
    const onError = (error: NodeJS.ErrnoException) => {
      connection.destroy();
      const message = error.message.split(via).join(socket);
      const text = `cannot connect to filectxd at ${socket}: ${message}`;
      if (error.code === 'ENOENT' || error.code === 'ECONNREFUSED') reject(nobodyThere(`${text}${NO_DAEMON}`, error));
      else reject(new TransportError(text, { cause: error }));
    };
    connection.once('error', onError);
    connection.once('connect', () => {
      connection.off('error', onError);
      resolve(connection);
    });
  });
}

/** The folder or the socket could not be checked (e.g. permission denied on the way to it). */
function uninspectable(socket: string, what: string, error: unknown): TransportError {
  const why = error instanceof Error ? error.message : String(error);
  return new TransportError(
    `cannot connect to filectxd at ${socket}: cannot check ${what} (${why}); the client needs to ` +
      'open the folder and look the socket up in it',
    { cause: error },
  );
}

async function lstatOrNull(path: string): Promise<Stats | null> {
  try {
    return await lstat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

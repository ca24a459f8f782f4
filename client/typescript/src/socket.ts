// Where the daemon's socket is by default (as the Rust client finds it), and whom the client
// trusts there. Node cannot read SO_PEERCRED, so the check is on the filesystem: the socket and
// its folder must belong to this user, and the folder must be a real folder (not a symlink) that
// neither group nor others may write. Another user who could write in that folder could put a
// socket of their own at the path and impersonate the daemon.
import { lstat } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import { UntrustedSocketError } from './errors.js';

/** Environment variable that overrides the socket path (the daemon and the CLI read it too). */
export const SOCKET_ENV = 'FILECTX_SOCKET';
/** File name of the socket inside its folder. */
export const SOCKET_FILE_NAME = 'filectx.sock';

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

/**
 * Checks `socket` and its folder before connecting; throws {@link UntrustedSocketError} when
 * another user could control them. Nothing there yet is not a refusal: connecting then fails
 * with "no daemon".
 */
export async function checkSocketTrust(socket: string, uid: number = ourUid()): Promise<void> {
  const folder = dirname(socket);
  const folderStat = await lstatOrNull(folder);
  if (folderStat === null) return;
  if (folderStat.isSymbolicLink()) {
    throw new UntrustedSocketError(
      socket,
      `its folder ${folder} is a symbolic link, which this client does not follow (it cannot ` +
        `ask the kernel who serves the socket); give the real path, or ${HOW}`,
    );
  }
  if (!folderStat.isDirectory()) {
    throw new UntrustedSocketError(socket, `${folder} is not a folder; ${HOW}`);
  }
  if (folderStat.uid !== uid) {
    throw new UntrustedSocketError(
      socket,
      `its folder ${folder} belongs to uid ${folderStat.uid}, not to you (uid ${uid}), so that ` +
        `user could serve a fake daemon there; ${HOW}`,
    );
  }
  const mode = folderStat.mode & 0o7777;
  if ((mode & 0o022) !== 0) {
    throw new UntrustedSocketError(
      socket,
      `its folder ${folder} has mode ${mode.toString(8)}, so other users can write there and put ` +
        `a fake daemon's socket in its place (a sticky bit does not prevent that); run ` +
        `\`chmod go-w ${folder}\`, or ${HOW}`,
    );
  }
  const socketStat = await lstatOrNull(socket);
  if (socketStat === null) return;
  if (!socketStat.isSocket()) {
    throw new UntrustedSocketError(socket, `it is not a socket; ${HOW}`);
  }
  if (socketStat.uid !== uid) {
    throw new UntrustedSocketError(
      socket,
      `it belongs to uid ${socketStat.uid}, not to you (uid ${uid}), so it is not your filectx ` +
        `daemon and nothing was sent to it; find out who runs it, or ${HOW}`,
    );
  }
}

async function lstatOrNull(path: string) {
  try {
    return await lstat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

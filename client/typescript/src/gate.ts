// The write gate (feature `gate`): a client registers folders, and the daemon asks it, with a
// `gate/writeIntent` request, before a write or edit under them lands. The wire types come from
// the schema like the rest (src/generated/wire.ts).

import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import type { GateOnTimeout, GateOperation, GateRegisterParams, GateRegisterResult, GateUnregisterParams, WriteIntentParams, WriteIntentResult } from './generated/wire.js';

export type { GateOnTimeout, GateOperation, GateRegisterParams, GateRegisterResult, GateUnregisterParams, WriteIntentParams, WriteIntentResult };

/**
 * Decides one write. `signal` aborts when the daemon withdraws the intent (`$/cancelRequest`:
 * it timed out, or the writer went away). Returning `true`/`false` is short for `{allow}`; a
 * handler that throws refuses the write, saying why.
 */
export type GateHandler = (
  intent: WriteIntentParams,
  signal: AbortSignal,
) => WriteIntentResult | boolean | Promise<WriteIntentResult | boolean>;

/** Method names of the gate. */
export const GATE_METHODS = {
  register: 'gate/register',
  unregister: 'gate/unregister',
  writeIntent: 'gate/writeIntent',
} as const;

/** The file next to `socketPath` in which its daemon keeps its gate token: `<socket>.gate-token`. */
export function gateTokenFile(socketPath: string): string {
  return `${socketPath}.gate-token`;
}

/**
 * The gate token of the daemon at `socketPath`, which `gate/register` must carry (`gateToken`)
 * unless the daemon lets any session be a gate; `undefined` when none is kept there (an older
 * daemon, or one that could not write it) or the file is not a small regular file of this user's.
 * Opened without following a symlink and without blocking; at most 256 bytes are read.
 * `session.gate.register` reads it itself when `params.gateToken` is not given.
 */
export async function readGateToken(socketPath: string): Promise<string | undefined> {
  let handle;
  try {
    handle = await open(gateTokenFile(socketPath), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile() || (process.geteuid !== undefined && stat.uid !== process.geteuid())) return undefined;
    const buffer = Buffer.alloc(256);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const token = buffer.subarray(0, bytesRead).toString('utf8').trim();
    return /^[0-9a-fA-F]+$/.test(token) ? token : undefined;
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

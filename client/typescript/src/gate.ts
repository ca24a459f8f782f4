// The write gate's wire types (feature `gate`): a client registers folders, and the daemon asks
// it, with a `gate/writeIntent` request, before a write or edit under them lands. Written by
// hand from the gate's specification until its types reach protocol/schema/filectx.schema.json;
// then they come from src/generated/wire.ts like the rest.

/** The writes a gate can hold. */
export type GateOperation = 'create' | 'update' | 'edit';

/** Params of `gate/register`. */
export interface GateRegisterParams {
  /** Folders (absolute, or relative to the session's cwd) whose writes the gate sees. */
  paths: string[];
  /** The operations it sees; all when absent. */
  operations?: GateOperation[];
  /** A name for logs and for writers' refusals. */
  name?: string;
  /** How long the daemon waits for a decision. */
  timeoutMs?: number;
  /** What a write gets when no decision came in time. */
  onTimeout?: 'deny' | 'allow';
}

/** Result of `gate/register`. */
export interface GateRegisterResult {
  /** The gate's id, named by its intents and by `gate/unregister`. */
  gateId: string;
}

/** Params of `gate/unregister`. */
export interface GateUnregisterParams {
  /** The gate to remove. */
  gateId: string;
}

/** Params of `gate/writeIntent` (daemon → client request): a write waiting for a decision. */
export interface WriteIntent {
  /** The gate asked. */
  gateId: string;
  /** This intent's id. */
  intentId: string;
  /** The writing session. */
  sessionId: string;
  /** The writing client's name, if it gave one. */
  clientName?: string;
  /** The writing owner, if not the session's default one. */
  owner?: string;
  /** The file. */
  path: string;
  /** What the write does. */
  operation: GateOperation;
  /** A unified diff of the change. */
  diff: string;
  /** The version replaced (absent for a create). */
  oldVersion?: string;
  /** The version the write would produce. */
  newVersion: string;
  /** Bytes of the new content. */
  bytes: number;
}

/** Result of `gate/writeIntent`: the decision. A refusal reaches the writer as `FS_PERMISSION_DENIED` with `data.gate`. */
export interface GateDecision {
  /** Whether the write may land. */
  allow: boolean;
  /** Why not (shown to the writer). */
  reason?: string;
}

/**
 * Decides one write. `signal` aborts when the daemon withdraws the intent (`$/cancelRequest`:
 * it timed out, or the writer went away). Returning `true`/`false` is short for `{allow}`; a
 * handler that throws refuses the write, saying why.
 */
export type GateHandler = (
  intent: WriteIntent,
  signal: AbortSignal,
) => GateDecision | boolean | Promise<GateDecision | boolean>;

/** Method names of the gate. */
export const GATE_METHODS = {
  register: 'gate/register',
  unregister: 'gate/unregister',
  writeIntent: 'gate/writeIntent',
} as const;

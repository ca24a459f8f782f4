// The write gate's wire types (feature `gate`): a client registers folders, and the daemon asks
// it, with a `gate/writeIntent` request, before a write or edit under them lands. Written by
// hand, with the names of the protocol crate's gate types, until those reach
// protocol/schema/filectx.schema.json; then they come from src/generated/wire.ts like the rest.

/** The writes a gate can hold. */
export type GateOperation = 'create' | 'update' | 'edit';

/** What an unanswered intent becomes. */
export type GateOnTimeout = 'deny' | 'allow';

/** Params of `gate/register`. */
export interface GateRegisterParams {
  /** Existing folders (or files) inside the session's roots, absolute or relative to its cwd. */
  paths: string[];
  /** The operations it sees; all when absent. */
  operations?: GateOperation[];
  /** A name for people and models (1 to 128 bytes), shown in refusals. */
  name?: string;
  /** How long one intent waits for the answer, in milliseconds (the daemon's default: 50000). */
  timeoutMs?: number;
  /** What an unanswered intent becomes (default `deny`). */
  onTimeout?: GateOnTimeout;
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
export interface WriteIntentParams {
  /** The gate asked. */
  gateId: string;
  /** This intent's id (also the request's id, which a withdrawing `$/cancelRequest` names). */
  intentId: string;
  /** The writing session. */
  sessionId: string;
  /** The writing client's name, if it gave one. */
  clientName?: string;
  /** The writing owner, if not the session's default one. */
  owner?: string;
  /** The file, absolute and canonical. */
  path: string;
  /** What the write does. */
  operation: GateOperation;
  /** A unified diff from the current content to the new one, or `"too large"`, `"not text"`, `"hidden"` when none is shown. */
  diff: string;
  /** The version replaced (absent for a create). */
  oldVersion?: string;
  /** The version the write would produce. */
  newVersion: string;
  /** Bytes of the new content. */
  bytes: number;
}

/** Result of `gate/writeIntent`: the decision. A refusal reaches the writer as `FS_PERMISSION_DENIED` with `data.gate`. */
export interface WriteIntentResult {
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
  intent: WriteIntentParams,
  signal: AbortSignal,
) => WriteIntentResult | boolean | Promise<WriteIntentResult | boolean>;

/** Method names of the gate. */
export const GATE_METHODS = {
  register: 'gate/register',
  unregister: 'gate/unregister',
  writeIntent: 'gate/writeIntent',
} as const;

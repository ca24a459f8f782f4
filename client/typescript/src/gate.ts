// The write gate (feature `gate`): a client registers folders, and the daemon asks it, with a
// `gate/writeIntent` request, before a write or edit under them lands. The wire types come from
// the schema like the rest (src/generated/wire.ts).

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

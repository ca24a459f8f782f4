// The errors the client raises, one class per kind of failure, so callers can tell a refusal of
// the daemon (`FsError`, matched on `code`) from a connection that went away (`TransportError`).
import type { FsErrorCode, FsErrorData } from './generated/wire.js';

/**
 * A filesystem-level refusal: an `FS_*` error of the daemon (`error.data.code` on the wire), or
 * `FS_ABORTED` when an `AbortSignal` cancelled the call. Match on `code`, never on `message`;
 * `data` holds the daemon's details (`diff` and `currentVersion` of a stale refusal, `matches`
 * of an ambiguous edit, `gate` of a gate's refusal, ...).
 */
export class FsError extends Error {
  override readonly name = 'FsError' as const;
  /** The stable identifier. */
  readonly code: FsErrorCode;
  /** `error.data` as the daemon sent it (`{code, path?, ...details}`). */
  readonly data: FsErrorData;
  /** The numeric JSON-RPC code it travelled with, if it came from the daemon. */
  readonly rpcCode: number | undefined;

  constructor(code: FsErrorCode, message: string, data?: FsErrorData, rpcCode?: number) {
    super(message);
    this.code = code;
    this.data = data ?? { code };
    this.rpcCode = rpcCode;
  }
}

/** Whether `error` is an {@link FsError}, with `code` if given. */
export function isFsError(error: unknown, code?: FsErrorCode): error is FsError {
  return error instanceof FsError && (code === undefined || error.code === code);
}

/** Any other JSON-RPC error answer: -32602 (params of the wrong shape, a refused `resume`), -32601, ... */
export class RpcError extends Error {
  override readonly name = 'RpcError' as const;
  /** The JSON-RPC error code. */
  readonly code: number;
  /** `error.data`, if any. */
  readonly data: unknown;

  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

/**
 * The connection failed: no daemon listens on the socket, it went away (mid-call or between
 * calls), or the session was closed. Every call pending at that moment, and every later one,
 * fails with it.
 */
export class TransportError extends Error {
  override readonly name = 'TransportError' as const;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * Why the client refused a socket ({@link UntrustedSocketError.kind}):
 * - `folderNotOurs`: its folder belongs to another user;
 * - `folderWritableByOthers`: group or others may write in its folder (sticky bit or not);
 * - `linkNotOurs`: its folder is reached through a symlink of another user;
 * - `notAFolder`: what should be its folder is something else;
 * - `notASocket`: it is not a socket (a symlink, which the client does not follow, included);
 * - `socketNotOurs`: the socket belongs to another user (so it was bound by one);
 * - `unreachable`: the client cannot connect through the folder it checked (no /proc).
 */
export type UntrustedKind =
  | 'folderNotOurs'
  | 'folderWritableByOthers'
  | 'linkNotOurs'
  | 'notAFolder'
  | 'notASocket'
  | 'socketNotOurs'
  | 'unreachable';

/**
 * The client refuses the socket before sending anything (nor even connecting): it, or its
 * folder, could be controlled by another user (see `checkSocketTrust`). Retrying does not help;
 * the message says what to fix. Match on `kind`, never on `message`.
 */
export class UntrustedSocketError extends Error {
  override readonly name = 'UntrustedSocketError' as const;
  /** The socket path refused. */
  readonly socket: string;
  /** What is wrong with it, and how to fix it (the message after `refusing the socket PATH: `). */
  readonly reason: string;
  /** Which check refused it. */
  readonly kind: UntrustedKind;

  constructor(socket: string, reason: string, kind: UntrustedKind) {
    super(`refusing the socket ${socket}: ${reason}`);
    this.socket = socket;
    this.reason = reason;
    this.kind = kind;
  }
}

/** The daemon does not announce a feature this call relies on (`capabilities.features`). */
export class UnsupportedFeatureError extends Error {
  override readonly name = 'UnsupportedFeatureError' as const;
  /** The feature's name, e.g. `owners`. */
  readonly feature: string;

  constructor(feature: string) {
    super(
      `this filectxd does not support the feature "${feature}" (not in capabilities.features); ` +
        'upgrade and restart the daemon, or do without it',
    );
    this.feature = feature;
  }
}

/**
 * A stream ended in a way the protocol does not allow (chunks out of order or of another
 * version), or its reader fell more than the client's buffer behind (`lagged`).
 */
export class StreamError extends Error {
  override readonly name = 'StreamError' as const;
  /** Whether the reader fell too far behind the chunks (the stream was cancelled). */
  readonly lagged: boolean;

  constructor(message: string, lagged = false) {
    super(message);
    this.lagged = lagged;
  }
}

/** The error of a call cancelled by its `AbortSignal`. */
export function abortedError(reason?: unknown): FsError {
  const why = reason instanceof Error ? `: ${reason.message}` : '';
  return new FsError('FS_ABORTED', `the request was aborted${why}`, { code: 'FS_ABORTED' });
}

// The design's own interfaces, as a drop-in over the daemon: the provider seam (`ctx.fs`) and
// the policy service (`ctx.fileContext`), with the design's documented types reproduced exactly.
// A harness built like the design swaps its in-process filesystem packages for
// `designContext(session)` without touching its tools.
//
// How the daemon serves them:
// - `FsTarget.targetKey` is the canonical absolute path (`fs/resolve`'s `path`); versions are
//   the daemon's content hashes. Both stay opaque: nobody parses them.
// - The provider seam maps to `fs/*`, which records nothing. The daemon serves text as lines
//   (terminators, `\r` and a leading BOM not shown), so `readText` is the file's lines joined
//   with `\n`, without a final newline, and `streamText`'s pieces concatenate to the same text.
//   `stat` of a folder (or of a file over the daemon's hash cap) has no content version: its
//   `version` is the empty string, which no file version equals.
// - The policy service maps to `file/*`, which the daemon authorizes: it keeps the observed
//   versions per (session, owner). The owner is derived from the identity of
//   `exec.agent.session` (the same object, the same owner, held weakly); no session means the
//   connection's default owner.
// - An `AbortSignal` cancels a call (`$/cancelRequest`): reads reject with `FS_ABORTED` at once;
//   writes and edits wait for the daemon's answer, which is `FS_ABORTED` only when the write
//   never started (a write that started lands and is reported).
import type { Session } from './session.js';
import type * as wire from './generated/wire.js';

export type FsTargetKey = string & { readonly __brand: 'FsTargetKey' };
export type FsVersion = string & { readonly __brand: 'FsVersion' };
export interface FsTarget {
  inputPath: string;
  targetKey: FsTargetKey;
  displayPath: string;
}
export interface FsInfo {
  version: FsVersion;
  type: 'file' | 'directory' | 'other';
  size?: number;
}
export type FsWriteExpectation = { kind: 'createIfAbsent' } | { kind: 'replaceIfVersion'; version: FsVersion };
export interface FsWriteOutcome {
  operation: 'create' | 'update';
  version: FsVersion;
}
export interface FsEditRequest {
  oldString: string;
  newString: string;
  replaceAll: boolean;
}
export interface FsEditOutcome {
  replacements: number;
  replaceAll: boolean;
  version: FsVersion;
}

/** The provider seam (`ctx.fs`). */
export interface FsProvider {
  resolve(path: string): Promise<FsTarget>;
  stat(target: FsTarget, signal?: AbortSignal): Promise<FsInfo | undefined>;
  readText(target: FsTarget, signal?: AbortSignal): Promise<string>;
  streamText(target: FsTarget, signal?: AbortSignal): Promise<AsyncIterable<string>>;
  writeText(
    target: FsTarget,
    content: string,
    expected: FsWriteExpectation,
    signal?: AbortSignal,
  ): Promise<FsWriteOutcome>;
  editText(
    target: FsTarget,
    edit: FsEditRequest,
    expected: { version: FsVersion },
    signal?: AbortSignal,
  ): Promise<FsEditOutcome>;
}

export interface FileContextExec {
  agent?: { session?: object };
}
export interface FileReadRequest {
  offset: number;
  limit: number;
}
export interface FileTextLine {
  number: number;
  text: string;
}
export interface FileReadOutcome {
  offset: number;
  limit: number;
  lines: FileTextLine[];
  totalLines: number;
  truncatedByBytes?: true;
  version: FsVersion;
}

/** The design's error codes plus filectx's own (`FS_INVALID_ARGUMENT`, `FS_OUTSIDE_ROOT`, ...). */
export type FsErrorCode = wire.FsErrorCode;
/** The design's own codes, all of which the daemon uses. */
export type DesignFsErrorCode =
  | 'FS_NOT_FOUND'
  | 'FS_NOT_TEXT'
  | 'FS_NOT_REGULAR_FILE'
  | 'FS_STALE_VERSION'
  | 'FS_NOT_OBSERVED'
  | 'FS_AMBIGUOUS_EDIT'
  | 'FS_EDIT_NOT_FOUND'
  | 'FS_ABORTED';
// Fails to compile if the wire ever loses one of the design's codes.
const designCodesAreWireCodes: DesignFsErrorCode extends wire.FsErrorCode ? true : never = true;
void designCodesAreWireCodes;

/** The policy service (`ctx.fileContext`); the owner is derived from `exec.agent.session`. */
export interface FileContext {
  read(target: FsTarget, request: FileReadRequest, exec?: FileContextExec, signal?: AbortSignal): Promise<FileReadOutcome>;
  write(target: FsTarget, content: string, exec?: FileContextExec, signal?: AbortSignal): Promise<FsWriteOutcome>;
  edit(target: FsTarget, edit: FsEditRequest, exec?: FileContextExec, signal?: AbortSignal): Promise<FsEditOutcome>;
}

/** What a design-style tool gets: `ctx.fs` and `ctx.fileContext`. */
export interface DesignContext {
  fs: FsProvider;
  fileContext: FileContext;
}

const version = (v: string | null | undefined): FsVersion => (v ?? '') as FsVersion;
const signalOption = (signal?: AbortSignal) => (signal ? { signal } : {});

/** The text pieces of a stream: they concatenate to the lines joined with `\n`. */
async function* pieces(stream: AsyncIterable<{ lines: string[] }>): AsyncGenerator<string> {
  let first = true;
  for await (const chunk of stream) {
    if (chunk.lines.length === 0) continue;
    yield (first ? '' : '\n') + chunk.lines.join('\n');
    first = false;
  }
}

/** The provider seam over `fs/*` of `session`. */
export function fsProvider(session: Session): FsProvider {
  const provider: FsProvider = {
    async resolve(path) {
      const resolved = await session.fs.resolve(path);
      return { inputPath: path, targetKey: resolved.path as FsTargetKey, displayPath: resolved.displayPath };
    },
    async stat(target, signal) {
      const info = await session.fs.stat(target.targetKey, signalOption(signal));
      if (info === null) return undefined;
      const out: FsInfo = { version: version(info.version), type: info.type };
      if (typeof info.size === 'number') out.size = info.size;
      return out;
    },
    async readText(target, signal) {
      let text = '';
      for await (const piece of await provider.streamText(target, signal)) text += piece;
      return text;
    },
    async streamText(target, signal) {
      // Opened now, so that a missing or non-text file fails here, as the design's does.
      return pieces(await session.fs.streamText({ path: target.targetKey }, signalOption(signal)));
    },
    async writeText(target, content, expected, signal) {
      const result = await session.fs.writeText(
        { path: target.targetKey, content, expect: expected },
        signalOption(signal),
      );
      return { operation: result.operation, version: version(result.version) };
    },
    async editText(target, edit, expected, signal) {
      const result = await session.fs.editText(
        {
          path: target.targetKey,
          oldString: edit.oldString,
          newString: edit.newString,
          replaceAll: edit.replaceAll,
          expectedVersion: expected.version,
        },
        signalOption(signal),
      );
      return { replacements: result.replacements, replaceAll: result.replaceAll, version: version(result.version) };
    },
  };
  return provider;
}

/** Owner names given to agent sessions (held weakly: a finished agent's entry goes with it). */
const agentOwners = new WeakMap<object, string>();
let agentCount = 0;

/**
 * The policy service over `file/*` of `session`. Each distinct `exec.agent.session` object gets
 * its own owner (`agent-1`, `agent-2`, ...), so one agent's reads never
 * authorize another's writes; calls without one use the connection's default owner.
 */
export function fileContext(session: Session): FileContext {
  const ownerOf = (exec?: FileContextExec): { owner?: string } => {
    const agentSession = exec?.agent?.session;
    if (agentSession === undefined) return {};
    let owner = agentOwners.get(agentSession);
    if (owner === undefined) {
      agentCount += 1;
      owner = `agent-${agentCount}`;
      agentOwners.set(agentSession, owner);
    }
    return { owner };
  };
  return {
    async read(target, request, exec, signal) {
      const result = await session.file.read(
        { path: target.targetKey, offset: request.offset, limit: request.limit, ...ownerOf(exec) },
        signalOption(signal),
      );
      const outcome: FileReadOutcome = {
        offset: result.startLine,
        limit: request.limit,
        lines: result.lines.map((text, i) => ({ number: result.startLine + i, text })),
        totalLines: result.totalLines,
        version: version(result.version),
      };
      if (result.truncatedByBytes) outcome.truncatedByBytes = true;
      return outcome;
    },
    async write(target, content, exec, signal) {
      const result = await session.file.write({ path: target.targetKey, content, ...ownerOf(exec) }, signalOption(signal));
      return { operation: result.operation, version: version(result.version) };
    },
    async edit(target, edit, exec, signal) {
      const result = await session.file.edit(
        {
          path: target.targetKey,
          oldString: edit.oldString,
          newString: edit.newString,
          replaceAll: edit.replaceAll,
          ...ownerOf(exec),
        },
        signalOption(signal),
      );
      return { replacements: result.replacements, replaceAll: result.replaceAll, version: version(result.version) };
    },
  };
}

/** `ctx.fs` and `ctx.fileContext` over one session. */
export function designContext(session: Session): DesignContext {
  return { fs: fsProvider(session), fileContext: fileContext(session) };
}

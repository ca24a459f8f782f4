// connect() and Session: one filectx session over one connection, with a typed method for every
// method of the protocol. Features the daemon does not announce in `capabilities.features` are
// refused locally (UnsupportedFeatureError) before anything is sent.
import type { CancellationToken } from 'vscode-jsonrpc/node.js';
import { Channel, type RequestOptions, type ServerRequestHandler } from './channel.js';
import { RpcError, UnsupportedFeatureError } from './errors.js';
import {
  GATE_METHODS,
  readGateToken,
  type WriteIntentResult,
  type GateHandler,
  type GateRegisterParams,
  type GateRegisterResult,
  type WriteIntentParams,
} from './gate.js';
import type {
  CallToolResult,
  ClientInfo,
  DaemonStatus,
  DenyParams,
  DiagnosticsMode,
  EditParams,
  EditResult,
  FileDidChange,
  FileStatResult,
  FsEditParams,
  FsInfo,
  FsWriteParams,
  InitializeParams,
  InitializeResult,
  JournalDiffResult,
  JournalEntry,
  JournalListParams,
  JournalListResult,
  JournalRestoreParams,
  JournalRestoreResult,
  LspDiagnosticsResult,
  ReadParams,
  ReadResult,
  ResolveResult,
  StaleEdits,
  StreamTextParams,
  SubscriptionId,
  ToolName,
  ToolsListResult,
  WriteParams,
  WriteResult,
} from './generated/wire.js';
import { connectOrStart, type AutostartOptions } from './autostart.js';
import { connectTrusted, defaultSocketPath } from './socket.js';
import { TextStream } from './stream.js';

/** Names of the features a daemon announces (`capabilities.features`). */
export const FEATURES = {
  cancelRequest: 'cancelRequest',
  owners: 'owners',
  dedupReads: 'dedupReads',
  contextReset: 'contextReset',
  resume: 'resume',
  staleDiffs: 'staleDiffs',
  keepConventions: 'keepConventions',
  editRegions: 'editRegions',
  readMaxBytes: 'readMaxBytes',
  wholeLines: 'wholeLines',
  search: 'search',
  gate: 'gate',
  staleEdits: 'staleEdits',
  journal: 'journal',
  jsonBudget: 'jsonBudget',
  diagnostics: 'diagnostics',
} as const;

/** What `connect` needs: where the daemon is, and the session's `initialize` options. */
export interface ConnectOptions {
  /** The daemon's socket; default {@link defaultSocketPath} (`FILECTX_SOCKET`, `$XDG_RUNTIME_DIR/filectx.sock`, `/tmp/filectx-$UID/filectx.sock`). */
  socket?: string;
  /** Absolute folders the session may touch; at least one. */
  roots: string[];
  /** Folder relative paths resolve against; default `roots[0]`. */
  cwd?: string;
  /**
   * The model-facing tools (`read`, `write`, `edit`; `glob`, `grep` need feature `search`;
   * `undo` feature `journal`; `diagnostics` feature `diagnostics`, and the daemon keeps it only
   * when `capabilities.diagnostics`).
   */
  tools?: ToolName[];
  /** Refuse every write of this session (every layer). */
  readOnly?: boolean;
  /** Deny rules added to the daemon's. */
  deny?: DenyParams;
  /** Bytes of one `read` tool answer (feature `readMaxBytes`). */
  readMaxBytes?: number;
  /** Ask for a `resumeToken` (feature `resume`). */
  resumable?: boolean;
  /** Take over the observations of an ended resumable session (feature `resume`). */
  resume?: string;
  /** The `read` tool answers one short line for text this owner already has (feature `dedupReads`). */
  dedupReads?: boolean;
  /**
   * What an `edit` tool call whose observation is stale does (feature `staleEdits`): `'merge'`
   * applies it over an outside change that keeps away from what it replaces; default `'refuse'`.
   */
  staleEdits?: StaleEdits;
  /**
   * `readMaxBytes` counts the tools' text as JSON escapes it (feature `jsonBudget`), for a client
   * that keeps a tool result's JSON up to a number of characters.
   */
  jsonBudget?: boolean;
  /**
   * Whether writes, edits and restores wait for their file's language server and report what
   * they introduced in the result's `diagnostics` (feature `diagnostics`): `'wait'` (the
   * daemon's default) or `'off'`.
   */
  diagnostics?: DiagnosticsMode;
  /** Who is connecting (shows in the daemon's logs). */
  clientInfo?: ClientInfo;
  /** Most chunks a stream buffers for a slow reader before it is cancelled (default 256). */
  streamBufferChunks?: number;
  /**
   * Start the daemon when nothing answers at the socket (`true`: with the defaults), and wait
   * for it: the option's `daemon`, else `FILECTX_DAEMON`, else `@filectx/cli`'s filectxd, else
   * `filectxd` on PATH. Default: off (no daemon, `TransportError`).
   */
  autostart?: boolean | AutostartOptions;
}

/** Options of a call. */
export interface CallOptions {
  /** Cancels the call (`$/cancelRequest`; the call fails with `FsError` `FS_ABORTED`). */
  signal?: AbortSignal;
}

/** Options of a call made for one owner (feature `owners`). */
export interface OwnerCallOptions extends CallOptions {
  /** The sub-agent whose observations the call uses and records; absent: the session's default owner. */
  owner?: string;
}

/** Options of {@link Session.journalRestore}. */
export interface JournalRestoreOptions extends OwnerCallOptions {
  /**
   * Restore even when the file changed since the entry; default `false`: then the restore is
   * `FsError` `FS_STALE_VERSION`, whose `data.diff` is the change since the entry.
   */
  force?: boolean;
}

/** A registered gate. */
export interface Gate {
  /** The daemon's id for it. */
  readonly gateId: string;
  /** Removes it (`gate/unregister`); its handler is asked nothing more. */
  unregister(): Promise<void>;
}

/** Something to stop listening with. */
export interface Disposable {
  dispose(): void;
}

const INIT_FEATURES: ReadonlyArray<readonly [keyof ConnectOptions, string]> = [
  ['resumable', FEATURES.resume],
  ['resume', FEATURES.resume],
  ['dedupReads', FEATURES.dedupReads],
  ['readMaxBytes', FEATURES.readMaxBytes],
  ['staleEdits', FEATURES.staleEdits],
  ['jsonBudget', FEATURES.jsonBudget],
  ['diagnostics', FEATURES.diagnostics],
];

/** The tools that need a feature: a daemon of an older build refuses their names in `tools`. */
const TOOL_FEATURES: ReadonlyArray<readonly [ToolName, string]> = [
  ['glob', FEATURES.search],
  ['grep', FEATURES.search],
  ['undo', FEATURES.journal],
  ['diagnostics', FEATURES.diagnostics],
];

const CLIENT_NAME = 'filectx-ts';
const CLIENT_VERSION = '0.1.0';

/**
 * Connects to the daemon (through `connectTrusted`: nothing is sent to a socket it refuses)
 * and opens a session (`initialize`). Throws `UntrustedSocketError` when the socket or its
 * folder could be another user's, `TransportError` when no daemon answers, `FsError` when `initialize` is refused (a root outside the allowed ones:
 * `FS_PERMISSION_DENIED`; a cwd outside the roots: `FS_OUTSIDE_ROOT`), `RpcError` for a
 * refused `resume` (`code` -32602, `data.resume` `"refused"`), and `UnsupportedFeatureError`
 * when an option needs a feature this daemon lacks.
 */
export async function connect(options: ConnectOptions): Promise<Session> {
  const socketPath = options.socket ?? defaultSocketPath();
  const socket = options.autostart
    ? await connectOrStart(socketPath, options.autostart === true ? {} : options.autostart)
    : await connectTrusted(socketPath);
  const gates = new GateRegistry();
  const handlers = new Map<string, ServerRequestHandler>([
    [GATE_METHODS.writeIntent, (params, token) => gates.decide(params as WriteIntentParams, token)],
  ]);
  const channel = new Channel(socket, handlers);
  const params: InitializeParams = {
    clientInfo: options.clientInfo ?? { name: CLIENT_NAME, version: CLIENT_VERSION },
    roots: options.roots,
  };
  if (options.cwd !== undefined) params.cwd = options.cwd;
  if (options.tools !== undefined) params.tools = options.tools;
  if (options.readOnly !== undefined) params.readOnly = options.readOnly;
  if (options.deny !== undefined) params.deny = options.deny;
  if (options.readMaxBytes !== undefined) params.readMaxBytes = options.readMaxBytes;
  if (options.resumable !== undefined) params.resumable = options.resumable;
  if (options.resume !== undefined) params.resume = options.resume;
  if (options.dedupReads !== undefined) params.dedupReads = options.dedupReads;
  if (options.staleEdits !== undefined) params.staleEdits = options.staleEdits;
  if (options.jsonBudget !== undefined) params.jsonBudget = options.jsonBudget;
  if (options.diagnostics !== undefined) params.diagnostics = options.diagnostics;
  let info: InitializeResult;
  try {
    info = await channel.request<InitializeResult>('initialize', params);
  } catch (error) {
    channel.destroy('initialize failed');
    throw refusedFeature(options, error) ?? error;
  }
  return new Session(channel, socketPath, info, gates, options.streamBufferChunks ?? 256);
}

/**
 * A daemon of an older build refuses the `initialize` fields it does not know, and the tool
 * names in `tools`, with -32602.
 */
function refusedFeature(options: ConnectOptions, error: unknown): UnsupportedFeatureError | undefined {
  if (!(error instanceof RpcError) || error.code !== -32602) return undefined;
  for (const [field, feature] of INIT_FEATURES) {
    if (options[field] !== undefined && error.message.includes(`unknown field \`${field}\``)) {
      return new UnsupportedFeatureError(feature);
    }
  }
  for (const [tool, feature] of TOOL_FEATURES) {
    if (options.tools?.includes(tool) && error.message.includes(`unknown variant \`${tool}\``)) {
      return new UnsupportedFeatureError(feature);
    }
  }
  return undefined;
}

/** The gates of one session and their handlers. */
class GateRegistry {
  private readonly handlers = new Map<string, GateHandler>();
  private registering: Promise<unknown> = Promise.resolve();

  add(gateId: string, handler: GateHandler): void {
    this.handlers.set(gateId, handler);
  }

  remove(gateId: string): void {
    this.handlers.delete(gateId);
  }

  /** Registrations still waiting for their answer (an intent may not overtake them). */
  track(registration: Promise<unknown>): void {
    this.registering = Promise.allSettled([this.registering, registration]);
  }

  /** Answers one `gate/writeIntent`. */
  async decide(intent: WriteIntentParams, token: CancellationToken): Promise<WriteIntentResult> {
    let handler = this.handlers.get(intent.gateId);
    if (!handler) {
      await this.registering;
      handler = this.handlers.get(intent.gateId);
    }
    if (!handler) return { allow: false, reason: `this client has no handler for gate ${intent.gateId}` };
    const controller = new AbortController();
    const subscription = token.onCancellationRequested(() => controller.abort(new Error('the daemon withdrew the intent')));
    try {
      const decision = await handler(intent, controller.signal);
      if (typeof decision === 'boolean') return { allow: decision };
      const answer: WriteIntentResult = { allow: decision.allow === true };
      if (typeof decision.reason === 'string') answer.reason = decision.reason;
      return answer;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      return { allow: false, reason: `the gate's handler failed: ${message}` };
    } finally {
      subscription.dispose();
    }
  }
}

/** One filectx session: its own roots, its own record of what it read. */
export class Session {
  /** The `initialize` result: `sessionId`, `instructions`, `capabilities`, `limits`, `resumeToken`. */
  readonly info: InitializeResult;
  /** The features the daemon announced. */
  readonly features: ReadonlySet<string>;
  /** The socket the session is connected to. */
  readonly socketPath: string;

  /** The model-facing tools (MCP shapes). */
  readonly tools: {
    /** `tools/list`: the session's tools with their JSON schemas. */
    list(options?: CallOptions): Promise<ToolsListResult>;
    /** `tools/call`: a tool's failure is a result with `isError: true`, not an exception. */
    call(name: string, args: Record<string, unknown>, options?: OwnerCallOptions): Promise<CallToolResult>;
  };

  /** The session-aware layer: reads record what this session (owner) saw; writes need it current. */
  readonly file: {
    read(params: ReadParams, options?: CallOptions): Promise<ReadResult>;
    write(params: WriteParams, options?: CallOptions): Promise<WriteResult>;
    edit(params: EditParams, options?: CallOptions): Promise<EditResult>;
    stat(path: string, options?: OwnerCallOptions): Promise<FileStatResult>;
  };

  /** The provider layer: records nothing, writes take an explicit expectation. */
  readonly fs: {
    resolve(path: string, options?: CallOptions): Promise<ResolveResult>;
    /** `null` when nothing is at the path. */
    stat(path: string, options?: CallOptions): Promise<FsInfo | null>;
    readText(params: Omit<ReadParams, 'owner' | 'maxLineChars'>, options?: CallOptions): Promise<ReadResult>;
    writeText(params: FsWriteParams, options?: CallOptions): Promise<WriteResult>;
    editText(params: FsEditParams, options?: CallOptions): Promise<EditResult>;
    /** Streams the file in chunks of one version; see {@link TextStream}. */
    streamText(params: StreamTextParams, options?: CallOptions): Promise<TextStream>;
  };

  /** The write gate (feature `gate`). */
  readonly gate: {
    /**
     * Registers a gate on folders: before a write or edit under them lands (any session's), the
     * daemon asks `handler`, whose answer decides. Refusals reach the writer as
     * `FS_PERMISSION_DENIED` with `data.gate`.
     */
    register(params: GateRegisterParams, handler: GateHandler, options?: CallOptions): Promise<Gate>;
  };

  /** @internal Use {@link connect}. */
  constructor(
    private readonly channel: Channel,
    socketPath: string,
    info: InitializeResult,
    gates: GateRegistry,
    streamBufferChunks: number,
  ) {
    this.info = info;
    this.socketPath = socketPath;
    this.features = new Set(info.capabilities.features ?? []);
    const ch = channel;
    const owned = <T extends { owner?: string | null }>(params: T): T => {
      if (params.owner !== undefined && params.owner !== null) this.require(FEATURES.owners);
      return params;
    };
    const opts = (options?: CallOptions, awaitAnswer = false): RequestOptions => ({
      signal: options?.signal,
      awaitAnswer,
    });
    this.tools = {
      list: async (options) => ch.request('tools/list', undefined, opts(options)),
      call: async (name, args, options) => {
        const params: { name: string; arguments: Record<string, unknown>; owner?: string } = { name, arguments: args };
        if (options?.owner !== undefined) params.owner = options.owner;
        // A tool call may write: an aborted one still reports what happened.
        return ch.request('tools/call', owned(params), opts(options, true));
      },
    };
    this.file = {
      read: async (params, options) => {
        if (params.maxLineChars !== undefined && params.maxLineChars !== null) this.require(FEATURES.wholeLines);
        return ch.request('file/read', owned(params), opts(options));
      },
      write: async (params, options) => ch.request('file/write', owned(params), opts(options, true)),
      edit: async (params, options) => ch.request('file/edit', owned(params), opts(options, true)),
      stat: async (path, options) => {
        const params: { path: string; owner?: string } = { path };
        if (options?.owner !== undefined) params.owner = options.owner;
        return ch.request('file/stat', owned(params), opts(options));
      },
    };
    this.fs = {
      resolve: async (path, options) => ch.request('fs/resolve', { path }, opts(options)),
      stat: async (path, options) => ch.request('fs/stat', { path }, opts(options)),
      readText: async (params, options) => ch.request('fs/readText', params, opts(options)),
      writeText: async (params, options) => ch.request('fs/writeText', params, opts(options, true)),
      editText: async (params, options) => ch.request('fs/editText', params, opts(options, true)),
      streamText: async (params, options) => {
        const signal = options?.signal;
        return ch.openStream(
          () =>
            ch.request<SubscriptionId>('fs/streamText', params, {
              signal,
              // Aborted before the answer came: stop the stream the daemon started anyway.
              onLateAnswer: (id) => void ch.request('fs/streamCancel', id, { byPosition: true }).catch(() => false),
            }),
          (id) => new TextStream(ch, id, params.offset ?? 1, streamBufferChunks, signal),
        );
      },
    };
    this.gate = {
      register: async (params, handler, options) => {
        this.require(FEATURES.gate);
        // The daemon's gate token, from the file next to its socket, unless the caller gave one.
        const gateToken = params.gateToken ?? (await readGateToken(this.socketPath));
        const sent = gateToken === undefined ? params : { ...params, gateToken };
        const registration = ch.request<GateRegisterResult>(GATE_METHODS.register, sent, opts(options, true));
        gates.track(registration);
        const { gateId } = await registration;
        gates.add(gateId, handler);
        return {
          gateId,
          unregister: async () => {
            gates.remove(gateId);
            await ch.request(GATE_METHODS.unregister, { gateId });
          },
        };
      },
    };
  }

  /** The session's id in the daemon's logs. */
  get sessionId(): string {
    return this.info.sessionId;
  }

  /** The token to resume this session with once it ended (when connected with `resumable`). */
  get resumeToken(): string | undefined {
    return this.info.resumeToken ?? undefined;
  }

  /** Whether the connection is gone (closed, or the daemon went away). */
  get closed(): boolean {
    return this.channel.isClosed;
  }

  /** Resolves once the connection is gone. */
  whenClosed(): Promise<void> {
    return this.channel.whenClosed();
  }

  /** Whether the daemon announced `feature`. */
  hasFeature(feature: string): boolean {
    return this.features.has(feature);
  }

  /** Throws {@link UnsupportedFeatureError} unless the daemon announced `feature`. */
  require(feature: string): void {
    if (!this.features.has(feature)) throw new UnsupportedFeatureError(feature);
  }

  /** `daemon/status`: the daemon's version, uptime, sessions and counters. */
  status(options?: CallOptions): Promise<DaemonStatus> {
    return this.channel.request('daemon/status', undefined, { signal: options?.signal });
  }

  /**
   * `session/contextReset`: the agent's context was reset (compaction, rewind), so the `read`
   * tool sends everything again: for `owner`, or for every owner when absent.
   */
  async contextReset(owner?: string, options?: CallOptions): Promise<void> {
    this.require(FEATURES.contextReset);
    if (owner !== undefined) this.require(FEATURES.owners);
    await this.channel.request('session/contextReset', owner === undefined ? {} : { owner }, {
      signal: options?.signal,
    });
  }

  /**
   * `journal/list` (feature `journal`): the changes the daemon recorded, newest first, that this
   * session may read: every filter optional (`path`: a file or a folder, inside the roots, else
   * `FS_OUTSIDE_ROOT`; `sessionId`, `owner`, `since` in ms since the epoch), at most `limit` (default
   * 50, at most 1000). When `cursor` is in the result, more match: pass it as `cursor` for the
   * next page, or use {@link journalEntries}.
   */
  async journalList(params: JournalListParams = {}, options?: CallOptions): Promise<JournalListResult> {
    this.require(FEATURES.journal);
    return this.channel.request('journal/list', params, { signal: options?.signal });
  }

  /**
   * Every entry `journal/list` matches, newest first, page after page (`params.limit` entries a
   * request), following each page's `cursor` until the last.
   */
  async *journalEntries(
    params: Omit<JournalListParams, 'cursor'> = {},
    options?: CallOptions,
  ): AsyncGenerator<JournalEntry, void, undefined> {
    let cursor: string | undefined;
    do {
      const page: JournalListResult = await this.journalList(cursor === undefined ? params : { ...params, cursor }, options);
      yield* page.entries;
      cursor = page.cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /**
   * `journal/diff` (feature `journal`): the unified diff of one entry's change, from before
   * (`--- PATH (before)`) to after (`+++ PATH (after)`); `truncated` when cut at 200 lines or
   * 16 KiB. An unknown entry, or one this session may not read, is `FsError` `FS_NOT_FOUND`.
   */
  async journalDiff(entry: string, options?: CallOptions): Promise<JournalDiffResult> {
    this.require(FEATURES.journal);
    return this.channel.request('journal/diff', { entry }, { signal: options?.signal });
  }

  /**
   * `journal/restore` (feature `journal`): puts back the content from before `entry` (restoring a
   * creation deletes the file, a deletion recreates it), itself a new journaled entry (its id is
   * the result's `entry`: restore that to redo). Only when the file is still at the entry's
   * `after` version, else `FsError` `FS_STALE_VERSION` with `data.diff` (the change since the
   * entry; absent when too large), unless `force`. Guarded like a write: `FS_OUTSIDE_ROOT`,
   * `FS_PERMISSION_DENIED` (a deny rule, a `readOnly` session, a gate's refusal: `data.gate`),
   * `FS_NOT_FOUND` (no such entry), `FS_TOO_LARGE` (not `restorable`).
   */
  async journalRestore(entry: string, options?: JournalRestoreOptions): Promise<JournalRestoreResult> {
    this.require(FEATURES.journal);
    const params: JournalRestoreParams = { entry };
    if (options?.force === true) params.force = true;
    if (options?.owner !== undefined) {
      this.require(FEATURES.owners);
      params.owner = options.owner;
    }
    // A restore writes: an aborted one still reports what happened.
    return this.channel.request('journal/restore', params, { signal: options?.signal, awaitAnswer: true });
  }

  /**
   * `lsp/diagnostics` (feature `diagnostics`): the file's diagnostics under its current version
   * from its language server (errors; warnings too when the daemon shows them), waited for up to
   * the daemon's deadline; the file is opened in its server when it was not. `status`: `fresh`
   * (of `version`), `pending` or `starting` (the deadline passed), `failed` (`reason` says why),
   * `none` (no server applies to the file).
   */
  async lspDiagnostics(path: string, options?: CallOptions): Promise<LspDiagnosticsResult> {
    this.require(FEATURES.diagnostics);
    return this.channel.request('lsp/diagnostics', { path }, { signal: options?.signal });
  }

  /**
   * Calls `listener` for each `file/didChange`: a file this session (one of its owners: `owner`)
   * read has changed since, whoever changed it. Once per recorded version.
   */
  onDidChange(listener: (change: FileDidChange) => void): Disposable {
    return { dispose: this.channel.onDidChange(listener) };
  }

  /**
   * Ends the session politely (`shutdown`, `exit`) and closes the connection. Pending calls fail
   * with `TransportError`. Harmless when the connection is already gone.
   */
  async close(): Promise<void> {
    if (this.channel.isClosed) return;
    try {
      await this.channel.request('shutdown');
      await this.channel.notify('exit');
    } catch {
      // The daemon went away meanwhile: nothing left to end politely.
    }
    await this.channel.end(2000);
  }
}

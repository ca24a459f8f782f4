// One connection to filectxd: vscode-jsonrpc's Content-Length framing over a net.Socket, with
// what the protocol needs on top: every pending call fails with a TransportError the moment the
// connection closes (a write that fails too, never as an unhandled rejection), an AbortSignal
// becomes LSP `$/cancelRequest`, error answers become typed errors, and the daemon's
// notifications and requests are routed to their listeners.
import type { Socket } from 'node:net';
import {
  CancellationTokenSource,
  Disposable,
  ParameterStructures,
  ResponseError,
  SocketMessageReader,
  WriteableStreamMessageWriter,
  createMessageConnection,
  type CancellationToken,
  type MessageConnection,
  type RAL,
} from 'vscode-jsonrpc/node.js';
import { FsError, RpcError, TransportError, abortedError } from './errors.js';
import type { FileDidChange, FsErrorCode, SubscriptionId, TextChunkNotification } from './generated/wire.js';

/** LSP: the request was cancelled before it produced a result. */
export const REQUEST_CANCELLED = -32800;

/** How a call reacts to its AbortSignal. */
export interface RequestOptions {
  /** Cancels the call: `$/cancelRequest` goes to the daemon. */
  signal?: AbortSignal | undefined;
  /**
   * Whether an aborted call still waits for the daemon's answer. Calls that change files do:
   * the daemon answers -32800 (`FS_ABORTED`) only for a request that had not started, and a
   * write that started lands, so its real outcome is reported. Other calls reject with
   * `FS_ABORTED` at once.
   */
  awaitAnswer?: boolean;
  /** Send `params` as an array (`[params]`), as `fs/streamCancel` wants. */
  byPosition?: boolean;
  /**
   * Called with the daemon's answer when it arrives after the call was given up for its
   * AbortSignal (so that what it started can be undone: a stream is cancelled).
   */
  onLateAnswer?: (value: unknown) => void;
}

/** Handles one daemon → client request; `token` is cancelled by the daemon's `$/cancelRequest`. */
export type ServerRequestHandler = (params: unknown, token: CancellationToken) => Promise<unknown>;

/** A key for a subscription id (numbers and strings kept apart). */
export function subscriptionKey(id: SubscriptionId): string {
  return `${typeof id}:${String(id)}`;
}

/**
 * vscode-jsonrpc's writer over the socket, except that a write that fails resolves all the same.
 * The library turns a failed write of a request (the daemon closed the connection meanwhile:
 * EPIPE) into a rejection nobody can handle (its `sendRequest` rethrows inside a promise's
 * executor), which ends the whole process. Nothing is lost: the socket's own `error` and `close`
 * fail every pending call with a TransportError.
 */
class SocketWriter extends WriteableStreamMessageWriter {
  constructor(private readonly socket: Socket) {
    super(writableOf(socket));
  }

  override dispose(): void {
    super.dispose();
    this.socket.destroy();
  }
}

/** The socket as {@link SocketWriter} writes to it; see there. */
function writableOf(socket: Socket): RAL.WritableStream {
  const on = (event: 'close' | 'error' | 'end', listener: (error?: unknown) => void) => {
    socket.on(event, listener);
    return Disposable.create(() => socket.off(event, listener));
  };
  return {
    onClose: (listener) => on('close', listener),
    onError: (listener) => on('error', listener),
    onEnd: (listener) => on('end', listener),
    write: (data: Uint8Array | string, encoding?: RAL.MessageBufferEncoding) =>
      new Promise<void>((resolve) => {
        // A failed write destroys the socket (Node does, and this makes sure of it).
        const done = (error?: Error | null) => {
          if (error) socket.destroy();
          resolve();
        };
        if (typeof data === 'string') socket.write(data, encoding ?? 'utf-8', done);
        else socket.write(data, done);
      }),
    end: () => socket.end(),
  };
}

/** Most chunks kept for subscriptions whose `fs/streamText` answer is still on its way. */
const MAX_EARLY_CHUNKS = 256;

export class Channel {
  private readonly connection: MessageConnection;
  private closedWith: TransportError | undefined;
  private readonly closed: Promise<never>;
  private rejectClosed!: (error: TransportError) => void;
  private readonly closeListeners = new Set<(error: TransportError) => void>();
  private readonly didChange = new Set<(change: FileDidChange) => void>();
  private readonly streams = new Map<string, (note: TextChunkNotification) => void>();
  /** Chunks that arrived before their stream was registered, while a stream is being opened. */
  private readonly early: TextChunkNotification[] = [];
  private opening = 0;

  constructor(
    private readonly socket: Socket,
    serverRequests: ReadonlyMap<string, ServerRequestHandler>,
  ) {
    this.closed = new Promise<never>((_, reject) => {
      this.rejectClosed = reject;
    });
    this.closed.catch(() => undefined);
    this.connection = createMessageConnection(
      new SocketMessageReader(socket),
      new SocketWriter(socket),
    );
    socket.on('close', () => this.markClosed(new TransportError('the connection to filectxd closed')));
    socket.on('error', (error) =>
      this.markClosed(new TransportError(`the connection to filectxd failed: ${error.message}`, { cause: error })),
    );
    this.connection.onClose(() => this.markClosed(new TransportError('the connection to filectxd closed')));
    this.connection.onNotification('file/didChange', (params: FileDidChange) => {
      for (const listener of [...this.didChange]) {
        try {
          listener(params);
        } catch {
          // A listener's failure is its own; the others still hear of the change.
        }
      }
    });
    this.connection.onNotification('fs/textChunk', (params: TextChunkNotification) => this.routeChunk(params));
    for (const [method, handler] of serverRequests) {
      this.connection.onRequest(method, (params: unknown, token: CancellationToken) => handler(params, token));
    }
    this.connection.listen();
  }

  /** Whether the connection is gone. */
  get isClosed(): boolean {
    return this.closedWith !== undefined;
  }

  /** Resolves once the connection is gone. */
  whenClosed(): Promise<void> {
    return this.closed.catch(() => undefined);
  }

  /** Calls `listener` once when the connection closes (at once if it already has). */
  onClose(listener: (error: TransportError) => void): () => void {
    if (this.closedWith) {
      listener(this.closedWith);
      return () => undefined;
    }
    this.closeListeners.add(listener);
    return () => this.closeListeners.delete(listener);
  }

  /** Listens to `file/didChange`. */
  onDidChange(listener: (change: FileDidChange) => void): () => void {
    this.didChange.add(listener);
    return () => this.didChange.delete(listener);
  }

  /** Sends a request and waits for its answer; see {@link RequestOptions}. */
  async request<R>(method: string, params?: unknown, options: RequestOptions = {}): Promise<R> {
    if (this.closedWith) throw this.closedWith;
    const { signal } = options;
    if (signal?.aborted) throw abortedError(signal.reason);
    const source = new CancellationTokenSource();
    let sent: Promise<R>;
    try {
      if (options.byPosition) {
        sent = this.connection.sendRequest(method, ParameterStructures.byPosition, params, source.token);
      } else if (params === undefined) {
        sent = this.connection.sendRequest(method, source.token);
      } else {
        sent = this.connection.sendRequest(method, params, source.token);
      }
    } catch (error) {
      source.dispose();
      throw this.translate(error);
    }
    sent.catch(() => undefined);
    const racers: Promise<R>[] = [sent, this.closed];
    let onAbort: (() => void) | undefined;
    if (signal) {
      const { onLateAnswer } = options;
      racers.push(
        new Promise<never>((_, reject) => {
          onAbort = () => {
            source.cancel();
            if (options.awaitAnswer) return;
            reject(abortedError(signal.reason));
            if (onLateAnswer) sent.then(onLateAnswer, () => undefined);
          };
          signal.addEventListener('abort', onAbort, { once: true });
        }),
      );
    }
    try {
      return await Promise.race(racers);
    } catch (error) {
      throw this.translate(error);
    } finally {
      if (onAbort) signal?.removeEventListener('abort', onAbort);
      source.dispose();
    }
  }

  /** Sends a notification. */
  async notify(method: string, params?: unknown): Promise<void> {
    if (this.closedWith) throw this.closedWith;
    try {
      if (params === undefined) await this.connection.sendNotification(method);
      else await this.connection.sendNotification(method, params);
    } catch (error) {
      throw this.translate(error);
    }
  }

  /**
   * Opens a stream: `open` sends `fs/streamText` and returns the subscription id; `attach` then
   * builds the receiver of its chunks, which gets those that arrived before the answer too.
   */
  async openStream<T extends { deliver(note: TextChunkNotification): void }>(
    open: () => Promise<SubscriptionId>,
    attach: (id: SubscriptionId) => T,
  ): Promise<T> {
    this.opening += 1;
    try {
      const id = await open();
      const key = subscriptionKey(id);
      const receiver = attach(id);
      const deliver = (note: TextChunkNotification) => receiver.deliver(note);
      this.streams.set(key, deliver);
      const mine = this.early.filter((note) => subscriptionKey(note.subscription) === key);
      const others = this.early.filter((note) => subscriptionKey(note.subscription) !== key);
      this.early.splice(0, this.early.length, ...others);
      for (const note of mine) deliver(note);
      return receiver;
    } finally {
      this.opening -= 1;
      if (this.opening === 0) this.early.length = 0;
    }
  }

  /** Stops routing a stream's chunks. */
  closeStream(id: SubscriptionId): void {
    this.streams.delete(subscriptionKey(id));
  }

  /** Ends the connection: the socket is closed, every pending call fails with a TransportError. */
  destroy(reason = 'the session was closed'): void {
    this.markClosed(new TransportError(reason));
    this.socket.destroy();
  }

  /** Half-closes the socket and waits (at most `ms`) for the daemon to close its side. */
  async end(ms: number): Promise<void> {
    this.socket.end();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.whenClosed(),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
      }),
    ]);
    clearTimeout(timer);
    this.destroy();
  }

  private routeChunk(note: TextChunkNotification): void {
    const deliver = this.streams.get(subscriptionKey(note.subscription));
    if (deliver) {
      deliver(note);
    } else if (this.opening > 0) {
      this.early.push(note);
      if (this.early.length > MAX_EARLY_CHUNKS) this.early.shift();
    }
    // Otherwise a chunk of a stream already cancelled: dropped.
  }

  private markClosed(error: TransportError): void {
    if (this.closedWith) return;
    this.closedWith = error;
    this.rejectClosed(error);
    for (const listener of [...this.closeListeners]) listener(error);
    this.closeListeners.clear();
    this.didChange.clear();
    this.connection.dispose();
  }

  /** The typed error for whatever a call failed with. */
  private translate(error: unknown): Error {
    if (error instanceof FsError || error instanceof RpcError || error instanceof TransportError) {
      return error;
    }
    if (error instanceof ResponseError) {
      const data = error.data as { code?: unknown } | undefined;
      if (data && typeof data.code === 'string' && data.code.startsWith('FS_')) {
        return new FsError(data.code as FsErrorCode, error.message, data as FsError['data'], error.code);
      }
      if (error.code === REQUEST_CANCELLED) {
        return new FsError('FS_ABORTED', error.message, { code: 'FS_ABORTED' }, error.code);
      }
      if (this.closedWith) return this.closedWith;
      return new RpcError(error.code, error.message, error.data);
    }
    if (this.closedWith) return this.closedWith;
    const message = error instanceof Error ? error.message : String(error);
    return new TransportError(`the connection to filectxd failed: ${message}`, { cause: error });
  }
}

// TextStream: the chunks of one `fs/streamText` subscription as an async iterable, checked for
// order and for coming from one version, every way the stream can end turned into the end of
// the loop or an error thrown from it, and `fs/streamCancel` sent when the loop stops early.
import type { Channel } from './channel.js';
import { FsError, StreamError, abortedError } from './errors.js';
import type { SubscriptionId, TextChunk, TextChunkNotification } from './generated/wire.js';

type Ending = { error?: Error };

/**
 * The chunks of a file, in order, all of one version (`chunk.version`). The loop ends after the
 * chunk whose `done` is true: it then delivered every line from the requested offset to the end.
 * Any other ending is thrown from the loop: `FsError` `FS_STALE_VERSION` when the file changed
 * mid-stream (`FS_TOO_LARGE`, `FS_IO`: the daemon's error item), `FS_ABORTED` when the signal
 * aborted, `TransportError` when the connection went away, `StreamError` when the reader fell
 * more than the buffer behind. Leaving the loop early (`break`, `return`, a throw) cancels the
 * stream on the daemon (`fs/streamCancel`); so does {@link TextStream.cancel}.
 *
 * One consumer: iterate it once.
 */
export class TextStream implements AsyncIterableIterator<TextChunk> {
  private readonly queue: TextChunk[] = [];
  private waiting: { resolve: (r: IteratorResult<TextChunk>) => void; reject: (e: Error) => void } | undefined;
  private ending: Ending | undefined;
  private cancelled: Promise<boolean> | undefined;
  private version: string | undefined;
  /** The daemon ended the stream (its last chunk or an error item): nothing to cancel. */
  private daemonDone = false;
  /** Stops listening to the connection's end (replaced once the listener is registered). */
  private unsubscribeClose: () => void = () => undefined;
  private readonly onAbort: () => void;

  /** @internal Built by `Session.fs.streamText` once the daemon accepted the stream. */
  constructor(
    private readonly channel: Channel,
    /** The subscription id (the answer to `fs/streamText`). */
    readonly subscription: SubscriptionId,
    private nextLine: number,
    private readonly bufferChunks: number,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.unsubscribeClose = channel.onClose((error) => this.end({ error }));
    this.onAbort = () => {
      // Aborted: the chunks not read yet are dropped, the next read throws FS_ABORTED.
      this.queue.length = 0;
      void this.cancel();
      this.end({ error: abortedError(signal?.reason) });
    };
    if (signal?.aborted) this.onAbort();
    else signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  /** Chunks received and not read yet (at most the session's `streamBufferChunks`). */
  get buffered(): number {
    return this.queue.length;
  }

  /** @internal One `fs/textChunk` of this stream. */
  deliver(note: TextChunkNotification): void {
    if (this.ending) return;
    const chunk = note.result;
    if (chunk.error) {
      this.daemonDone = true;
      this.release();
      const { code, message } = chunk.error;
      this.end({ error: new FsError(code, `the stream ended early: ${message}`, { code }) });
      return;
    }
    if (chunk.startLine !== this.nextLine || (this.version !== undefined && chunk.version !== this.version)) {
      void this.cancel();
      this.end({
        error: new StreamError(
          `a chunk of version ${chunk.version} starts at line ${chunk.startLine}; expected line ` +
            `${this.nextLine} of version ${this.version ?? chunk.version}`,
        ),
      });
      return;
    }
    if (this.queue.length >= this.bufferChunks) {
      void this.cancel();
      this.end({
        error: new StreamError(
          `the reader fell more than ${this.bufferChunks} chunks behind; the stream was cancelled`,
          true,
        ),
      });
      return;
    }
    this.version = chunk.version;
    this.nextLine += chunk.lines.length;
    if (chunk.done) {
      this.daemonDone = true;
      this.release();
    }
    if (this.waiting) {
      const { resolve } = this.waiting;
      this.waiting = undefined;
      resolve({ value: chunk, done: false });
    } else {
      this.queue.push(chunk);
    }
    if (chunk.done) this.end({});
  }

  next(): Promise<IteratorResult<TextChunk>> {
    const chunk = this.queue.shift();
    if (chunk) return Promise.resolve({ value: chunk, done: false });
    if (this.ending) {
      const { error } = this.ending;
      if (error) {
        // Thrown once; the loop is over after that.
        this.ending = {};
        return Promise.reject(error);
      }
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
    });
  }

  /** Leaving a `for await` loop early lands here: the stream is cancelled on the daemon. */
  async return(): Promise<IteratorResult<TextChunk>> {
    this.queue.length = 0;
    this.end({});
    this.ending = {};
    await this.cancel();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /**
   * Stops the stream: sends `fs/streamCancel` unless the daemon already ended it. Resolves with
   * the daemon's answer (`true`: a running stream was stopped), `false` when nothing was
   * running. Chunks still on their way are dropped.
   */
  cancel(): Promise<boolean> {
    if (this.cancelled) return this.cancelled;
    if (this.daemonDone) return Promise.resolve(false);
    this.release();
    this.cancelled = this.channel
      .request<boolean>('fs/streamCancel', this.subscription, { byPosition: true })
      .catch(() => false);
    return this.cancelled;
  }

  /** Stops routing this stream's chunks and listening to the connection and the signal. */
  private release(): void {
    this.channel.closeStream(this.subscription);
    this.unsubscribeClose();
    this.signal?.removeEventListener('abort', this.onAbort);
  }

  private end(ending: Ending): void {
    if (this.ending) return;
    this.ending = ending;
    // However it ended, nothing more is routed here, and a long-lived signal keeps no listener.
    this.release();
    if (this.waiting) {
      const { resolve, reject } = this.waiting;
      this.waiting = undefined;
      if (ending.error) {
        this.ending = {};
        reject(ending.error);
      } else {
        resolve({ value: undefined, done: true });
      }
    }
  }
}

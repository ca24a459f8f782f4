// A scripted peer for the tests of what only a daemon's choices can show (a daemon of an older
// build, the gate's requests on demand): vscode-jsonrpc's server side on a Unix socket in a
// private temp folder, answering `initialize` as told and recording every request it gets.
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ResponseError,
  SocketMessageReader,
  SocketMessageWriter,
  createMessageConnection,
  type MessageConnection,
} from 'vscode-jsonrpc/node.js';
import type { wire } from '../src/index.js';

export interface PeerOptions {
  /** Refuse `initialize` with this error (as a daemon of an older build does). */
  refuseInitialize?: { code: number; message: string };
  /** Answers the other requests (`null` when absent); `conn` sends the peer's notifications. */
  answer?: (method: string, params: unknown, conn: MessageConnection) => unknown;
  /** Listen on this path (its folder is the caller's) instead of in a temp folder of its own. */
  socket?: string;
}

/** A peer that answers `initialize` announcing `features`, and records what it is sent. */
export async function scriptedPeer(features: string[], options: PeerOptions = {}) {
  const dir = options.socket === undefined ? await mkdtemp(join(tmpdir(), 'filectx-ts-peer-')) : undefined;
  const socket = options.socket ?? join(dir ?? '', 'peer.sock');
  const received: { method: string; params: unknown }[] = [];
  let connection: MessageConnection | undefined;
  let accepted!: (conn: MessageConnection) => void;
  const connected = new Promise<MessageConnection>((resolve) => {
    accepted = resolve;
  });
  const server: Server = createServer((stream) => {
    const conn = createMessageConnection(new SocketMessageReader(stream), new SocketMessageWriter(stream));
    conn.onRequest((method: string, params: unknown) => {
      received.push({ method, params });
      switch (method) {
        case 'initialize': {
          if (options.refuseInitialize) {
            throw new ResponseError(options.refuseInitialize.code, options.refuseInitialize.message);
          }
          const result: wire.InitializeResult = {
            serverInfo: { name: 'scripted-peer', version: '0' },
            protocolVersion: 2,
            sessionId: 's-peer',
            instructions: '',
            capabilities: { tools: ['read'], readOnly: false, methods: [], batches: true, features },
            limits: {
              readLineLimit: 2000,
              readLineMaxChars: 2000,
              maxFrameBytes: 1 << 20,
              maxBatchLen: 16,
              maxConcurrentRequests: 4,
            },
          };
          return result;
        }
        case 'gate/register':
          return { gateId: 'gate-1' };
        default:
          return options.answer ? options.answer(method, params, conn) : null;
      }
    });
    // The client's `exit`: close this side, as the daemon does.
    conn.onNotification('exit', () => stream.end());
    conn.listen();
    connection = conn;
    accepted(conn);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => resolve());
  });
  return {
    socket,
    received,
    connected,
    /** The methods received, in order. */
    methods: () => received.map((r) => r.method),
    async stop() {
      connection?.dispose();
      server.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    },
  };
}

// The package's entry point: connect() and the session, the design's interfaces over it, the
// errors, the socket rules, autostart and the generated wire types.
export { connect, Session, FEATURES } from './session.js';
export type { ConnectOptions, CallOptions, OwnerCallOptions, JournalRestoreOptions, Gate, Disposable } from './session.js';
export { TextStream } from './stream.js';
export {
  FsError,
  RpcError,
  StreamError,
  TransportError,
  UnsupportedFeatureError,
  UntrustedSocketError,
  isFsError,
} from './errors.js';
export type { UntrustedKind } from './errors.js';
export {
  MAX_SOCKET_ADDRESS_BYTES,
  SOCKET_ENV,
  SOCKET_FILE_NAME,
  checkSocketTrust,
  connectTrusted,
  defaultSocketPath,
} from './socket.js';
export { DAEMON_ENV, DEFAULT_AUTOSTART_TIMEOUT_MS, connectOrStart, defaultLogPath, findDaemon } from './autostart.js';
export type { AutostartOptions } from './autostart.js';
export * from './gate.js';
export * from './design.js';
/** The wire types, generated from protocol/schema/filectx.schema.json. */
export * as wire from './generated/wire.js';

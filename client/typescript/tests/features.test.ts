// Features are checked before they are used: an option a daemon of an older build does not know
// is reported as UnsupportedFeatureError, and a call that needs a feature the daemon did not
// announce fails locally, before anything is sent.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect, RpcError, UnsupportedFeatureError } from '../src/index.js';
import { scriptedPeer } from './peer.js';

test('an initialize option an older daemon refuses (-32602 unknown field) is UnsupportedFeatureError', async () => {
  const peer = await scriptedPeer([], {
    refuseInitialize: {
      code: -32602,
      message: 'Invalid params: unknown field `dedupReads`, expected one of `clientInfo`, `roots`, `cwd`',
    },
  });
  try {
    await assert.rejects(
      connect({ socket: peer.socket, roots: ['/srv'], dedupReads: true }),
      (e: unknown) => e instanceof UnsupportedFeatureError && e.feature === 'dedupReads',
    );
    // Another -32602 stays what it is.
    await assert.rejects(
      connect({ socket: peer.socket, roots: ['/srv'], resumable: true }),
      (e: unknown) => e instanceof RpcError && e.code === -32602,
    );
  } finally {
    await peer.stop();
  }
});

test('owners, contextReset and maxLineChars are refused locally by a daemon that lacks them', async () => {
  const peer = await scriptedPeer(['cancelRequest']);
  try {
    const s = await connect({ socket: peer.socket, roots: ['/srv'] });
    const refused = (feature: string) => (e: unknown) => e instanceof UnsupportedFeatureError && e.feature === feature;
    await assert.rejects(s.file.read({ path: 'a', owner: 'sub' }), refused('owners'));
    await assert.rejects(s.file.write({ path: 'a', content: '', owner: 'sub' }), refused('owners'));
    await assert.rejects(s.file.stat('a', { owner: 'sub' }), refused('owners'));
    await assert.rejects(s.tools.call('read', { file_path: 'a' }, { owner: 'sub' }), refused('owners'));
    await assert.rejects(s.file.read({ path: 'a', maxLineChars: 10 }), refused('wholeLines'));
    await assert.rejects(s.contextReset(), refused('contextReset'));
    assert.deepEqual(peer.methods(), ['initialize']);
    // Without an owner the same calls go out.
    await s.file.read({ path: 'a' });
    assert.deepEqual(peer.methods(), ['initialize', 'file/read']);
    await s.close();
  } finally {
    await peer.stop();
  }
});

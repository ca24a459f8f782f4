// Run by tests/install/run in a folder where npm installed @filectx/client and @filectx/cli:
// `connect({ autostart: true })` must start the filectxd of @filectx/cli's platform package (the
// path given as the argument) and get a read and an edit through it.
//
//   node client-autostart.mjs EXPECTED_FILECTXD
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { connect } from '@filectx/client';

const expected = realpathSync(process.argv[2]);
const dir = mkdtempSync(join(tmpdir(), 'filectx-client-autostart-'));
const root = join(dir, 'project');
mkdirSync(root);
writeFileSync(join(root, 'a.txt'), 'one\ntwo\n');
// The daemon's journal and log go in the temp folder, not the user's.
process.env.XDG_STATE_HOME = join(dir, 'state');
delete process.env.FILECTX_DAEMON;
let pid;
try {
  const session = await connect({ socket: join(dir, 'run', 'filectx.sock'), roots: [root], autostart: true });
  pid = (await session.status()).pid;
  assert.equal(readlinkSync(`/proc/${pid}/exe`), expected);
  const read = await session.file.read({ path: 'a.txt' });
  assert.deepEqual(read.lines, ['one', 'two']);
  await session.file.edit({ path: 'a.txt', oldString: 'two', newString: '2' });
  assert.equal(readFileSync(join(root, 'a.txt'), 'utf8'), 'one\n2\n');
  await session.close();
  console.log(`@filectx/client started ${expected} (pid ${pid}) and read and edited through it`);
} finally {
  if (pid !== undefined) process.kill(pid, 'SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}

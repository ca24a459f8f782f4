// Drives an installed `filectx mcp` with the official MCP SDK client, as an MCP client launches
// it from its configuration: the tools are listed, a read and an edit work, and the daemon it
// started is the `filectxd` installed beside that `filectx`. tests/install/run uses it for each
// way of installing (a venv, uvx, npx, npm); it is not one of this package's tests.
//
//   node drive.mjs [--label TEXT] -- COMMAND [ARG…]
//
// `{root}` in an argument becomes the project folder. The server runs with FILECTX_SOCKET,
// XDG_STATE_HOME and XDG_RUNTIME_DIR in a temp folder, so the daemon it starts is its own; that
// daemon is stopped at the end. Prints one line; exits 1 (saying why) when anything is wrong.
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const argv = process.argv.slice(2);
const split = argv.indexOf('--');
if (split < 0 || split === argv.length - 1) {
  console.error('usage: node drive.mjs [--label TEXT] -- COMMAND [ARG…]');
  process.exit(2);
}
const options = argv.slice(0, split);
const label = options[options.indexOf('--label') + 1] ?? argv[split + 1];
const [command, ...rest] = argv.slice(split + 1);

/** Asks the daemon at `socket` for its pid (initialize, then daemon/status). */
function daemonPid(socket, root) {
  return new Promise((resolve, reject) => {
    const connection = createConnection(socket);
    const frame = (message) => {
      const body = JSON.stringify({ jsonrpc: '2.0', ...message });
      connection.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    };
    let buffer = Buffer.alloc(0);
    connection.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/Content-Length: (\d+)/i.exec(buffer.subarray(0, end).toString())?.[1]);
        if (buffer.length < end + 4 + length) return;
        const message = JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString());
        buffer = buffer.subarray(end + 4 + length);
        if (message.id === 1) frame({ id: 2, method: 'daemon/status' });
        if (message.id === 2) {
          connection.end();
          if (message.error) reject(new Error(`daemon/status: ${JSON.stringify(message.error)}`));
          else resolve(message.result.pid);
        }
      }
    });
    connection.once('error', reject);
    connection.once('connect', () => frame({ id: 1, method: 'initialize', params: { roots: [root] } }));
  });
}

/** Whether `pid` runs (a zombie, waiting for whoever adopted it to reap it, does not). */
function running(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

const text = (result) => result.content.filter((block) => block.type === 'text').map((block) => block.text).join('');

const dir = await mkdtemp(join(tmpdir(), 'filectx-drive-'));
const root = join(dir, 'project');
const runtime = join(dir, 'run');
await mkdir(root);
await mkdir(runtime, { mode: 0o700 });
await writeFile(join(root, 'notes.txt'), 'one\ntwo\nthree\n');
const socket = join(runtime, 'filectx.sock');
let stderr = '';
let pid;
let failure;
const client = new Client({ name: 'filectx-install-check', version: '1.0.0' });
try {
  const transport = new StdioClientTransport({
    command,
    args: rest.map((arg) => arg.replaceAll('{root}', root)),
    cwd: root,
    env: { ...process.env, FILECTX_SOCKET: socket, XDG_STATE_HOME: join(dir, 'state'), XDG_RUNTIME_DIR: runtime },
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk) => (stderr += chunk));
  await client.connect(transport);
  const { tools } = await client.listTools();
  const names = tools.map((tool) => tool.name);
  for (const tool of ['read', 'write', 'edit', 'glob', 'grep']) {
    if (!names.includes(tool)) throw new Error(`tools/list lacks ${tool}: ${names.join(', ')}`);
  }
  const read = await client.callTool({ name: 'read', arguments: { file_path: 'notes.txt' } });
  if (read.isError || !/^\s*2\ttwo$/m.test(text(read))) throw new Error(`read: ${text(read)}`);
  const edit = await client.callTool({ name: 'edit', arguments: { file_path: 'notes.txt', old_string: 'two', new_string: '2' } });
  if (edit.isError) throw new Error(`edit: ${text(edit)}`);
  const after = await readFile(join(root, 'notes.txt'), 'utf8');
  if (after !== 'one\n2\nthree\n') throw new Error(`the edit left ${JSON.stringify(after)}`);
  pid = await daemonPid(socket, root);
  const daemon = readlinkSync(`/proc/${pid}/exe`);
  if (basename(daemon) !== 'filectxd' || !existsSync(join(dirname(daemon), 'filectx'))) {
    throw new Error(`the daemon it started, ${daemon}, is not a filectxd beside a filectx`);
  }
  console.log(`${label}: tools ${names.join(', ')}; read and edit done; daemon ${daemon}`);
} catch (error) {
  failure = error;
} finally {
  await client.close().catch(() => undefined);
  if (pid !== undefined) {
    try {
      process.kill(pid, 'SIGTERM');
      // Gone before its folder is: it writes its journal until it exits.
      for (let i = 0; i < 200 && running(pid); i += 1) await new Promise((r) => setTimeout(r, 50));
    } catch {
      // Gone already.
    }
  }
  const log = join(dir, 'state/filectx/filectxd.log');
  if (failure !== undefined) {
    console.error(`${label}: ${failure.stack ?? failure}\nserver stderr:\n${stderr.slice(-3000)}`);
    if (existsSync(log)) console.error(`daemon log:\n${readFileSync(log, 'utf8').slice(-3000)}`);
  }
  await rm(dir, { recursive: true, force: true, maxRetries: 5 });
}
process.exit(failure === undefined ? 0 : 1);

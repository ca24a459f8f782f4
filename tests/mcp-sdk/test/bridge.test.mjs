// `filectx mcp` driven by the official MCP TypeScript SDK client (@modelcontextprotocol/sdk), as
// a harness drives it: the model gets text (no structuredContent, no outputSchema unless
// --structured), errors say so in their first words, a harness's own arguments are ignored, a
// client named like Codex gets answers under what it keeps, and a repeated read answers short.
//
// Uses the filectx and filectxd the Rust tests built (env FILECTX and FILECTXD, else
// ../../target/debug/), and starts its own daemon on its own socket in a temp folder.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const repo = fileURLToPath(new URL('../../../', import.meta.url));

function binary(env, name) {
  const path = process.env[env] ?? resolve(repo, 'target/debug', name);
  if (!existsSync(path)) {
    throw new Error(`${name} not found at ${path}: build it (cargo build --workspace) or set ${env}`);
  }
  return path;
}

/** A daemon on its own socket, with a project folder. */
let daemon;

async function waitReady(socket, child, log) {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`filectxd exited with ${child.exitCode}:\n${log()}`);
    const ok = await new Promise((done) => {
      const probe = createConnection(socket);
      probe.once('error', () => done(false));
      probe.once('connect', () => {
        probe.end();
        probe.resume();
        probe.once('close', () => done(true));
      });
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`filectxd did not start:\n${log()}`);
}

before(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'filectx-mcp-sdk-'));
  const root = join(dir, 'root');
  await mkdir(root);
  const socket = join(dir, 'run', 'filectx.sock');
  const logPath = join(dir, 'daemon.log');
  const logFd = openSync(logPath, 'a');
  const child = spawn(binary('FILECTXD', 'filectxd'), ['--socket', socket, '--log-level', 'info', '--no-fsync'], {
    stdio: ['ignore', 'ignore', logFd],
    env: { ...process.env, RUST_LOG: '' },
  });
  closeSync(logFd);
  const log = () => {
    try {
      return readFileSync(logPath, 'utf8');
    } catch {
      return '';
    }
  };
  const exited = new Promise((r) => child.once('exit', r));
  await waitReady(socket, child, log);
  daemon = { dir, root, socket, child, exited, log };
});

after(async () => {
  if (!daemon) return;
  daemon.child.kill('SIGTERM');
  await daemon.exited;
  await rm(daemon.dir, { recursive: true, force: true });
});

/**
 * Starts `filectx mcp` in its own project folder under the daemon's temp folder and connects
 * the SDK client, named `name`; `seen` collects every message the server sent, as it sent it.
 */
async function connect(t, { name = 'mcp-sdk-test', flags = [], files = {} } = {}) {
  const root = await mkdtemp(join(daemon.root, 'p-'));
  for (const [path, content] of Object.entries(files)) await writeFile(join(root, path), content);
  const transport = new StdioClientTransport({
    command: binary('FILECTX', 'filectx'),
    args: ['--socket', daemon.socket, '--no-autostart', 'mcp', '--root', root, ...flags],
    cwd: root,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => (stderr += chunk));
  const client = new Client({ name, version: '0.169.0' });
  const seen = [];
  await client.connect(transport);
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    seen.push(message);
    deliver?.(message, extra);
  };
  t.after(() => client.close());
  return { client, root, seen, stderr: () => stderr };
}

/** The text of a tool result. */
function text(result) {
  return result.content.filter((block) => block.type === 'text').map((block) => block.text).join('');
}

/** Asserts that no result the server sent carries structuredContent. */
function assertNoStructured(seen) {
  const results = seen.filter((message) => message.result !== undefined);
  assert.ok(results.length > 0);
  for (const message of results) {
    assert.equal(message.result.structuredContent, undefined, JSON.stringify(message));
    for (const tool of message.result.tools ?? []) {
      assert.equal(tool.outputSchema, undefined, JSON.stringify(tool));
    }
  }
}

test('tools/list declares no outputSchema and schemas that let a harness add arguments', async (t) => {
  const { client } = await connect(t);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((tool) => tool.name), ['read', 'write', 'edit', 'glob', 'grep', 'diagnostics']);
  for (const tool of tools) {
    assert.equal(tool.outputSchema, undefined, tool.name);
    assert.equal(tool.inputSchema.type, 'object', tool.name);
    assert.equal(tool.inputSchema.additionalProperties, undefined, tool.name);
  }
});

test('results are text, and an error says it is one in its first words', async (t) => {
  const { client, root, seen } = await connect(t, { files: { 'a.py': 'print("hi")\nx = "a\\tb"\n' } });
  await client.listTools();
  // An edit of a file never read is refused: flagged, marked, its code kept from the model.
  const unread = await client.callTool({
    name: 'edit',
    arguments: { file_path: 'a.py', old_string: 'hi', new_string: 'hello' },
  });
  assert.equal(unread.isError, true);
  assert.match(text(unread), /^Error \(FS_NOT_OBSERVED\): /);
  assert.equal(unread._meta?.filectx?.code, 'FS_NOT_OBSERVED');
  assert.equal(await readFile(join(root, 'a.py'), 'utf8'), 'print("hi")\nx = "a\\tb"\n');

  const read = await client.callTool({ name: 'read', arguments: { file_path: 'a.py' } });
  assert.equal(read.isError, false);
  // Plain text: the line as it is after the number's tab, quotes and backslashes unescaped.
  const lines = text(read).split('\n');
  assert.equal(lines[0].slice(lines[0].indexOf('\t') + 1), 'print("hi")');
  assert.equal(lines[1].slice(lines[1].indexOf('\t') + 1), 'x = "a\\tb"');
  const edit = await client.callTool({
    name: 'edit',
    arguments: { file_path: 'a.py', old_string: 'x = "a\\tb"', new_string: 'x = 1' },
  });
  assert.equal(edit.isError, false, text(edit));
  assert.equal(await readFile(join(root, 'a.py'), 'utf8'), 'print("hi")\nx = 1\n');

  const missing = await client.callTool({ name: 'read', arguments: { file_path: 'missing.txt' } });
  assert.equal(missing.isError, true);
  assert.match(text(missing), /^Error \(FS_NOT_FOUND\): /);
  assertNoStructured(seen);
});

test('--structured brings back outputSchema and structuredContent', async (t) => {
  const { client, seen } = await connect(t, { flags: ['--structured'], files: { 'a.txt': 'one\n' } });
  const { tools } = await client.listTools();
  for (const tool of tools) assert.equal(tool.outputSchema?.type, 'object', tool.name);
  // The SDK checks each result's structuredContent against the tool's outputSchema.
  const read = await client.callTool({ name: 'read', arguments: { file_path: 'a.txt' } });
  assert.equal(read.structuredContent.text, text(read));
  const missing = await client.callTool({ name: 'read', arguments: { file_path: 'missing.txt' } });
  assert.equal(missing.isError, true);
  assert.equal(missing.structuredContent.error.code, 'FS_NOT_FOUND');
  assert.match(text(missing), /^Error \(FS_NOT_FOUND\): /);
  assert.ok(seen.some((message) => message.result?.structuredContent !== undefined));
});

test('an argument no schema names is ignored', async (t) => {
  const { client, root, stderr } = await connect(t, { name: 'gemini-cli-mcp-client', files: { 'a.txt': 'one\ntwo\n' } });
  // Gemini CLI adds wait_for_previous to every call, before or without any tools/list.
  const read = await client.callTool({ name: 'read', arguments: { file_path: 'a.txt', wait_for_previous: true } });
  assert.equal(read.isError, false, text(read));
  const edit = await client.callTool({
    name: 'edit',
    arguments: { file_path: 'a.txt', old_string: 'two', new_string: '2', wait_for_previous: false },
  });
  assert.equal(edit.isError, false, text(edit));
  assert.equal(await readFile(join(root, 'a.txt'), 'utf8'), 'one\n2\n');
  // A named argument of the wrong type is still refused, with its marker.
  const wrong = await client.callTool({ name: 'read', arguments: { file_path: 'a.txt', offset: 'two' } });
  assert.equal(wrong.isError, true);
  assert.match(text(wrong), /^Error \(FS_INVALID_ARGUMENT\): /);
  assert.match(stderr(), /wait_for_previous/);
});

test('a client named like Codex gets answers under its budget, ending with the footer', async (t) => {
  const big = Array.from({ length: 1200 }, (_, i) => `    let value_${i + 1} = compute("${i + 1}", '\\n');\n`).join('');
  const { client } = await connect(t, { name: 'codex-mcp-client', files: { 'big.rs': big } });
  // Codex keeps about 10,000 characters of a result's content as JSON text.
  const keeps = 10_000;
  let offset = 1;
  let shownUpTo = 0;
  for (let round = 0; round < 3; round++) {
    const read = await client.callTool({ name: 'read', arguments: { file_path: 'big.rs', offset } });
    assert.equal(read.isError, false);
    assert.ok(JSON.stringify(read.content).length <= keeps, `${JSON.stringify(read.content).length} characters`);
    const shown = text(read);
    const footer = shown.match(/offset=(\d+) to continue/);
    assert.ok(footer, shown.slice(-300));
    const next = Number(footer[1]);
    // The footer continues right after the last whole line shown, which is not cut.
    const numbered = shown.split('\n').filter((line) => /^\s*\d+\t/.test(line));
    const last = numbered[numbered.length - 1];
    assert.equal(Number(last.slice(0, last.indexOf('\t'))), next - 1);
    assert.equal(last.slice(last.indexOf('\t') + 1), `    let value_${next - 1} = compute("${next - 1}", '\\n');`);
    assert.ok(next - offset > 50, `only ${next - offset} lines`);
    assert.ok(next > shownUpTo);
    shownUpTo = next - 1;
    offset = next;
  }
  const grep = await client.callTool({ name: 'grep', arguments: { pattern: 'compute', output_mode: 'content' } });
  assert.equal(grep.isError, false);
  assert.ok(JSON.stringify(grep.content).length <= keeps);

  // --max-output overrides it, and another client keeps the daemon's budget.
  const other = await connect(t, { files: { 'big.rs': big } });
  const whole = text(await other.client.callTool({ name: 'read', arguments: { file_path: 'big.rs' } }));
  assert.ok(whole.length > 40_000, `${whole.length}`);
  const sized = await connect(t, { flags: ['--max-output', '5000'], files: { 'big.rs': big } });
  const cut = text(await sized.client.callTool({ name: 'read', arguments: { file_path: 'big.rs' } }));
  assert.ok(cut.length <= 5000 && /offset=\d+ to continue/.test(cut), `${cut.length}`);
});

test('a repeated read of unchanged lines answers short by default; --no-dedup-reads sends it again', async (t) => {
  const content = Array.from({ length: 50 }, (_, i) => `line ${i + 1} with enough text to matter\n`).join('');
  const window = { file_path: 'w.txt', offset: 10, limit: 30 };
  const { client } = await connect(t, { files: { 'w.txt': content } });
  const first = text(await client.callTool({ name: 'read', arguments: window }));
  assert.ok(first.includes('line 10 with'));
  const again = text(await client.callTool({ name: 'read', arguments: window }));
  assert.ok(again.length < 200 && !again.includes('line 10 with'), again);
  assert.ok(again.includes('w.txt'), again);

  const plain = await connect(t, { flags: ['--no-dedup-reads'], files: { 'w.txt': content } });
  const once = text(await plain.client.callTool({ name: 'read', arguments: window }));
  assert.equal(text(await plain.client.callTool({ name: 'read', arguments: window })), once);
});

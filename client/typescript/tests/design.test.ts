// The design's interfaces over the daemon: tools written the way the design's tools are (they
// get `ctx.fs` and `ctx.fileContext`, resolve, then go through the policy service) run
// unchanged on `designContext(session)`.
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  connect,
  designContext,
  FsError,
  type DesignContext,
  type FileContextExec,
  type FsVersion,
  type Session,
} from '../src/index.js';
import { startDaemon, type Daemon } from './daemon.js';

// ---- Two tools as the design writes them: they know only the interfaces. ----

interface ReadArgs {
  file_path: string;
  offset?: number;
  limit?: number;
}

async function readTool(ctx: DesignContext, args: ReadArgs, exec: FileContextExec, signal?: AbortSignal): Promise<string> {
  const target = await ctx.fs.resolve(args.file_path);
  const outcome = await ctx.fileContext.read(target, { offset: args.offset ?? 1, limit: args.limit ?? 2000 }, exec, signal);
  const body = outcome.lines.map((line) => `${line.number}: ${line.text}`).join('\n');
  return `<path>${target.displayPath}</path>\n${body}\n(${outcome.totalLines} lines)`;
}

interface EditArgs {
  file_path: string;
  old_string: string;
  new_string: string;
  replace_all?: boolean;
}

async function editTool(ctx: DesignContext, args: EditArgs, exec: FileContextExec, signal?: AbortSignal): Promise<string> {
  const target = await ctx.fs.resolve(args.file_path);
  try {
    const outcome = await ctx.fileContext.edit(
      target,
      { oldString: args.old_string, newString: args.new_string, replaceAll: args.replace_all ?? false },
      exec,
      signal,
    );
    return `Edited ${target.displayPath}: ${outcome.replacements} replacement(s).`;
  } catch (error) {
    // The design's tools turn FsError into an error result the model reads.
    if (error instanceof Error && error.name === 'FsError') return `Error ${(error as FsError).code}: ${error.message}`;
    throw error;
  }
}

// ----

let daemon: Daemon;
let session: Session;
let ctx: DesignContext;
before(async () => {
  daemon = await startDaemon();
  session = await connect({ socket: daemon.socket, roots: [daemon.root] });
  ctx = designContext(session);
});
after(async () => {
  await session.close();
  await daemon.stop();
});

test('a design-style tool: resolve, then fileContext.read and edit, per agent session', async () => {
  await writeFile(join(daemon.root, 'app.py'), 'def greet(name):\n    return "hello " + name\n');
  const planner = { agent: { session: { id: 'planner' } } };
  const coder = { agent: { session: { id: 'coder' } } };
  assert.equal(
    await readTool(ctx, { file_path: 'app.py' }, coder),
    '<path>app.py</path>\n1: def greet(name):\n2:     return "hello " + name\n(2 lines)',
  );
  // The planner has not read it: its edit is refused with the design's code.
  assert.match(
    await editTool(ctx, { file_path: 'app.py', old_string: '"hello "', new_string: '"hi "' }, planner),
    /^Error FS_NOT_OBSERVED: /,
  );
  // So is a call without an agent session (the connection's default owner).
  assert.match(await editTool(ctx, { file_path: 'app.py', old_string: '"hello "', new_string: '"hi "' }, {}), /^Error FS_NOT_OBSERVED/);
  // The same session object is the same owner: the coder's read authorizes its edits.
  assert.equal(
    await editTool(ctx, { file_path: 'app.py', old_string: '"hello "', new_string: '"hi "' }, coder),
    'Edited app.py: 1 replacement(s).',
  );
  assert.equal(
    await editTool(ctx, { file_path: 'app.py', old_string: 'greet', new_string: 'welcome' }, coder),
    'Edited app.py: 1 replacement(s).',
  );
  assert.equal(await readFile(join(daemon.root, 'app.py'), 'utf8'), 'def welcome(name):\n    return "hi " + name\n');
  // An equal but different object is another agent.
  const lookalike = { agent: { session: { id: 'coder' } } };
  assert.match(await editTool(ctx, { file_path: 'app.py', old_string: 'hi', new_string: 'yo' }, lookalike), /^Error FS_NOT_OBSERVED/);
});

test('fileContext: the read outcome, writes that need a current read, edit errors', async () => {
  const agent = { agent: { session: {} } };
  const target = await ctx.fs.resolve('ctx.txt');
  const created = await ctx.fileContext.write(target, 'x\ny\nx\n', agent);
  assert.equal(created.operation, 'create');
  const read = await ctx.fileContext.read(target, { offset: 2, limit: 1 }, agent);
  assert.deepEqual(read, { offset: 2, limit: 1, lines: [{ number: 2, text: 'y' }], totalLines: 3, version: created.version });
  assert.equal('truncatedByBytes' in read, false);
  await assert.rejects(
    ctx.fileContext.edit(target, { oldString: 'x', newString: 'z', replaceAll: false }, agent),
    (e: unknown) => e instanceof FsError && e.name === 'FsError' && e.code === 'FS_AMBIGUOUS_EDIT' && e.data['matches'] === 2,
  );
  await assert.rejects(
    ctx.fileContext.edit(target, { oldString: 'nothing', newString: 'z', replaceAll: false }, agent),
    (e: unknown) => e instanceof FsError && e.code === 'FS_EDIT_NOT_FOUND',
  );
  const edited = await ctx.fileContext.edit(target, { oldString: 'x', newString: 'z', replaceAll: true }, agent);
  assert.deepEqual({ replacements: edited.replacements, replaceAll: edited.replaceAll }, { replacements: 2, replaceAll: true });
  const updated = await ctx.fileContext.write(target, 'new\n', agent);
  assert.equal(updated.operation, 'update');
  await writeFile(join(daemon.root, 'ctx.txt'), 'outside\n');
  await assert.rejects(ctx.fileContext.write(target, 'mine\n', agent), (e: unknown) => e instanceof FsError && e.code === 'FS_STALE_VERSION');

  await mkdir(join(daemon.root, 'folder'), { recursive: true });
  await writeFile(join(daemon.root, 'binary.bin'), Buffer.from([0, 1, 2, 3]));
  const expectCode = async (path: string, code: string) =>
    assert.rejects(
      ctx.fileContext.read(await ctx.fs.resolve(path), { offset: 1, limit: 10 }, agent),
      (e: unknown) => e instanceof FsError && e.code === code,
    );
  await expectCode('missing.txt', 'FS_NOT_FOUND');
  await expectCode('folder', 'FS_NOT_REGULAR_FILE');
  await expectCode('binary.bin', 'FS_NOT_TEXT');
  await assert.rejects(
    ctx.fileContext.read(target, { offset: 1, limit: 1 }, agent, AbortSignal.abort()),
    (e: unknown) => e instanceof FsError && e.code === 'FS_ABORTED',
  );
});

test('the provider seam: resolve, stat, readText, streamText, writeText, editText', async () => {
  const target = await ctx.fs.resolve('sub/../seam.txt');
  assert.equal(target.inputPath, 'sub/../seam.txt');
  assert.equal(target.targetKey, join(daemon.root, 'seam.txt'));
  assert.equal(target.displayPath, 'seam.txt');
  assert.equal(await ctx.fs.stat(target), undefined);

  const created = await ctx.fs.writeText(target, 'a\nb\n', { kind: 'createIfAbsent' });
  assert.equal(created.operation, 'create');
  assert.deepEqual(await ctx.fs.stat(target), { version: created.version, type: 'file', size: 4 });
  assert.equal(await ctx.fs.readText(target), 'a\nb');
  await assert.rejects(
    ctx.fs.writeText(target, 'again', { kind: 'createIfAbsent' }),
    (e: unknown) => e instanceof FsError && e.code === 'FS_NOT_OBSERVED',
  );
  await assert.rejects(
    ctx.fs.writeText(target, 'again', { kind: 'replaceIfVersion', version: 'not-a-version' as FsVersion }),
    (e: unknown) => e instanceof FsError && e.code === 'FS_STALE_VERSION',
  );
  const edited = await ctx.fs.editText(target, { oldString: 'b', newString: 'B', replaceAll: false }, { version: created.version });
  assert.equal(edited.replacements, 1);
  await assert.rejects(
    ctx.fs.editText(target, { oldString: 'a', newString: 'A', replaceAll: false }, { version: created.version }),
    (e: unknown) => e instanceof FsError && e.code === 'FS_STALE_VERSION',
  );
  const replaced = await ctx.fs.writeText(target, 'c\n', { kind: 'replaceIfVersion', version: edited.version });
  assert.equal(replaced.operation, 'update');
  assert.equal(await readFile(join(daemon.root, 'seam.txt'), 'utf8'), 'c\n');

  // A folder has no content version.
  await mkdir(join(daemon.root, 'dir'), { recursive: true });
  assert.deepEqual(await ctx.fs.stat(await ctx.fs.resolve('dir')), { version: '', type: 'directory' });

  // Streamed pieces concatenate to the same text as readText, over several chunks.
  const lines = Array.from({ length: 2345 }, (_, i) => `row ${i}`);
  await writeFile(join(daemon.root, 'many.txt'), lines.join('\n') + '\n');
  const many = await ctx.fs.resolve('many.txt');
  const pieces: string[] = [];
  for await (const piece of await ctx.fs.streamText(many)) pieces.push(piece);
  assert.ok(pieces.length > 1, `${pieces.length} pieces`);
  assert.equal(pieces.join(''), lines.join('\n'));
  assert.equal(await ctx.fs.readText(many), lines.join('\n'));
  await assert.rejects(ctx.fs.streamText(await ctx.fs.resolve('none.txt')), (e: unknown) => e instanceof FsError && e.code === 'FS_NOT_FOUND');
});

import { connect, designContext, isFsError } from '@filectx/client';

// One session per agent: its own roots, its own record of what it has read.
const root = process.argv[2] ?? process.cwd();
const session = await connect({ roots: [root], dedupReads: true }); // socket: FILECTX_SOCKET or the default
try {
  // The harness layer: typed results, FsError for refusals.
  await session.file.write({ path: 'notes.txt', content: 'hello\nworld\n' });
  const read = await session.file.read({ path: 'notes.txt' });
  console.log(read.lines, read.version);
  await session.file.edit({ path: 'notes.txt', oldString: 'world', newString: 'filectx' });

  // The model-facing tools, as an MCP host would call them.
  const tool = await session.tools.call('read', { file_path: 'notes.txt' });
  console.log(tool.content[0]?.text);

  // Told when someone else changes a file this session read.
  const watching = session.onDidChange((change) => console.log('changed:', change.displayPath));

  // The design's interfaces, for a harness built like the design.
  const ctx = designContext(session);
  const target = await ctx.fs.resolve('notes.txt');
  const agent = { agent: { session: {} } }; // each agent session object is its own owner
  try {
    await ctx.fileContext.edit(target, { oldString: 'hello', newString: 'hi', replaceAll: false }, agent);
  } catch (error) {
    if (isFsError(error, 'FS_NOT_OBSERVED')) console.log('this agent must read first');
    else throw error;
  }
  await ctx.fileContext.read(target, { offset: 1, limit: 50 }, agent);
  const edited = await ctx.fileContext.edit(target, { oldString: 'hello', newString: 'hi', replaceAll: false }, agent);
  console.log('edited:', edited.replacements);
  watching.dispose();
} finally {
  await session.close();
}

import { connect, isFsError } from '@filectx/client';

const root = process.argv[2] ?? process.cwd();
const session = await connect({ roots: [root] });
try {
  await session.file.write({ path: 'notes.txt', content: 'title\ndraft one\n' });
  await session.file.edit({ path: 'notes.txt', oldString: 'one', newString: 'two' });
  await session.file.edit({ path: 'notes.txt', oldString: 'title', newString: 'Title' });

  // The last changes of the file, newest first: every session's, and outside ones.
  const { entries } = await session.journalList({ path: 'notes.txt', limit: 10 });
  for (const e of entries) console.log(e.entry, e.operation, e.sessionId, `+${e.added ?? '?'} -${e.removed ?? '?'}`);
  const [titled, drafted] = entries;
  if (!titled || !drafted) throw new Error('the journal is off (journal = false)');
  console.log((await session.journalDiff(drafted.entry)).diff);

  // Undoing an older change while a newer one is on the file is refused, with what changed since.
  try {
    await session.journalRestore(drafted.entry);
  } catch (error) {
    if (!isFsError(error, 'FS_STALE_VERSION')) throw error;
    console.log('changed since:\n' + String(error.data['diff'] ?? '(too large to show)'));
    // Undo newest first (or pass { force: true } to put the older content back over it).
    await session.journalRestore(titled.entry);
    const restored = await session.journalRestore(drafted.entry);
    console.log('restored', restored.displayPath, 'in entry', restored.entry);
  }
  console.log((await session.file.read({ path: 'notes.txt' })).lines);
} finally {
  await session.close();
}

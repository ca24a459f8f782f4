// The generated wire types must match the checked-in schema (one source of truth).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { METHODS } from '../src/generated/wire.js';
import { packageDir } from './daemon.js';

interface Generator {
  schemaPath: string;
  outputPath: string;
  render(schema: unknown): Promise<string>;
}

const generator = (): Promise<Generator> =>
  import(pathToFileURL(join(packageDir, 'scripts', 'generate.mjs')).href) as Promise<Generator>;

test('src/generated/wire.ts is up to date with protocol/schema/filectx.schema.json', async () => {
  const { schemaPath, outputPath, render } = await generator();
  const schema = JSON.parse(await readFile(schemaPath, 'utf8'));
  const expected = await render(schema);
  const actual = await readFile(outputPath, 'utf8');
  assert.ok(
    actual === expected,
    `${outputPath} is out of date with ${schemaPath}: run \`npm run generate\` in client/typescript and commit it`,
  );
});

test('a change of the schema changes the generated types', async () => {
  const { schemaPath, render } = await generator();
  const schema = JSON.parse(await readFile(schemaPath, 'utf8'));
  const before = await render(schema);
  schema.definitions.PathParams.properties.extraField = { type: 'boolean', description: 'Added by the test.' };
  const after = await render(schema);
  assert.notEqual(after, before);
  assert.match(after, /extraField\?: boolean/);
});

test('the method table lists every method of the schema with its kind and direction', async () => {
  const { schemaPath } = await generator();
  const schema = JSON.parse(await readFile(schemaPath, 'utf8')) as {
    methods: Record<string, { kind: string; direction: string }>;
  };
  const fromSchema = Object.fromEntries(
    Object.entries(schema.methods).map(([name, m]) => [name, { kind: m.kind, direction: m.direction }]),
  );
  assert.deepEqual({ ...METHODS }, fromSchema);
  assert.equal(METHODS['file/didChange'].direction, 'serverToClient');
});

test("the README's example is examples/quickstart.ts, which the example test runs", async () => {
  const readme = await readFile(join(packageDir, 'README.md'), 'utf8');
  const example = await readFile(join(packageDir, 'examples', 'quickstart.ts'), 'utf8');
  const block = /## From TypeScript[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.equal(block, example);
});

test('FEATURES names every feature of protocol/src/features.rs', async () => {
  const { FEATURES } = await import('../src/index.js');
  const rust = await readFile(join(packageDir, '..', '..', 'protocol', 'src', 'features.rs'), 'utf8');
  const names = [...rust.matchAll(/^pub const \w+: &str = "([^"]+)";$/gm)].map((m) => m[1]);
  assert.ok(names.length >= 10, `found ${names.length} features`);
  const known = new Set<string>(Object.values(FEATURES));
  for (const name of names) assert.ok(known.has(name as string), `FEATURES lacks "${name}"`);
});

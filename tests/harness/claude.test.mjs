// filectx end to end through a real harness: Claude Code (from npm, this package's
// node_modules) runs the issue-27 task against the scripted model on loopback, with `filectx mcp`
// registered as README.md says (`claude mcp add --scope user filectx -- filectx mcp …`, and ~/.claude/settings.json
// denying its own Read/Edit/Write/Grep/Glob and allowing filectx's tools). Asserts every
// step's outcome on disk and in what the model was told (the unread overwrite refused, the
// outside change kept), that Claude Code asked nothing of the network but the model, and that
// the bridge's results reached the model as plain text. Prints the characters and turns.
//
// Run by tests/run (`npm test` here): `FILECTX`/`FILECTXD` pick the binaries (default
// ../../target/debug), `FILECTX_MCP_ARGS` another bridge configuration.

import assert from 'node:assert/strict';
import test from 'node:test';

import { bridgeFeatures, binaries, report, runTask } from './lib/claude.mjs';
import { TOOL_SEARCH } from './lib/model.mjs';

test('Claude Code with filectx mcp: every step of the task correct, plain text, nothing leaves loopback', async (t) => {
  const features = bridgeFeatures(binaries().filectx);
  const result = await runTask('filectx');
  console.log(report(result));
  console.log(`bridge: ${['filectx mcp --root ROOT', ...result.mcpArgs].join(' ')}`);

  const context = () =>
    `claude exited ${result.claude.code}${result.claude.signal ? ` (${result.claude.signal})` : ''}\n` +
    `stderr: ${result.claude.stderr.slice(-2000)}\nstdout: ${result.claude.stdout.slice(-2000)}\n` +
    `model errors: ${result.errors.join('\n')}\ndaemon log: ${(result.daemonLog ?? '').slice(-2000)}`;
  assert.equal(result.claude.code, 0, context());
  assert.deepEqual(result.errors, [], context());
  // Claude Code asked the loopback for nothing but the Messages API (and the namespace has no
  // other interface, so nothing else could have gone anywhere).
  assert.deepEqual(result.stray, [], 'requests besides the Messages API');
  // The model was offered filectx's five tools and none of Claude Code's own file tools.
  for (const tool of ['read', 'write', 'edit', 'grep', 'glob']) {
    assert.ok(result.toolsOffered.includes(`mcp__filectx__${tool}`), `mcp__filectx__${tool} offered: ${result.toolsOffered}`);
  }
  for (const builtin of ['Read', 'Edit', 'Write', 'Grep', 'Glob']) {
    assert.ok(!result.toolsOffered.includes(builtin), `${builtin} not offered: ${result.toolsOffered}`);
  }
  // The daemon runs no language server, even one on the user's PATH (it would add its reports
  // to the edits' answers measured here, and its start-up to the run).
  assert.ok(!result.toolsOffered.includes('mcp__filectx__diagnostics'), `diagnostics not offered: ${result.toolsOffered}`);

  // Every step's outcome, each named when it fails.
  const wrong = result.steps.filter((s) => !s.ok).map((s) => `${s.step}: ${s.why}`);
  assert.deepEqual(wrong, [], 'steps not correct');
  assert.equal(result.steps.length, 10);
  // The unread overwrite was refused before anything was written, and said to read first.
  const overwrite = result.calls.find((c) => c.step === '7 overwrite a file never read');
  assert.ok(overwrite?.isError, 'the write of a file never read was refused');
  // The outside change was shown to the model (a refusal with its diff, or a merge's note)
  // before its edit went through.
  const afterOutside = result.calls.filter((c) => c.step === '3 edit after an outside change');
  assert.ok(
    afterOutside.some((c) => c.text.includes('+    # checked by the formatter')),
    `the outside change's diff reached the model: ${afterOutside.map((c) => c.text).join('\n---\n')}`,
  );

  // Plain text: the model got the tools' text, not the JSON of a structuredContent (Protocol 3,
  // `--structured` to bring it back); each error says it is one in its first words.
  const plain = () => {
    const json = result.calls.filter((c) => c.text.trimStart().startsWith('{"'));
    assert.deepEqual(
      json.map((c) => `${c.step}: ${c.text.slice(0, 80)}`),
      [],
      'tool results the model got as JSON instead of text',
    );
    const unmarked = result.calls.filter((c) => c.isError && !/^Error \(FS_[A-Z_]+\): /.test(c.text));
    assert.deepEqual(
      unmarked.map((c) => `${c.step}: ${c.text.slice(0, 80)}`),
      [],
      'error results whose text does not start with "Error (FS_…): "',
    );
    // Registered with the README's plain `claude mcp add`, the tools are loaded up front (the
    // bridge's `_meta` `anthropic/alwaysLoad`): no turn goes to finding them with ToolSearch.
    assert.deepEqual(
      result.calls.filter((c) => c.tool === TOOL_SEARCH).map((c) => c.step),
      [],
      'turns spent loading the tools with ToolSearch',
    );
  };
  if (features.protocol3) {
    plain();
  } else {
    await t.test('plain text (Protocol 3)', { todo: `this filectx mcp predates Protocol 3 (no --structured)` }, plain);
  }
});

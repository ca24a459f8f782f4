// The daemon's language servers through a real harness (issue 39): Claude Code with `filectx mcp`
// runs the typecheck task (lib/typecheck.mjs) against the scripted model, the daemon finding
// basedpyright on its PATH. The edit that breaks shapes.py is answered with the error it
// introduced, the model's fix (following that answer) with "No new errors (basedpyright).", and
// the bridge's `diagnostics` tool, offered by default, finds none.
//
// basedpyright is the one tests/run installs (target/lsp-venv, its program named by
// FILECTX_TEST_BASEDPYRIGHT); without it the test is skipped, and recorded so.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { packageDir, report, runTask } from './lib/claude.mjs';
import { skip } from './lib/skip.mjs';
import { TYPECHECK_TASK } from './lib/typecheck.mjs';

const basedpyright =
  process.env.FILECTX_TEST_BASEDPYRIGHT || path.join(packageDir, '../../target/lsp-venv/bin/basedpyright-langserver');

test('Claude Code with filectx mcp: an edit that breaks a Python file is told its type error, the fix no new errors', async (t) => {
  if (!fs.existsSync(basedpyright)) {
    skip(t, `${basedpyright} is missing (set by FILECTX_TEST_BASEDPYRIGHT; tests/run installs it under target/)`);
    return;
  }
  const result = await runTask('filectx', { task: TYPECHECK_TASK, languageServers: [path.dirname(basedpyright)] });
  console.log(report(result));

  const context = () =>
    `claude exited ${result.claude.code}${result.claude.signal ? ` (${result.claude.signal})` : ''}\n` +
    `stderr: ${result.claude.stderr.slice(-2000)}\nstdout: ${result.claude.stdout.slice(-2000)}\n` +
    `model errors: ${result.errors.join('\n')}\ndaemon log: ${(result.daemonLog ?? '').slice(-3000)}`;
  assert.equal(result.claude.code, 0, context());
  assert.deepEqual(result.errors, [], context());
  assert.deepEqual(result.stray, [], 'requests besides the Messages API');
  assert.ok(result.toolsOffered.includes('mcp__filectx__diagnostics'), `diagnostics offered: ${result.toolsOffered}`);

  const wrong = result.steps.filter((s) => !s.ok).map((s) => `${s.step}: ${s.why}`);
  assert.deepEqual(wrong, [], `steps not correct\n${context()}`);
  assert.equal(result.steps.length, 4);
  // What the model got, as Claude Code handed it over: the error line after the edit's own
  // answer, then the fix's all-clear as its last line.
  const text = (step) => result.calls.find((c) => c.step === step)?.text ?? '';
  assert.match(text('2 edit that introduces a type error'), /\nNew errors \(basedpyright\):\n6:12 Type "str" is not assignable to return type "int"/);
  assert.match(text('3 edit that fixes it'), /\nNo new errors \(basedpyright\)\.$/);
});

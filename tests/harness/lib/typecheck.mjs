// A scripted task for the daemon's language servers (issue 39), run by runTask (claude.mjs) with
// basedpyright among the daemon's built-ins: in a small Python project checked by basedpyright
// (pyproject.toml, typeCheckingMode "standard"), the agent reads shapes.py, edits `area` so that
// it returns text where its signature says int, fixes the line the error it was told of names,
// then asks `diagnostics` about the file. The agent knows only what the tool results told it:
// its fix follows the "New errors" of its edit's answer, or it stops there.
//
// Also the project (`makeProject`) and the checks of every step's outcome (`checkOutcome`).

import fs from 'node:fs';
import path from 'node:path';

import { MARKER } from './claude.mjs';
import { asText, numberedLines } from './task.mjs';

/** The server whose reports the task expects (the built-in's name in answers). */
export const SERVER = 'basedpyright';

/** The project's files. */
export const FILES = {
  'pyproject.toml': '[project]\nname = "shapes"\nversion = "0.1.0"\n\n[tool.basedpyright]\ntypeCheckingMode = "standard"\n',
  'shapes.py':
    '"""Rectangles."""\n\n\ndef area(width: int, height: int) -> int:\n    """The area of a width by height rectangle."""\n' +
    '    return width * height\n\n\ndef describe(width: int, height: int) -> str:\n' +
    '    return f"{width}x{height}: {area(width, height)}"\n',
};

/** The line the agent breaks, and how. */
const RETURN = '    return width * height';
const BROKEN = '    return str(width * height)';
/** Its line number in shapes.py, and the column of `str(`. */
export const RETURN_LINE = 6;
export const RETURN_COLUMN = 12;

const PROMPT = `${MARKER}: in shapes.py, make area return its result as text, then fix any type error that introduces \
and check the file's diagnostics.`;

/** Writes the project into `root`, its times an hour back (as a repository's files are). */
export function makeProject(root) {
  const past = new Date(Date.now() - 3600_000);
  for (const [name, text] of Object.entries(FILES)) {
    const file = path.join(root, name);
    fs.writeFileSync(file, text);
    fs.utimesSync(file, past, past);
  }
}

/**
 * The errors an edit's answer says it introduced (`New errors (SERVER):` then `LINE:COL
 * MESSAGE` lines): `[{line, column, message}]`.
 */
export function newErrors(text) {
  const at = text.indexOf(`\nNew errors (${SERVER}):\n`);
  if (at < 0) return [];
  const errors = [];
  for (const row of text.slice(at).split('\n').slice(2)) {
    const m = /^(\d+):(\d+) (.*)$/.exec(row);
    if (!m) break;
    errors.push({ line: Number(m[1]), column: Number(m[2]), message: m[3] });
  }
  return errors;
}

/** The agent (see task.mjs's `agent` for `t`). */
export function agent(root) {
  const file = path.join(root, 'shapes.py');
  return (t) => {
    const note = (key, value) => {
      if (t.notes) t.notes[key] = value;
    };
    const call = (step, tool, args) => {
      const result = t.call(tool, args, step);
      return { text: asText(result.text).text, isError: result.isError };
    };

    const read = call('1 read shapes.py', 'read', { file_path: file });
    note('read', read);
    if (read.isError) return;
    const known = numberedLines(read.text);

    const broke = call('2 edit that introduces a type error', 'edit', { file_path: file, old_string: RETURN, new_string: BROKEN });
    note('broke', broke);
    if (broke.isError) return;
    known.set(RETURN_LINE, BROKEN);

    // The fix: the line the first error names, as the agent knows it now, without its `str(…)`.
    const [error] = newErrors(broke.text);
    if (!error) return;
    const old = known.get(error.line);
    if (old === undefined || !/str\(.*\)$/.test(old)) return;
    const fixed = call('3 edit that fixes it', 'edit', { file_path: file, old_string: old, new_string: old.replace(/str\((.*)\)$/, '$1') });
    note('fixed', fixed);
    if (fixed.isError) return;

    note('diagnostics', call('4 diagnostics of the file', 'diagnostics', { file_path: file }));
  };
}

/** The task for runTask. */
export const TYPECHECK_TASK = { prompt: PROMPT, tools: ['read', 'edit', 'diagnostics'], makeProject, agent, checkOutcome };

/** Every step's outcome, `[{step, ok, why}]`, from shapes.py on disk and what the agent noted. */
export function checkOutcome(root, notes) {
  const steps = [];
  const check = (step, ok, why) => steps.push({ step, ok: Boolean(ok), why });
  const shapes = fs.readFileSync(path.join(root, 'shapes.py'), 'utf8');
  const lines = numberedLines(notes.read?.text ?? '');
  check(
    '1 read shapes.py',
    !notes.read?.isError && lines.get(RETURN_LINE) === RETURN,
    `line ${RETURN_LINE} seen as ${JSON.stringify(lines.get(RETURN_LINE))}`,
  );
  const broke = notes.broke?.text ?? '';
  const [error] = newErrors(broke);
  check(
    '2 edit that introduces a type error',
    notes.broke && !notes.broke.isError && error?.line === RETURN_LINE && error.column === RETURN_COLUMN &&
      /"str"/.test(error.message) && /"int"/.test(error.message),
    `the answer ends: ${JSON.stringify(broke.slice(-300))}`,
  );
  const fixed = notes.fixed?.text ?? '';
  check(
    '3 edit that fixes it',
    notes.fixed && !notes.fixed.isError && fixed.endsWith(`\nNo new errors (${SERVER}).`) && shapes === FILES['shapes.py'],
    `the answer ends: ${JSON.stringify(fixed.slice(-300))}; shapes.py as it was: ${shapes === FILES['shapes.py']}`,
  );
  const diagnostics = notes.diagnostics?.text ?? '';
  check(
    '4 diagnostics of the file',
    notes.diagnostics && !notes.diagnostics.isError && diagnostics === `No errors in shapes.py (${SERVER}).`,
    `the answer: ${JSON.stringify(diagnostics.slice(0, 300))}`,
  );
  return steps;
}

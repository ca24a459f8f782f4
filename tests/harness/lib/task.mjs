// The scripted task of issue 27, as an agent script the model server replays (model.mjs): read a
// 1,200-line file whole, edit it, another process changes it, edit again, read one 50-line
// window twice, create a file, overwrite a file never read, an ambiguous edit, one grep, one
// glob. The agent knows only what the tool results told it: it copies each `old_string` from
// the lines it read (un-escaping them first when a harness handed it JSON), and it reacts to a
// refusal as a model does: it reads again when told to, retries when told the change counts as
// read, and adds the lines around an ambiguous `old_string`.
//
// Also the project it works in (`makeProject`) and the checks of every step's outcome on disk
// (`checkOutcome`).

import fs from 'node:fs';
import path from 'node:path';

/** The tools the agent uses, by filectx's names. */
export const TOOLS = ['read', 'edit', 'write', 'grep', 'glob'];

/** Lines of the big file. */
export const LINES = 1200;
/** The first line of the 50-line window read twice. */
export const WINDOW = 601;
/** The functions the grep looks for. */
export const GREP_HITS = [7, 77, 147];
/** The text of the file created. */
export const FAREWELL = 'def farewell(name):\n    """Say goodbye to name."""\n    return "Goodbye, %s!" % name\n';
/** The new text of the file overwritten without a read. */
export const SETTINGS_NEW = '[greeter]\npunctuation = "?"\nshout = true\n';
/** Its text before (what a teammate wrote, which the agent never saw). */
export const SETTINGS_OLD = '# Kept in sync with deploy/greeter.env by hand: do not overwrite.\n[greeter]\npunctuation = "!"\nshout = false\ntimeout_ms = 2500\n';

/** Line `n` (1-based) of the big file: blocks of 8 lines, one function each, with quotes and backslashes. */
export function line(n) {
  const k = Math.floor((n - 1) / 8);
  switch ((n - 1) % 8) {
    case 0:
      return `def greet_${k}(name, punct="!"):`;
    case 1:
      return `    """Greet name; keeps \\"quotes\\" and \\\\ as is."""`;
    case 2:
      return '    if not name:';
    case 3:
      return '        return None';
    case 4:
      return `    text = "Hello #${k}, %s%s\\n" % (name, punct)`;
    case 5:
      return '    result = text.replace("\\\\", "/")';
    case 6:
      return '    return result';
    default:
      return '';
  }
}

/** The big file's text. */
export function bigFile() {
  let text = '';
  for (let n = 1; n <= LINES; n += 1) text += `${line(n)}\n`;
  return text;
}

/** The line number of `def greet_K(` in the original file. */
export const defLine = (k) => 8 * k + 1;

/**
 * Writes the project into `root`: src/greeter.py (the big file), config/settings.toml (never
 * read by the agent), tests/test_greeter.py. Their times are set an hour back, as a
 * repository's files are, past any racy window.
 */
export function makeProject(root) {
  const files = {
    'src/greeter.py': bigFile(),
    'config/settings.toml': SETTINGS_OLD,
    'tests/test_greeter.py': 'from src.greeter import greet_1\n\n\ndef test_greet():\n    assert greet_1("a")\n',
  };
  const past = new Date(Date.now() - 3600_000);
  for (const [name, text] of Object.entries(files)) {
    const file = path.join(root, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
    fs.utimesSync(file, past, past);
  }
}

/** The outside change: a formatter adds a comment line to greet_100, far from every edit. */
export const OUTSIDE_LINE = '    # checked by the formatter';
function outsideChange(root) {
  const file = path.join(root, 'src/greeter.py');
  const text = fs.readFileSync(file, 'utf8');
  const anchor = 'def greet_100(name, punct="!"):\n';
  if (!text.includes(anchor)) throw new Error('the outside change found no greet_100');
  fs.writeFileSync(file, text.replace(anchor, `${anchor}${OUTSIDE_LINE}\n`));
}

/**
 * The text a harness handed the model, as the model reads it: when it is the JSON of a
 * `structuredContent` `{text}`, the model un-escapes it (and the run records that it had to).
 */
export function asText(text) {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{')) {
    try {
      const value = JSON.parse(trimmed);
      if (value && typeof value.text === 'string') return { text: value.text, json: true };
    } catch {
      // Not JSON after all.
    }
  }
  return { text, json: false };
}

/** The numbered lines of a read's (or a content grep's) text: number → line. */
export function numberedLines(text) {
  const lines = new Map();
  for (const row of text.split('\n')) {
    const m = /^\s*(\d+)(?:\t|→)(.*)$/.exec(row);
    if (m) lines.set(Number(m[1]), m[2]);
  }
  return lines;
}

/** The `offset` a read's footer asks to continue with, if any. */
export function continueAt(text) {
  const m = /offset[=: ]+(\d+)/i.exec(text.slice(-400));
  return m ? Number(m[1]) : undefined;
}

// How the agent understands a refusal, as a model would: by its code when the text starts with
// one (`Error (FS_…): `, Protocol 3), else by its words (older filectx, Claude Code's own tools).
const STALE = /changed since|modified since|has been modified|newer|stale/i;
const READ_AGAIN = /read it again|read the file again|read it first|has not been read|not been read yet|read it before/i;
const AMBIGUOUS = /(\d+) (?:matches|occurrences|times)|more than once|not unique|multiple/i;
// A refusal that shows the file and counts as a read of it (filectx, a small unread file).
const SHOWN_AS_READ = /here it is, now counted as read/;
const CODES = { FS_STALE_VERSION: 'stale', FS_NOT_OBSERVED: 'read', FS_AMBIGUOUS_EDIT: 'ambiguous' };

/** What a refusal asks of the agent: 'stale' (retry or adapt), 'read' (read, then retry), 'ambiguous', or 'other'. */
export function refusal(text) {
  const marked = /^Error \((FS_[A-Z_]+)\)/.exec(text);
  if (marked) return CODES[marked[1]] ?? 'other';
  if (STALE.test(text)) return READ_AGAIN.test(text) ? 'read' : 'stale';
  if (AMBIGUOUS.test(text)) return 'ambiguous';
  if (READ_AGAIN.test(text)) return 'read';
  return 'other';
}

/**
 * The agent. `t.call(step, tool, args)` makes one tool call (tools: read, edit, write, grep,
 * glob, with filectx's argument names; the harness maps them) and returns `{text, isError}`;
 * `t.outside(name, fn)` does something outside the harness once. `root` is the project's
 * absolute path. Notes what it saw in `t.notes` when there is one (a report's run).
 */
export function agent(root) {
  const abs = (name) => path.join(root, name);
  const big = abs('src/greeter.py');
  return (t) => {
    const note = (key, value) => {
      if (t.notes) t.notes[key] = value;
    };
    /** What the agent knows of each file: line number → text, from its reads. */
    const known = new Map();
    const call = (step, tool, args) => {
      const result = t.call(tool, args, step);
      const { text, json } = asText(result.text);
      if (json && t.notes) t.notes.jsonResults = (t.notes.jsonResults ?? 0) + 1;
      return { text, isError: result.isError };
    };
    const read = (step, file, offset, limit) => {
      const args = { file_path: file };
      if (offset !== undefined) args.offset = offset;
      if (limit !== undefined) args.limit = limit;
      const result = call(step, 'read', args);
      if (!result.isError) {
        const lines = known.get(file) ?? new Map();
        for (const [n, text] of numberedLines(result.text)) lines.set(n, text);
        known.set(file, lines);
      }
      return result;
    };
    /** Reads the whole file, following the footer's offset. */
    const readAll = (step, file) => {
      known.delete(file);
      let result = read(step, file);
      for (let pages = 0; !result.isError && pages < 10; pages += 1) {
        const next = continueAt(result.text);
        if (next === undefined || known.get(file)?.has(next)) break;
        result = read(`${step} (continued)`, file, next);
      }
      return result;
    };
    /** The line number of the first known line of `file` that starts with `prefix`. */
    const find = (file, prefix) => {
      for (const [n, text] of known.get(file) ?? []) if (text.startsWith(prefix)) return n;
      throw new Error(`the agent never saw a line starting with ${JSON.stringify(prefix)} in ${file}`);
    };
    const lineAt = (file, n) => {
      const text = known.get(file)?.get(n);
      if (text === undefined) throw new Error(`the agent never saw line ${n} of ${file}`);
      return text;
    };
    /** How many lines before line `at` make `old` (which starts there) unique in what the agent read. */
    const uniqueContext = (file, at, old) => {
      const lines = known.get(file) ?? new Map();
      const numbers = [...lines.keys()].sort((a, b) => a - b);
      const text = numbers.map((n) => lines.get(n)).join('\n');
      for (let c = 1; c < at; c += 1) {
        let candidate = old;
        for (let k = 1; k <= c; k += 1) candidate = `${lineAt(file, at - k)}\n${candidate}`;
        if (text.split(candidate).length === 2) return c;
      }
      return at - 1;
    };
    /**
     * An edit as a model makes it: `pick()` copies `[old, new]` from what it knows (again after
     * each re-read). Reads again when a refusal says so, retries when it says the change counts
     * as read, adds the lines before `old` when it matched more than once. Returns the results.
     */
    const edit = (step, file, pick) => {
      const results = [];
      let context = 0;
      for (let attempt = 0; attempt < 4; attempt += 1) {
        let [old, replacement, at] = pick();
        for (let c = 1; c <= context; c += 1) {
          const before = lineAt(file, at - c);
          old = `${before}\n${old}`;
          replacement = `${before}\n${replacement}`;
        }
        const result = call(step, 'edit', { file_path: file, old_string: old, new_string: replacement });
        results.push(result);
        if (!result.isError) {
          // The agent knows what it wrote: its copy of those lines follows its edit.
          const lines = known.get(file);
          const mine = replacement.split('\n');
          mine.forEach((text, i) => lines?.set(at - context + i, text));
          return results;
        }
        const kind = refusal(result.text);
        if (kind === 'ambiguous') {
          // As many lines before it as make it unique in what the agent read.
          const [bare, , line] = pick();
          context = uniqueContext(file, line, bare);
        } else if (kind === 'read') {
          readAll(`${step}: read again`, file);
        } else if (kind !== 'stale') {
          return results;
        }
      }
      return results;
    };

    // 1. Read the big file whole.
    readAll('1 read the 1,200-line file', big);
    note('readLines', [...(known.get(big) ?? new Map())]);

    // 2. Edit greet_10's greeting (a line with quotes and a backslash).
    note(
      'edit1',
      edit('2 edit', big, () => {
        const at = find(big, 'def greet_10(') + 4;
        const old = lineAt(big, at);
        return [old, old.replace('Hello #10', 'Hi #10'), at];
      }),
    );

    // 3. Another process changes the file; edit again, elsewhere.
    t.outside('formatter', () => outsideChange(root));
    note(
      'edit2',
      edit('3 edit after an outside change', big, () => {
        const at = find(big, 'def greet_20(') + 4;
        const old = lineAt(big, at);
        return [old, old.replace('Hello #20', 'Hi #20'), at];
      }),
    );

    // 4, 5. One 50-line window, twice.
    note('window1', read('4 read a 50-line window', big, WINDOW, 50));
    note('window2', read('5 read the same window again', big, WINDOW, 50));

    // 6. Create a file.
    note('create', call('6 create a file', 'write', { file_path: abs('src/farewell.py'), content: FAREWELL }));

    // 7. Overwrite a file never read; when refused, read it (unless the refusal showed it and
    // says that counts as read), then overwrite it.
    const settings = abs('config/settings.toml');
    const unread = call('7 overwrite a file never read', 'write', { file_path: settings, content: SETTINGS_NEW });
    note('overwrite', unread);
    if (unread.isError && refusal(unread.text) === 'read') {
      const shown = SHOWN_AS_READ.test(unread.text);
      note('settingsSeen', shown ? unread.text : read('7 overwrite: read it first', settings).text);
      note('overwriteAfterRead', call('7 overwrite: write after the read', 'write', { file_path: settings, content: SETTINGS_NEW }));
    }

    // 8. An ambiguous edit: `    return result` is in every function; meant for greet_30's.
    note(
      'ambiguous',
      edit('8 ambiguous edit', big, () => {
        const at = find(big, 'def greet_30(') + 6;
        const old = lineAt(big, at);
        return [old, `${old}.strip()`, at];
      }),
    );

    // 9. One grep (content, with line numbers).
    note('grep', call('9 grep', 'grep', { pattern: `greet_(${GREP_HITS.join('|')})\\(`, path: root, output_mode: 'content' }));

    // 10. One glob.
    note('glob', call('10 glob', 'glob', { pattern: '**/*.py', path: root }));
  };
}

/** The big file as it must end: both edits, the outside change, the unambiguous edit. */
export function expectedBigFile() {
  let text = bigFile();
  text = text.replace('"Hello #10, ', '"Hi #10, ').replace('"Hello #20, ', '"Hi #20, ');
  text = text.replace('def greet_100(name, punct="!"):\n', `def greet_100(name, punct="!"):\n${OUTSIDE_LINE}\n`);
  const lines = text.split('\n');
  // greet_30's `return result` (no line was added above it).
  const at = defLine(30) + 6 - 1;
  if (lines[at] !== '    return result') throw new Error(`expected greet_30's return at line ${at + 1}`);
  lines[at] = '    return result.strip()';
  return lines.join('\n');
}

/**
 * Every step's outcome: `[{step, ok, why}]`, from the files on disk and what the agent noted
 * (`notes`, from a replay of the whole conversation).
 */
export function checkOutcome(root, notes) {
  const read = (name) => {
    try {
      return fs.readFileSync(path.join(root, name), 'utf8');
    } catch {
      return undefined;
    }
  };
  const big = read('src/greeter.py') ?? '';
  const final = big.split('\n');
  const steps = [];
  const check = (step, ok, why) => steps.push({ step, ok: Boolean(ok), why });
  const succeeded = (results) => Array.isArray(results) && results.length > 0 && !results.at(-1).isError;

  // Every line exactly as in the file (quotes and backslashes too); a line numbered past the
  // end may only be the empty one after the final newline (Claude Code's Read shows it).
  const readLines = notes.readLines ?? [];
  const asInFile = readLines.filter(([n, text]) => n <= LINES && text === line(n)).length;
  const extra = readLines.filter(([n, text]) => n > LINES && text !== '');
  check(
    '1 read the 1,200-line file',
    asInFile === LINES && extra.length === 0,
    `the agent saw ${asInFile} of ${LINES} lines exactly as in the file${extra.length ? `, and ${extra.length} lines past its end` : ''}`,
  );
  check('2 edit', succeeded(notes.edit1) && big.includes('"Hi #10, '), `greet_10 says Hi: ${big.includes('"Hi #10, ')}`);
  check(
    '3 edit after an outside change',
    succeeded(notes.edit2) && big.includes('"Hi #20, ') && big.includes(OUTSIDE_LINE),
    `greet_20 says Hi: ${big.includes('"Hi #20, ')}; the outside change kept: ${big.includes(OUTSIDE_LINE)}`,
  );
  const windowOk = (result) => {
    if (!result || result.isError) return false;
    const lines = numberedLines(result.text);
    if (lines.size === 0) return /unchanged|already|same/i.test(result.text);
    for (let n = WINDOW; n < WINDOW + 50; n += 1) if (lines.get(n) !== final[n - 1]) return false;
    return lines.size === 50;
  };
  check('4 read a 50-line window', windowOk(notes.window1), `lines ${WINDOW}-${WINDOW + 49}, as in the file`);
  check('5 read the same window again', windowOk(notes.window2), 'the same lines again, or a note that they are unchanged');
  check('6 create a file', notes.create && !notes.create.isError && read('src/farewell.py') === FAREWELL, 'src/farewell.py as written');
  const refused = notes.overwrite?.isError === true;
  check(
    '7 overwrite a file never read',
    refused && notes.settingsSeen?.includes('do not overwrite') && read('config/settings.toml') === SETTINGS_NEW,
    refused ? 'the unread overwrite was refused; written after a read' : 'the file was overwritten without the agent ever seeing it',
  );
  const ambiguous = notes.ambiguous ?? [];
  check(
    '8 ambiguous edit',
    ambiguous.length >= 2 && ambiguous[0].isError && succeeded(ambiguous) && big === expectedBigFile(),
    `first attempt refused: ${ambiguous[0]?.isError === true}; the file ends exactly as expected: ${big === expectedBigFile()}`,
  );
  const grepText = notes.grep?.text ?? '';
  const grepOk =
    !notes.grep?.isError &&
    GREP_HITS.every((k) => {
      const n = defLine(k) + (k >= 100 ? 1 : 0);
      return new RegExp(`\\b${n}[:\\t-]`).test(grepText) && grepText.includes(`def greet_${k}(`);
    });
  check('9 grep', grepOk, `greet_${GREP_HITS.join(', greet_')} found with their line numbers`);
  const globText = notes.glob?.text ?? '';
  check(
    '10 glob',
    !notes.glob?.isError && ['src/greeter.py', 'src/farewell.py', 'tests/test_greeter.py'].every((f) => globText.includes(f)),
    'the three .py files listed',
  );
  return steps;
}

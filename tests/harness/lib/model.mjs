// A scripted model behind the Anthropic Messages API, on loopback, as Claude Code calls it
// (`ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`): `POST /v1/messages` (streamed as server-sent
// events, or one JSON body when `stream` is false) and `POST /v1/messages/count_tokens`. Every
// other request is answered 404 and recorded, so a test can assert that the harness asked for
// nothing else.
//
// The model is an agent script (see task.mjs): a plain function that calls tools one at a time
// and decides each next call from the results it got. The server holds no conversation state:
// for each request it replays the script over the conversation Claude Code sent (every
// assistant `tool_use` paired with the `tool_result` that answers it), and the first call the
// script makes beyond that history is the next answer. So the script reacts to exactly what the
// harness handed the model, and a request the harness repeats gets the same answer.

import http from 'node:http';

/** The call the script makes next (thrown to stop a replay there). */
class NextCall {
  constructor(tool, args, step) {
    this.tool = tool;
    this.args = args;
    this.step = step;
  }
}

/** The conversation diverged from the script (the harness changed or dropped a call). */
export class Diverged extends Error {}

/** The text of a `tool_result` block's content: a string, or text blocks. */
export function resultText(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((block) => block && block.type === 'text')
    .map((block) => block.text)
    .join('');
}

/**
 * The tool calls of a conversation in order, each with its answer: `{id, name, input, text,
 * isError}` (`text` is undefined for a call not answered yet).
 */
export function toolCalls(messages) {
  const calls = [];
  const byId = new Map();
  for (const message of messages ?? []) {
    if (!Array.isArray(message.content)) continue;
    for (const block of message.content) {
      if (message.role === 'assistant' && block.type === 'tool_use') {
        const call = { id: block.id, name: block.name, input: block.input, text: undefined, isError: false };
        calls.push(call);
        byId.set(block.id, call);
      } else if (message.role === 'user' && block.type === 'tool_result') {
        const call = byId.get(block.tool_use_id);
        if (call) {
          call.text = resultText(block.content);
          call.isError = block.is_error === true;
        }
      }
    }
  }
  return calls;
}

/**
 * Replays `script` over the answered `calls`: returns `{done: true}` when the script ends,
 * else `{done: false, tool, args, step}` for its next call. `effects` (a Set) names the side effects
 * already carried out; the script's `outside(name, fn)` runs `fn` only the first time.
 * `toolName(tool)` is the harness's name of one of the script's tools. `observe` (optional):
 * `notes`, an object the script writes what it saw into, and `onCall({step, tool, args,
 * call})`, called for each call the history answers.
 */
export function replay(script, calls, effects, toolName, observe = {}) {
  let index = 0;
  const t = {
    notes: observe.notes,
    call(tool, args, step) {
      if (index < calls.length) {
        const seen = calls[index];
        if (seen.name !== toolName(tool)) {
          throw new Diverged(`call ${index + 1}: the script calls ${toolName(tool)}, the conversation has ${seen.name}`);
        }
        if (seen.text === undefined) {
          throw new Diverged(`call ${index + 1} (${seen.name}) has no tool_result`);
        }
        index += 1;
        observe.onCall?.({ step, tool, args, call: seen });
        return { text: seen.text, isError: seen.isError };
      }
      throw new NextCall(tool, args, step);
    },
    outside(name, fn) {
      if (!effects.has(name)) {
        effects.add(name);
        fn();
      }
    },
  };
  try {
    script(t);
  } catch (error) {
    if (error instanceof NextCall) return { done: false, tool: error.tool, args: error.args, step: error.step };
    throw error;
  }
  if (index < calls.length) throw new Diverged(`the script ended after ${index} calls, the conversation has ${calls.length}`);
  return { done: true };
}

/** One SSE event. */
function event(res, type, data) {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

/** Content blocks of the answer: a text, or one tool call. */
function answerBlocks(turn, next, toolName, toolArgs) {
  if (next.done) return [{ type: 'text', text: 'Done.' }];
  const id = `toolu_${String(turn).padStart(4, '0')}`;
  if (next.raw) return [{ type: 'tool_use', id, ...next.raw }];
  return [{ type: 'tool_use', id, name: toolName(next.tool), input: toolArgs(next.tool, next.args) }];
}

/** The harness's tool that loads deferred tools' schemas (Claude Code's). */
export const TOOL_SEARCH = 'ToolSearch';

/**
 * What a model does first when the tools it needs are deferred (named in the prompt but not
 * loaded, as Claude Code does with MCP tools unless told otherwise): one `ToolSearch`
 * `select:` call for all of them, as the prompt says. `undefined` when there is nothing to load
 * or it was loaded already.
 */
export function loadDeferred(body, calls, needed) {
  const offered = new Set((body.tools ?? []).map((tool) => tool.name));
  const missing = needed.filter((name) => !offered.has(name));
  if (missing.length === 0 || !offered.has(TOOL_SEARCH) || calls.some((call) => call.name === TOOL_SEARCH)) return undefined;
  return { done: false, raw: { name: TOOL_SEARCH, input: { query: `select:${missing.join(',')}`, max_results: missing.length } } };
}

function streamAnswer(res, id, model, blocks, stopReason) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  event(res, 'message_start', {
    message: {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 1, output_tokens: 1 },
    },
  });
  blocks.forEach((block, index) => {
    if (block.type === 'text') {
      event(res, 'content_block_start', { index, content_block: { type: 'text', text: '' } });
      event(res, 'content_block_delta', { index, delta: { type: 'text_delta', text: block.text } });
    } else {
      event(res, 'content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
      event(res, 'content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } });
    }
    event(res, 'content_block_stop', { index });
  });
  event(res, 'message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 1 } });
  event(res, 'message_stop', {});
  res.end();
}

/**
 * Starts the model server on 127.0.0.1 (a free port). `options`:
 * - `script(t)`: the agent (see task.mjs);
 * - `marker`: a string of the task's prompt: a request whose first user message lacks it is a
 *   side request of the harness (a title, a summary), answered with a short text and counted
 *   apart;
 * - `toolName(tool)`, `toolArgs(tool, args)`: the harness's tool names and argument shapes;
 * - `tools`: the script's tools (loaded first with `ToolSearch` when the harness defers them);
 * - `hold(next)` (optional): awaited before the answer `next` (the script's next call, or
 *   `{done: true}`) is sent, to release several agents' calls at one moment (race.mjs).
 * Returns `{url, port, state, close()}`; `state`: `turns` counts the model turns of the task
 * (requests answered from the script), `last` is the last task request's body (its messages
 * hold every tool result the model got), `stray` lists requests to anything but the Messages
 * API, `errors` what went wrong while answering, `effects` the script's outside changes made.
 */
export async function startModel(options) {
  const { script, marker, toolName, toolArgs, tools, hold } = options;
  const effects = new Set();
  const state = { turns: 0, sideRequests: 0, stray: [], errors: [], last: undefined, requests: [], effects };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const raw = Buffer.concat(chunks).toString('utf8');
      const json = (status, body) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      let body;
      try {
        body = raw ? JSON.parse(raw) : {};
      } catch {
        body = undefined;
      }
      if (req.method === 'POST' && url.pathname === '/v1/messages/count_tokens') {
        json(200, { input_tokens: Math.ceil(raw.length / 4) });
        return;
      }
      if (req.method !== 'POST' || url.pathname !== '/v1/messages' || body === undefined) {
        state.stray.push(`${req.method} ${req.url}`);
        json(404, { type: 'error', error: { type: 'not_found_error', message: 'not served by the scripted model' } });
        return;
      }
      state.requests.push({ time: Date.now(), messages: body.messages?.length ?? 0 });
      const answer = async () => {
        const first = body.messages?.[0];
        const firstText = Array.isArray(first?.content) ? first.content.map((b) => b.text ?? '').join('') : String(first?.content ?? '');
        const id = `msg_${state.requests.length}`;
        let blocks;
        let stopReason;
        if (!firstText.includes(marker)) {
          state.sideRequests += 1;
          blocks = [{ type: 'text', text: 'Scripted task' }];
          stopReason = 'end_turn';
        } else {
          let next;
          try {
            const calls = toolCalls(body.messages);
            next =
              loadDeferred(body, calls, tools.map(toolName)) ??
              replay(script, calls.filter((call) => call.name !== TOOL_SEARCH), effects, toolName);
          } catch (error) {
            state.errors.push(String(error?.stack ?? error));
            next = { done: true };
          }
          state.turns += 1;
          state.last = body;
          if (hold) await hold(next);
          blocks = answerBlocks(state.turns, next, toolName, toolArgs);
          stopReason = next.done ? 'end_turn' : 'tool_use';
        }
        if (body.stream) {
          streamAnswer(res, id, body.model, blocks, stopReason);
        } else {
          json(200, {
            id,
            type: 'message',
            role: 'assistant',
            model: body.model,
            content: blocks,
            stop_reason: stopReason,
            stop_sequence: null,
            usage: { input_tokens: 1, output_tokens: 1 },
          });
        }
      };
      answer().catch((error) => {
        state.errors.push(String(error?.stack ?? error));
        if (!res.headersSent) json(500, { type: 'error', error: { type: 'api_error', message: String(error) } });
      });
    });
  });
  // A CONNECT (a proxied HTTPS request) is traffic that would have left loopback: refuse it.
  server.on('connect', (req, socket) => {
    state.stray.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    state,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

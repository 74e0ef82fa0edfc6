// What the node tests of threads, multitask and users share: the SDK's own AbstractChat over the
// state @ai-sdk/react's Chat keeps, a DefaultChatTransport that also notes every chunk the SDK
// parsed, and small readers of the server's answers.
import assert from 'node:assert/strict';

import { AbstractChat, DefaultChatTransport } from 'ai';

export class State {
  status = 'ready';
  error = undefined;
  messages = [];
  constructor(messages = []) { this.messages = messages; }
  pushMessage = (m) => { this.messages = [...this.messages, m]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = this.messages.with(i, structuredClone(m)); };
  snapshot = (thing) => structuredClone(thing);
}

export class Chat extends AbstractChat {
  constructor({ messages, ...options }) { super({ ...options, state: new State(messages) }); }
}

/** DefaultChatTransport that keeps the UI message chunks it hands the Chat (`chunks`) and calls
 *  `onChunk(chunk)` for each. */
export class RecordingTransport extends DefaultChatTransport {
  constructor({ onChunk, ...options }) {
    super(options);
    this.chunks = [];
    this.onChunk = onChunk;
  }

  processResponseStream(stream) {
    return super.processResponseStream(stream).pipeThrough(new TransformStream({
      transform: (chunk, controller) => {
        this.chunks.push(chunk);
        this.onChunk?.(chunk);
        controller.enqueue(chunk);
      },
    }));
  }

  types() { return this.chunks.map((c) => c.type); }
}

// what the SDK holds, as JSON (undefined keys dropped, as on the wire)
export const plain = (messages) => JSON.parse(JSON.stringify(messages));

export const textOf = (message) => (message?.parts ?? []).filter((p) => p.type === 'text')
  .map((p) => p.text).join('');

/** The run answering with `message` (the server's assistant message id is `<runId>-assistant`). */
export const runOf = (message) => message.id.replace(/-assistant$/, '');

/** Wait until `chat`'s reply streams with `predicate(chat)` true; a request that failed first
 *  fails at once with the server's answer. */
export async function streaming(chat, predicate, what) {
  await waitFor(() => {
    if (chat.status === 'error') throw new Error(`${what}: ${chat.error?.message}`);
    return chat.status === 'streaming' && predicate(chat);
  }, what);
}

/** Wait until `predicate()`; else fail saying `what`. */
export async function waitFor(predicate, what, ms = 20_000) {
  const until = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** GET `${base}/api/chat/${id}/messages`: the thread as the server stores it. */
export async function stored(base, id, headers) {
  const response = await fetch(`${base}/api/chat/${encodeURIComponent(id)}/messages`, { headers });
  assert.equal(response.status, 200, await response.clone().text());
  return response.json();
}

/** The server's JSON refusal the transport threw (its body is the Error's message). */
export function refusal(error) {
  assert.ok(error instanceof Error, `an error, not ${error}`);
  return JSON.parse(error.message);
}

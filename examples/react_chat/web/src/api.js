// What the page asks the server, and how it talks about failures: every request carries the
// bearer token (if one is saved), and an HTTP error becomes a sentence a user can act on.
import { DefaultChatTransport } from "ai";

const TOKEN_KEY = "streamwire.token";

export const savedToken = () => localStorage.getItem(TOKEN_KEY) || "";

export function saveToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

/** An HTTP error, already in users' words (`message`); `status` for the page's own decisions. */
export class HttpError extends Error {
  constructor(status) {
    super(httpWords(status));
    this.name = "HttpError";
    this.status = status;
  }
}

function httpWords(status) {
  if (status === 401) return "This server needs you to sign in: add your access token (Sign in, top right).";
  if (status === 403) return "Your access token does not allow this.";
  if (status === 404) return "This conversation was not found.";
  if (status === 409) return "A reply is already being written in this conversation: wait for it, or stop it.";
  if (status === 413) return "That message is too long.";
  if (status === 429 || status === 503) return "The server is busy. Try again in a moment.";
  return "Something went wrong on the server. Try again.";
}

/** fetch with the saved bearer token; it resolves to any response (check `ok`). */
export function authFetch(input, init = {}) {
  const headers = new Headers(init.headers);
  const token = savedToken();
  if (token) headers.set("authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
}

/** The fetch the chat transport uses: an HTTP error is thrown in users' words (the SDK would
 *  otherwise show the server's raw body). */
async function chatFetch(input, init) {
  const response = await authFetch(input, init);
  if (!response.ok) throw new HttpError(response.status);
  return response;
}

/** What the page may say about an error (never the text of an internal exception). */
export function errorWords(error) {
  if (!error) return "";
  if (error instanceof HttpError) return error.message;
  if (error instanceof TypeError) return "The connection was lost. Check your network and try again.";
  return "The reply could not be completed. Try again.";
}

/** `DefaultChatTransport` on streamwire's /api/chat that also shows the page each UI message
 *  chunk (`onChunk(chunk, messageId)`): useChat keeps no trace of `abort` or of a reply's end. */
export class StreamwireTransport extends DefaultChatTransport {
  constructor(options, onChunk) {
    super({ api: "/api/chat", fetch: chatFetch, ...options });
    this.onChunk = onChunk;
  }

  processResponseStream(stream) {
    let messageId;
    const onChunk = this.onChunk;
    return super.processResponseStream(stream).pipeThrough(new TransformStream({
      transform(chunk, controller) {
        if (chunk.type === "start" && chunk.messageId) messageId = chunk.messageId;
        onChunk(chunk, messageId);
        controller.enqueue(chunk);
      },
    }));
  }
}

/** A thread's messages: the server's (`GET /api/chat/{id}/messages`) when it keeps threads,
 *  else this browser's copy. `notes`: what the page knows of each reply (stopped, finished,
 *  errorText). */
export async function loadThread(chatId) {
  const local = readLocal(chatId);
  try {
    const response = await authFetch(`/api/chat/${encodeURIComponent(chatId)}/messages`);
    if (response.ok) {
      const body = await response.json();
      const messages = Array.isArray(body) ? body : body.messages;
      if (Array.isArray(messages)) {
        const notes = { ...local.notes };
        for (const m of messages) notes[m.id] = { finished: true, ...notes[m.id] };
        return { messages, notes };
      }
    }
  } catch {
    // no server history: this browser's copy
  }
  return local;
}

const localKey = (chatId) => `streamwire.chat.${chatId}`;

function readLocal(chatId) {
  try {
    const saved = JSON.parse(localStorage.getItem(localKey(chatId)) || "null");
    if (saved && Array.isArray(saved.messages)) return { messages: saved.messages, notes: saved.notes || {} };
  } catch {
    // a damaged copy: start afresh
  }
  return { messages: [], notes: {} };
}

export function saveLocal(chatId, messages, notes) {
  try {
    localStorage.setItem(localKey(chatId), JSON.stringify({ messages, notes, savedAt: Date.now() }));
  } catch {
    // storage full or disabled: the server's copy (if any) remains
  }
}

/** The caller's threads (`GET /api/chats`), or null when the server lists none (404: it keeps
 *  no threads yet). */
export async function loadThreads() {
  try {
    const response = await authFetch("/api/chats");
    if (!response.ok) return null;
    const body = await response.json();
    const items = Array.isArray(body) ? body : body.threads || body.chats || body.items || body.data;
    return Array.isArray(items) ? items : null;
  } catch {
    return null;
  }
}

/** A new chat id: 32 hex digits (crypto.randomUUID needs a secure context). */
export function newChatId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export const validChatId = (id) => typeof id === "string" && /^[A-Za-z0-9._~-]{1,128}$/.test(id);

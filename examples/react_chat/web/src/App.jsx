// The chat page: useChat (@ai-sdk/react) on streamwire's /api/chat. The thread is `?chat=<id>`
// (made up when absent), so a reload keeps the conversation, and `resume: true` continues a
// reply that was being written when the page went away.
import { useChat } from "@ai-sdk/react";
import { lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import {
  StreamwireTransport, authFetch, errorWords, loadThread, loadThreads, newChatId, saveLocal,
  savedToken, saveToken, validChatId,
} from "./api.js";
import { Message } from "./Message.jsx";

/** The chat id in the URL (one is made up and put there when absent). */
function urlChatId() {
  const url = new URL(location.href);
  let id = url.searchParams.get("chat");
  if (!validChatId(id)) {
    id = newChatId();
    url.searchParams.set("chat", id);
    history.replaceState(null, "", url);
  }
  return id;
}

function openChat(id) {
  const url = new URL(location.href);
  url.searchParams.set("chat", id);
  history.pushState(null, "", url);
  dispatchEvent(new PopStateEvent("popstate"));
}

export function App() {
  const [chatId, setChatId] = useState(urlChatId);
  const [thread, setThread] = useState(null); // {messages, notes} once loaded
  const [threads, setThreads] = useState(null); // null: the server lists no threads
  const [tokenVersion, setTokenVersion] = useState(0);

  useEffect(() => {
    const onPop = () => setChatId(urlChatId());
    addEventListener("popstate", onPop);
    return () => removeEventListener("popstate", onPop);
  }, []);

  useEffect(() => {
    let current = true;
    setThread(null);
    loadThread(chatId).then((loaded) => current && setThread(loaded));
    return () => { current = false; };
  }, [chatId]);

  const refreshThreads = useCallback(() => { loadThreads().then(setThreads); }, []);
  useEffect(refreshThreads, [refreshThreads, tokenVersion]);

  return (
    <div className={`layout ${threads ? "with-sidebar" : ""}`}>
      {threads && <Sidebar threads={threads} chatId={chatId} />}
      <div className="column">
        <header>
          <h1>Chat</h1>
          <button type="button" className="secondary" onClick={() => openChat(newChatId())}>New chat</button>
          <SignIn onChange={() => setTokenVersion((v) => v + 1)} />
        </header>
        {thread
          ? <ChatView key={chatId} chatId={chatId} initial={thread} onReplyEnd={refreshThreads} />
          : <main className="messages"><p className="hint">Loading…</p></main>}
      </div>
    </div>
  );
}

function Sidebar({ threads, chatId }) {
  return (
    <nav className="sidebar" aria-label="Conversations">
      <h2>Conversations</h2>
      {threads.length === 0 && <p className="hint">None yet.</p>}
      <ul>
        {threads.map((t) => {
          const id = t.id || t.chatId;
          return (
            <li key={id}>
              <button type="button" data-chat={id} className={id === chatId ? "current" : ""} onClick={() => openChat(id)}>
                {t.title || t.preview || "Untitled conversation"}
              </button>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}

function SignIn({ onChange }) {
  const [token, setToken] = useState(savedToken);
  const signedIn = !!savedToken();
  return (
    <details className="signin">
      <summary>{signedIn ? "Signed in" : "Sign in"}</summary>
      <form onSubmit={(e) => { e.preventDefault(); saveToken(token.trim()); onChange(); e.currentTarget.parentElement.open = false; }}>
        <label>
          Access token <small>(only if this server asks for one)</small>
          <input type="password" value={token} onChange={(e) => setToken(e.target.value)} autoComplete="off" />
        </label>
        <button type="submit">Save</button>
        {signedIn && <button type="button" className="secondary" onClick={() => { saveToken(""); setToken(""); onChange(); }}>Sign out</button>}
      </form>
    </details>
  );
}

/** Query parameters other than `chat` go to the agent as extra body fields (the demo agent
 *  reads `pace`, the seconds between words). */
function extraBody() {
  const fields = Object.fromEntries(new URLSearchParams(location.search));
  delete fields.chat;
  return fields;
}

function ChatView({ chatId, initial, onReplyEnd }) {
  const [notes, setNotes] = useState(initial.notes);
  const [input, setInput] = useState("");
  const [settled, setSettled] = useState(false); // the resume on mount has had its answer
  const lastAssistant = useRef(undefined);

  const note = useCallback((id, fields) => {
    if (id) setNotes((all) => ({ ...all, [id]: { ...all[id], ...fields } }));
  }, []);

  const transport = useMemo(() => new StreamwireTransport({ body: extraBody }, (chunk, messageId) => {
    const id = messageId || lastAssistant.current;
    if (chunk.type === "abort") note(id, { stopped: true });
    else if (chunk.type === "error") note(id, { errorText: chunk.errorText });
    else if (chunk.type === "finish") note(id, { finished: true });
  }), [note]);

  const chat = useChat({
    id: chatId,
    messages: initial.messages,
    transport,
    resume: true,
    experimental_throttle: 50,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onFinish: ({ message, isAbort }) => {
      if (isAbort && message?.role === "assistant") note(message.id, { stopped: true });
      onReplyEnd();
    },
  });
  const { messages, status, error, sendMessage, regenerate, stop, addToolApprovalResponse } = chat;
  const busy = status === "submitted" || status === "streaming";
  const last = messages[messages.length - 1];
  lastAssistant.current = last?.role === "assistant" ? last.id : undefined;

  useEffect(() => { saveLocal(chatId, messages, notes); }, [chatId, messages, notes]);
  useEffect(() => {
    if (busy) return undefined;
    const timer = setTimeout(() => setSettled(true), settled ? 0 : 1500);
    return () => clearTimeout(timer);
  }, [busy, settled]);

  // what a test (or a curious reader) asks the page
  useEffect(() => {
    window.chatState = () => ({ chatId, status, settled, messages, notes, error: errorWords(error) });
  });

  const bottom = useRef(null);
  useEffect(() => { bottom.current?.scrollIntoView({ block: "end" }); }, [messages]);

  const send = (event) => {
    event.preventDefault();
    const text = input.trim();
    if (!text || busy) return;
    setInput("");
    sendMessage({ text });
  };

  const stopReply = async () => {
    const id = lastAssistant.current;
    let reached = false;
    try {
      // the server stops the run; its reply then ends (`abort`) on this very stream
      reached = (await authFetch(`/api/chat/${encodeURIComponent(chatId)}/stop`, { method: "POST" })).ok;
    } catch {
      // unreachable: at least stop reading
    }
    if (id) note(id, { stopped: true });
    // the stream should end by itself now; stop reading it if it does not
    setTimeout(() => stop(), reached ? 2000 : 0);
  };

  const retry = () => {
    const lastMsg = messages[messages.length - 1];
    regenerate(lastMsg?.role === "assistant" ? { messageId: lastMsg.id } : undefined);
  };

  // an error no message shows (the request itself failed): said here, with Retry
  const shownOnMessage = last?.role === "assistant" && (notes[last.id]?.errorText || last.metadata?.error);
  return (
    <>
      <main className="messages">
        {messages.length === 0 && <p className="hint">Start the conversation below.</p>}
        {messages.map((m, i) => {
          const isLast = i === messages.length - 1;
          const n = notes[m.id] || {};
          const cutOff = m.role === "assistant" && isLast && !busy && settled && !n.finished && !n.stopped && !n.errorText;
          return (
            <Message key={m.id} message={m} note={{ ...n, cutOff }} live={isLast && busy && m.role === "assistant"}
                     retryable={isLast && !busy} onRetry={retry}
                     onApproval={(approvalId, approved) => addToolApprovalResponse({ id: approvalId, approved })} />
          );
        })}
        {status === "submitted" && last?.role === "user" && <div className="status writing">Waiting for the reply…</div>}
        {!busy && !error && settled && last?.role === "user" && (
          <div className="status cut" data-status="unanswered">
            No reply yet. <button type="button" className="retry" onClick={retry}>Retry</button>
          </div>
        )}
        {error && !shownOnMessage && (
          <div className="error" role="alert">
            <span className="error-text">{errorWords(error)}</span>
            <button type="button" className="retry" onClick={retry}>Retry</button>
          </div>
        )}
        <div ref={bottom} />
      </main>
      <form className="composer" onSubmit={send}>
        <textarea id="prompt" rows={1} value={input} placeholder="Write a message…" autoFocus
                  onChange={(e) => setInput(e.target.value)}
                  onKeyDown={(e) => { if (e.key === "Enter" && !e.shiftKey) send(e); }} />
        {busy
          ? <button type="button" id="stop" className="stop" onClick={stopReply}>Stop</button>
          : <button type="submit" id="send" disabled={!input.trim()}>Send</button>}
      </form>
    </>
  );
}

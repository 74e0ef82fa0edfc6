// One UIMessage, part by part (the AI SDK v6 part types): text as Markdown, steps as dividers,
// tool calls as cards, reasoning collapsed, sources as links; data-* parts are the server's
// bookkeeping and stay hidden, except data-error.
import { Markdown } from "./Markdown.jsx";

const TOOL_STATES = {
  "input-streaming": "Preparing",
  "input-available": "Running",
  "approval-requested": "Needs your approval",
  "approval-responded": "Answered",
  "output-available": "Done",
  "output-error": "Failed",
  "output-denied": "Denied",
};

const isTool = (part) => part.type.startsWith("tool-") || part.type === "dynamic-tool";
const isWebUrl = (url) => /^https?:\/\//i.test(url || "");
const shown = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

export function Message({ message, note, live, onApproval, onRetry, retryable }) {
  const steps = message.parts.filter((p) => p.type === "step-start").length;
  const sources = message.parts.filter((p) => p.type === "source-url" && isWebUrl(p.url));
  let step = 0;
  const failed = note.errorText || message.metadata?.error;
  return (
    <article className={`msg ${message.role}`} data-id={message.id} data-role={message.role}>
      {message.parts.map((part, i) => {
        if (part.type === "step-start") {
          step += 1;
          // one step needs no divider; two or more are numbered
          return steps > 1 ? <div key={i} className="step" data-step={step}>Step {step}</div> : null;
        }
        if (part.type === "text") return <Markdown key={i} text={part.text} />;
        if (part.type === "reasoning") {
          return part.text ? (
            <details key={i} className="reasoning">
              <summary>{part.state === "streaming" ? "Thinking…" : "Reasoning"}</summary>
              <p>{part.text}</p>
            </details>
          ) : null;
        }
        if (isTool(part)) return <ToolCard key={i} part={part} onApproval={onApproval} />;
        if (part.type === "source-document") return <div key={i} className="doc">📄 {part.title}</div>;
        if (part.type === "file") return <File key={i} part={part} />;
        if (part.type === "data-error") return <div key={i} className="error">{dataErrorWords(part.data)}</div>;
        return null; // data-progress, data-usage...: the server's, not the reader's
      })}
      {sources.length > 0 && (
        <ul className="sources">
          {sources.map((s) => (
            <li key={s.sourceId || s.url}>
              <a href={s.url} target="_blank" rel="noopener noreferrer">{s.title || s.url}</a>
            </li>
          ))}
        </ul>
      )}
      {message.role === "assistant" && (
        <Status note={note} live={live} failed={failed} retryable={retryable} onRetry={onRetry}
                metadata={message.metadata} />
      )}
    </article>
  );
}

function Status({ note, live, failed, retryable, onRetry, metadata }) {
  if (failed) {
    // Retry is a new reply (regenerate), whatever metadata.error.recoverable says (that one is
    // about resuming the same run)
    return (
      <div className="error" role="alert" data-code={metadata?.error?.code ?? undefined}>
        <span className="error-text">{note.errorText || "This reply failed."}</span>
        {retryable && <button type="button" className="retry" onClick={onRetry}>Retry</button>}
      </div>
    );
  }
  if (note.stopped) return <div className="status stopped" data-status="stopped">Stopped</div>;
  if (live) return <div className="status writing" data-status="writing">Writing…</div>;
  if (note.cutOff) {
    return (
      <div className="status cut" data-status="cut-off">
        This reply was cut off.
        {retryable && <button type="button" className="retry" onClick={onRetry}>Retry</button>}
      </div>
    );
  }
  return null;
}

function ToolCard({ part, onApproval }) {
  const name = part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
  const state = part.state;
  return (
    <div className={`tool ${state}`} data-tool={name} data-state={state}>
      <div className="tool-head">
        <span className="tool-name">{part.title || name}</span>
        <span className="badge">{TOOL_STATES[state] || state}</span>
      </div>
      {part.input !== undefined && (
        <>
          <div className="label">Input</div>
          <pre className="tool-input">{shown(part.input)}</pre>
        </>
      )}
      {state === "output-available" && (
        <>
          <div className="label">Output{part.preliminary ? " (so far)" : ""}</div>
          <pre className="tool-output">{shown(part.output)}</pre>
        </>
      )}
      {state === "output-error" && <div className="tool-error">{part.errorText}</div>}
      {state === "output-denied" && (
        <div className="tool-note">Not run: denied{part.approval?.reason ? ` (${part.approval.reason})` : ""}.</div>
      )}
      {state === "approval-requested" && (
        <div className="approval">
          <button type="button" className="approve" onClick={() => onApproval(part.approval.id, true)}>Approve</button>
          <button type="button" className="deny" onClick={() => onApproval(part.approval.id, false)}>Deny</button>
        </div>
      )}
      {state === "approval-responded" && (
        <div className="tool-note">{part.approval?.approved ? "Approved: waiting for the result…" : "Denied."}</div>
      )}
    </div>
  );
}

function File({ part }) {
  const safe = isWebUrl(part.url) || /^data:image\//.test(part.url || "");
  if (!safe) return null;
  if ((part.mediaType || "").startsWith("image/")) return <img className="file" src={part.url} alt={part.filename || ""} />;
  return <a className="file" href={part.url} target="_blank" rel="noopener noreferrer">{part.filename || "Attachment"}</a>;
}

function dataErrorWords(data) {
  if (data && typeof data === "object") return data.errorText || data.message || "Something went wrong.";
  return typeof data === "string" ? data : "Something went wrong.";
}

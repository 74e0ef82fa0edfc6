// streamwire's operator page (/ui): polls /ui/state, reads a reply's SSE, stops runs.
// No dependency, no build step; served by streamwire itself.
"use strict";
(function () {
  const BASE = document.body.dataset.base || "";
  const KEY = "streamwire.token";
  const POLL_MS = 1000;
  const $ = (id) => document.getElementById(id);
  let watching = null;  // {id, abort: AbortController}
  let timer = null;

  function token() { return sessionStorage.getItem(KEY) || ""; }
  function headers(extra) {
    const h = Object.assign({Accept: "application/json"}, extra || {});
    if (token()) h.Authorization = "Bearer " + token();
    return h;
  }
  function pill(text) {
    const span = document.createElement("span");
    span.className = "pill " + text;
    span.textContent = text;
    return span;
  }
  function cell(row, content, cls) {
    const td = row.insertCell();
    if (cls) td.className = cls;
    if (content instanceof Node) td.append(content); else td.textContent = String(content);
    if (cls === "id") td.title = String(content);
    return td;
  }
  function button(label, cls, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    if (cls) b.className = cls;
    b.addEventListener("click", onClick);
    return b;
  }

  // ---- the token -----------------------------------------------------------------------------
  function askForToken(message) {
    $("sign-in").hidden = false;
    $("sign-in-error").textContent = message || "";
    $("live").textContent = "needs the token";
    $("live").className = "pill offline";
    document.body.dataset.state = "sign-in";
  }
  $("sign-in").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("token").value.trim());
    $("token").value = "";
    $("sign-in").hidden = true;
    poll();
  });
  $("forget").addEventListener("click", () => { sessionStorage.removeItem(KEY); poll(); });

  // ---- the lists -----------------------------------------------------------------------------
  async function poll() {
    clearTimeout(timer);
    try {
      const response = await fetch(BASE + "/ui/state", {headers: headers(), cache: "no-store"});
      if (response.status === 401 || response.status === 403) {
        const body = await response.json().catch(() => ({}));
        askForToken(token() ? "That token was refused: " + (body.error || response.status) : "");
        return;  // polling starts again once a token is given
      }
      if (!response.ok) throw new Error("GET /ui/state: HTTP " + response.status);
      render(await response.json());
      $("error").textContent = "";
      $("live").textContent = "live";
      $("live").className = "pill active";
    } catch (err) {
      $("live").textContent = "offline";
      $("live").className = "pill offline";
      $("error").textContent = String(err.message || err);
    }
    timer = setTimeout(poll, POLL_MS);
  }

  function render(state) {
    $("sign-in").hidden = true;
    $("forget").hidden = !token();
    const runs = state.streams.filter((s) => s.run);
    const plain = state.streams.filter((s) => !s.run);
    const running = runs.filter((s) => s.run.status === "running").length;
    const n = (count, word) => count + " " + word + (count === 1 ? "" : "s");
    $("summary").textContent = `${n(runs.length, "run")} (${running} running), ` +
      `${n(plain.length, "other stream")}, ${n(state.connections, "SSE connection")}` +
      (state.agents.length ? "; agents: " + state.agents.join(", ") : "");
    const runBody = $("runs").tBodies[0];
    runBody.replaceChildren();
    for (const s of runs) {
      const row = runBody.insertRow();
      row.dataset.run = s.run.runId;
      row.dataset.status = s.run.status;
      if (watching && watching.id === s.streamId) row.className = "watched";
      cell(row, s.run.runId, "id");
      cell(row, s.run.agent);
      cell(row, pill(s.run.status));
      cell(row, s.head, "num");
      cell(row, s.readers, "num");
      const actions = cell(row, "");
      actions.append(button("Watch", "", () => watch(s.run.runId, "/runs/")));
      if (s.run.status === "running") {
        actions.append(" ", button("Stop", "stop", (e) => stop(s.run.runId, e.target)));
      }
    }
    $("no-runs").hidden = runs.length > 0;
    const streamBody = $("streams").tBodies[0];
    streamBody.replaceChildren();
    for (const s of plain) {
      const row = streamBody.insertRow();
      row.dataset.stream = s.streamId;
      row.dataset.status = s.status;
      cell(row, s.streamId, "id");
      cell(row, pill(s.status + (s.code ? " " + s.code : "")));
      cell(row, s.head, "num");
      cell(row, s.readers, "num");
      cell(row, "").append(button("Watch", "", () => watch(s.streamId, "/streams/")));
    }
    $("no-streams").hidden = plain.length > 0;
    $("more").hidden = !state.more;
    document.body.dataset.state = "listed";
  }

  async function stop(runId, b) {
    b.disabled = true;
    try {
      const response = await fetch(BASE + "/runs/" + encodeURIComponent(runId) + "/stop",
                                   {method: "POST", headers: headers()});
      if (response.status === 401 || response.status === 403) { askForToken("Stopping needs the token."); return; }
      if (!response.ok) throw new Error("stop: HTTP " + response.status);
    } catch (err) {
      $("error").textContent = String(err.message || err);
    }
    poll();
  }

  // ---- a reply, live ----------------------------------------------------------------------------
  function watch(id, prefix) {
    if (watching) watching.abort.abort();
    const abort = new AbortController();
    watching = {id, abort};
    $("reply").hidden = false;
    $("reply-id").textContent = id;
    $("reply-text").textContent = "";
    $("reply-events").textContent = "";
    setStatus("reading");
    read(BASE + prefix + encodeURIComponent(id) + "/sse", abort.signal).catch((err) => {
      if (err.name !== "AbortError") setStatus("error: " + (err.message || err));
    });
  }
  function setStatus(text) {
    $("reply-status").textContent = text;
    $("reply-status").className = "pill " + text.split(" ")[0];
    $("reply").dataset.status = text;
  }
  $("reply-close").addEventListener("click", () => {
    if (watching) watching.abort.abort();
    watching = null;
    $("reply").hidden = true;
  });

  const counts = {};
  function onFrame(event, data) {
    let json = null;
    try { json = JSON.parse(data); } catch (_) { /* a marker's text */ }
    if (event === "chunk" && json && json.chunk !== undefined) {
      const inner = json.chunk;
      const name = inner && typeof inner === "object" && inner.event ? inner.event : "chunk";
      counts[name] = (counts[name] || 0) + 1;
      const payload = inner && inner.data;
      if (name === "chunk" && payload && typeof payload.chunk === "string") {
        $("reply-text").textContent += payload.chunk;
      } else if (!inner || typeof inner !== "object" || !inner.event) {
        $("reply-text").textContent += (typeof inner === "string" ? inner : JSON.stringify(inner)) + "\n";
      }
      $("reply-events").textContent = Object.entries(counts).map(([k, v]) => `${k} ×${v}`).join(", ");
      $("reply-text").scrollTop = $("reply-text").scrollHeight;
    } else if (event === "end") {
      setStatus(json && json.status ? json.status : "ended");
    } else if (event === "fail") {
      setStatus("failed" + (json && json.errorDetail && json.errorDetail.code ? " " + json.errorDetail.code : ""));
    } else if (event === "truncated") {
      setStatus("truncated");
    }
  }

  async function read(url, signal) {
    for (const k of Object.keys(counts)) delete counts[k];
    const response = await fetch(url, {headers: headers({Accept: "text/event-stream"}), signal});
    if (!response.ok) throw new Error("HTTP " + response.status);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "", event = "message", data = [];
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, cut);
        buffer = buffer.slice(cut + (buffer.startsWith("\r\n", cut) ? 2 : 1));
        if (line === "") {
          if (data.length) onFrame(event, data.join("\n"));
          event = "message";
          data = [];
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let rest = colon < 0 ? "" : line.slice(colon + 1);
          if (rest.startsWith(" ")) rest = rest.slice(1);
          if (field === "event") event = rest;
          else if (field === "data") data.push(rest);
        }
      }
    }
  }

  poll();
})();

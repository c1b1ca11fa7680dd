// The pages' shared code: the API with the token, DOM building (text only: plans,
// answers and tool outputs are untrusted, so nothing from the API is ever parsed as
// HTML), times, and server-sent events read with fetch (so the token goes in a header,
// never in a URL).
"use strict";

const TOKEN_KEY = "planvm.token";

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const t = token();
  if (t) h["Authorization"] = "Bearer " + t;
  return h;
}

// Asks for the service's token once a request was refused for want of it.
function askToken() {
  if (document.getElementById("token-form")) return;
  const input = el("input", { type: "password", id: "token", placeholder: "token" });
  const form = el("form", { id: "token-form", class: "banner" },
    "This service needs a token: ", input, " ", el("button", { class: "primary" }, "Use it"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value);
    location.reload();
  });
  document.querySelector("main").prepend(form);
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || ("HTTP " + status));
    this.status = status;
    this.body = body;
  }
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.body ? { "content-type": "application/json" } : {});
  const res = await fetch(path, opts);
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = text; }
  if (res.status === 401) askToken();
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

// An element with attributes and children (strings become text nodes).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// Replaces `node`'s children with `children`, those null or false left out (as `el` does;
// `replaceChildren` would show them as text).
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function badge(status) {
  return el("span", { class: "badge " + status }, status);
}

function runLink(id) {
  return el("a", { href: "/runs/" + encodeURIComponent(id), class: "mono" }, id);
}

function when(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function duration(ms) {
  if (ms === null || ms === undefined || ms < 0) return "";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}

// A value as text: strings as they are (but a string that holds a JSON object or array,
// as tools and LLMs often return, as that JSON, indented, unless reading it could change
// it: a number of 16 digits or more would lose its last ones), anything else as indented
// JSON.
function shown(v) {
  if (typeof v === "string") {
    const t = v.trim();
    if (((t.startsWith("{") && t.endsWith("}")) || (t.startsWith("[") && t.endsWith("]"))) &&
        !/\d{16}/.test(t)) {
      try { return JSON.stringify(JSON.parse(t), null, 2); } catch (_) { /* text after all */ }
    }
    return v;
  }
  return v === undefined ? "" : JSON.stringify(v, null, 2);
}

// Lines and characters past which a value is folded: its head shows, the rest a click away.
const FOLD_LINES = 24, FOLD_CHARS = 3000;

// A value in a <pre>, folded when long; `verbatim`: a string exactly as it is.
function valueBox(v, attrs, verbatim) {
  const text = verbatim && typeof v === "string" ? v : shown(v);
  const lines = text.split("\n");
  if (lines.length <= FOLD_LINES && text.length <= FOLD_CHARS) return el("pre", attrs || {}, text);
  const head = lines.slice(0, 12).join("\n").slice(0, 1200);
  const box = el("pre", Object.assign({ class: "folded" }, attrs || {}), head + "\n…");
  const more = el("button", { class: "link" }, `show all (${lines.length} lines, ${text.length} characters)`);
  more.addEventListener("click", () => {
    const open = box.classList.toggle("open");
    box.textContent = open ? text : head + "\n…";
    more.textContent = open ? "fold" : `show all (${lines.length} lines, ${text.length} characters)`;
  });
  return el("div", {}, box, more);
}

// Reads the server-sent events of `path`, calling `onEvent(type, data, id)` for each, and
// `onOpen()` each time a connection is made. A connection that drops or ends (the service
// stopped, or restarted) is made again, from the last id, a little later each time one
// brought no event (up to 5 s), until `stop()`: whoever follows reads the state again on
// `onOpen`, so that what happened while no connection was up shows.
function follow(path, onEvent, onOpen) {
  let last = null;
  let stopped = false;
  let wait = 500;
  const controller = new AbortController();
  const pause = async () => {
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(wait * 2, 5000);
  };
  (async () => {
    while (!stopped) {
      try {
        const h = headers(last ? { "Last-Event-ID": last } : {});
        const res = await fetch(path, { headers: h, signal: controller.signal });
        if (res.status === 401) { askToken(); return; }
        if (res.status === 404) return;
        if (!res.ok) { await pause(); continue; }
        if (onOpen) onOpen();
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            let type = "message", data = "", id = null;
            for (const line of block.split("\n")) {
              if (line.startsWith("event:")) type = line.slice(6).trim();
              else if (line.startsWith("data:")) data += line.slice(5).trim();
              else if (line.startsWith("id:")) id = line.slice(3).trim();
            }
            if (id !== null) last = id;
            if (data) {
              // NB: the wait grows only over connections that bring nothing.
              wait = 500;
              let parsed = null;
              try { parsed = JSON.parse(data); } catch (_) { parsed = data; }
              onEvent(type, parsed, id);
            }
          }
        }
      } catch (e) {
        if (stopped) return;
      }
      if (!stopped) await pause();
    }
  })();
  return () => { stopped = true; controller.abort(); };
}

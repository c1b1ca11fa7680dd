// `/`: the runs, newest first, filtered by status; refreshed while any goes on. Below
// them, the evaluations (`planvm eval --store`), each case's verdict a click away.
"use strict";

const PAGE = 100;
const state = { runs: [], more: false, timer: null };

function row(r) {
  const end = ["ok", "failed", "needs_input"].includes(r.status) ? r.updated_at : Date.now();
  const what = r.goal
    ? el("span", {}, el("span", { class: "muted" }, "goal: "), r.goal)
    : el("span", {}, el("span", { class: "muted" }, "plan: "), r.plan);
  const branch = r.parent
    ? el("span", { class: "muted" }, " · branch of ", runLink(r.parent), " at " + r.branch_seq)
    : null;
  return el("tr", { "data-id": r.id },
    el("td", {}, runLink(r.id)),
    el("td", {}, badge(r.status)),
    el("td", { class: "what", title: r.goal || r.plan }, what, branch),
    el("td", { class: "muted" }, when(r.created_at)),
    el("td", {}, duration(end - r.created_at)),
    el("td", {}, String(r.steps)),
    el("td", {}, String(r.tool_calls)));
}

async function load(before) {
  const status = document.getElementById("status").value;
  const text = document.getElementById("q").value.trim();
  const q = new URLSearchParams({ limit: String(PAGE) });
  if (status) q.set("status", status);
  if (text) q.set("q", text);
  if (before) q.set("before", before);
  const body = await api("/v1/runs?" + q);
  state.runs = before ? state.runs.concat(body.runs) : body.runs;
  state.more = body.runs.length === PAGE;
  render();
}

function render() {
  const tbody = document.getElementById("runs");
  fill(tbody, ...state.runs.map(row));
  if (state.runs.length === 0) {
    const filtered = document.getElementById("q").value.trim() || document.getElementById("status").value;
    tbody.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, filtered ? "No run matches." : "No runs yet.")));
  }
  document.getElementById("more").hidden = !state.more;
  const going = state.runs.some((r) => ["running", "planning"].includes(r.status));
  document.getElementById("live").textContent = going ? "live" : "";
  clearTimeout(state.timer);
  // NB: refreshed while runs go on; the first page only, so that paging stays put.
  state.timer = setTimeout(() => { if (state.runs.length <= PAGE) load().catch(() => {}); },
    going ? 1000 : 5000);
}

document.getElementById("status").addEventListener("change", () => load().catch(show));
let typing = null;
document.getElementById("q").addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(() => load().catch(show), 250);
});
document.getElementById("more").addEventListener("click", () => {
  const last = state.runs[state.runs.length - 1];
  load(last && last.id).catch(show);
});
for (const radio of document.querySelectorAll("input[name=kind]")) {
  radio.addEventListener("change", () => {
    document.getElementById("text").placeholder = radio.value === "goal"
      ? "What should the answer achieve?"
      : '[{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "hello"}}]';
  });
}
document.getElementById("new").addEventListener("submit", async (e) => {
  e.preventDefault();
  const kind = document.querySelector("input[name=kind]:checked").value;
  const text = document.getElementById("text").value;
  const out = document.getElementById("submit-error");
  out.textContent = "";
  try {
    const body = kind === "goal" ? { goal: text } : { plan: text };
    const run = await api("/v1/runs", { method: "POST", body: JSON.stringify(body) });
    location.href = "/runs/" + encodeURIComponent(run.id);
  } catch (err) {
    const diags = (err.body && err.body.diagnostics) || [];
    out.textContent = err.message + diags.map((d) => `\n${d.code}: ${d.message}`).join("");
  }
});

function show(err) {
  document.getElementById("live").textContent = "error: " + err.message;
}

// The evaluations, newest first; the card stays hidden when there is none.
async function loadEvals() {
  const { evals } = await api("/v1/evals");
  document.getElementById("evals-card").hidden = evals.length === 0;
  document.getElementById("evals").replaceChildren(...evals.map((e) => {
    const open = el("a", { href: "#", class: "mono", onclick: (ev) => { ev.preventDefault(); showEval(e.id).catch(show); } }, e.id);
    const rate = e.cases ? " (" + Math.round(100 * e.passed / e.cases) + "%)" : "";
    return el("tr", { "data-eval": e.id },
      el("td", {}, open, e.summary ? null : el("span", { class: "muted" }, " running")),
      el("td", { class: "mono" }, e.dataset),
      el("td", { class: "muted" }, when(e.created_at)),
      el("td", {}, e.passed + " of " + e.cases + rate));
  }));
}

// One evaluation's cases: verdict, reason, and the run that answered.
async function showEval(evalId) {
  const { cases } = await api("/v1/evals/" + encodeURIComponent(evalId));
  document.getElementById("eval-cases").replaceChildren(
    el("h3", {}, "Cases of " + evalId),
    el("table", { id: "eval-case-table" },
      el("thead", {}, el("tr", {}, el("th", {}, "case"), el("th", {}, "verdict"), el("th", {}, "score"), el("th", {}, "reason"), el("th", {}, "run"))),
      el("tbody", {}, cases.map((c) => {
        const runs = c.runs || [];
        return el("tr", { "data-case": c.case },
          el("td", { class: "mono" }, c.case),
          el("td", {}, badge(c.verdict === "pass" ? "ok" : "failed"), " " + c.verdict),
          el("td", {}, Number(c.score).toFixed(2)),
          el("td", { class: "what", title: c.reason }, c.reason),
          el("td", {}, runs.length ? runLink(runs[runs.length - 1]) : el("span", { class: "muted" }, "none")));
      }))));
}

load().catch(show);
loadEvals().catch(show);

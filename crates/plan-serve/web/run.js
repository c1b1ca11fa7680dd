// `/runs/{id}`: one run (or goal): its answer, its plan as steps with their status, a
// step's variables before and after and its call, the calls on a timeline, the plan's
// versions and branches, and a branch from a step with its preview. Live while it goes on.
"use strict";

const id = decodeURIComponent(location.pathname.replace(/^\/runs\//, ""));
const page = { shown: null, plan: null, selected: null, refresh: null, stop: null, question: null };

// The instructions of a source that is a JSON array (the service does not read a large
// plan for the page), else null: the steps then come from the journal alone.
function arrayIn(source) {
  try {
    const v = source ? JSON.parse(source) : null;
    return Array.isArray(v) ? v : null;
  } catch (_) {
    return null;
  }
}

function summaryOf(instr) {
  const p = instr.parameters || {};
  switch (instr.type) {
    case "calling": {
      const out = p.output_vars ? " → " + [].concat(p.output_vars).join(", ") : "";
      return (p.tool_name || "?") + "(" + Object.keys(p.tool_params || {}).join(", ") + ")" + out;
    }
    case "assign": return Object.keys(p).join(", ") + " ←";
    case "jmp": return p.condition_prompt
      ? "if " + p.condition_prompt.slice(0, 80) + " → " + p.jump_if_true + " else " + p.jump_if_false
      : "→ " + p.target_seq;
    case "reasoning": return (p.chain_of_thoughts || "").slice(0, 100);
    default: return JSON.stringify(p).slice(0, 100);
  }
}

function stepStatus(seq) {
  const { run, steps, calls } = page.shown;
  if (run && run.error && run.error.seq_no === seq) return "failed";
  if (run && run.status === "needs_input" && run.question && run.question.seq_no === seq) return "waiting";
  const going = run && ["running", "interrupted"].includes(run.status);
  if (going && calls.some((c) => c.seq_no === seq && c.state === "inflight")) return "inflight";
  if (steps.some((s) => s.seq_no === seq)) return "done";
  // NB: a branch starts at its own instruction `branch_seq`: those before it are the
  // parent's, their results in the variables the branch started with.
  if (run && run.parent && page.plan) {
    const start = page.plan.findIndex((i) => i.seq_no === run.branch_seq);
    const here = page.plan.findIndex((i) => i.seq_no === seq);
    if (start > 0 && here >= 0 && here < start) return "inherited";
  }
  return "unreached";
}

function renderSummary() {
  const { run, goal, children } = page.shown;
  const box = document.getElementById("summary");
  const parts = [];
  const status = run ? run.status : (goal.status === "open" ? "planning" : goal.status);
  parts.push(el("div", { class: "toolbar" },
    el("h2", { style: "margin:0" }, "Run ", el("span", { class: "mono" }, id)),
    badge(status),
    run ? el("span", { class: "muted", id: "run-facts" }, when(run.created_at) + " · " + run.steps + " steps · " + run.tool_calls + " calls · " +
      duration((["ok", "failed", "needs_input"].includes(run.status) ? run.updated_at : Date.now()) - run.created_at) +
      (run.usage ? " · " + run.usage.input_tokens + " tokens in, " + run.usage.output_tokens + " out" : "")) : null));
  if (goal) {
    parts.push(el("div", {}, el("span", { class: "muted" }, "Goal: "), el("strong", {}, goal.goal),
      " ", badge(goal.status)));
    if (goal.status === "answered") {
      parts.push(el("div", { style: "margin-top:8px" }, el("div", { class: "muted" }, "Answer"),
        el("div", { class: "answer", id: "answer" }, shown(goal.answer))));
    } else if (goal.error) {
      parts.push(el("div", { class: "error", style: "margin-top:8px" }, goal.error.code + ": " + goal.error.message));
    } else if (!run) {
      parts.push(el("p", { class: "muted" }, "The planner is writing the plan…"));
    }
  }
  if (run && !goal) {
    if (run.status === "ok") {
      parts.push(el("div", { style: "margin-top:8px" }, el("div", { class: "muted" }, "Final answer"),
        el("div", { class: "answer", id: "answer" }, shown(run.final_answer))));
    }
  }
  if (run && run.status === "needs_input" && run.question) {
    // NB: the same question keeps its box across refreshes: what the person typed, and why
    // an answer was refused, stay.
    const key = JSON.stringify(run.question);
    if (!page.question || page.question.key !== key) page.question = { key, node: questionBox(run.question) };
    parts.push(page.question.node);
  }
  if (run && run.error) {
    parts.push(el("div", { class: "error", style: "margin-top:8px" },
      (run.error.code || "") + (run.error.seq_no !== undefined && run.error.seq_no !== null ? " at seq_no " + run.error.seq_no : "") + ": " + run.error.message));
  }
  if (run && run.parent) {
    parts.push(el("div", { class: "muted", style: "margin-top:6px" }, "Branch of ", runLink(run.parent), " at seq_no " + run.branch_seq));
  }
  if (children && children.length) {
    parts.push(el("div", { class: "list-inline", style: "margin-top:6px" },
      el("span", { class: "muted" }, "Branches:"), children.map(runLink)));
  }
  if (page.shown.eval) {
    const e = page.shown.eval;
    parts.push(el("div", { id: "eval", style: "margin-top:8px" },
      el("span", { class: "muted" }, "Evaluation " + e.eval + ", case " + e.case + ": "),
      badge(e.verdict), " score " + Number(e.score).toFixed(2), e.reason ? " · " + e.reason : ""));
  }
  if (run) parts.push(feedbackBox(page.shown.feedback));
  fill(box, ...parts);
}

function renderSteps() {
  const list = document.getElementById("steps");
  const { steps } = page.shown;
  let items = page.plan;
  if (!items) {
    const seen = new Map();
    for (const s of steps) if (!seen.has(s.seq_no)) seen.set(s.seq_no, { seq_no: s.seq_no, type: s.op, parameters: {} });
    items = [...seen.values()];
  }
  fill(list, ...items.map((instr) => {
    const status = stepStatus(instr.seq_no);
    const li = el("li", { "data-seq": instr.seq_no, class: instr.seq_no === page.selected ? "selected" : "" },
      el("span", { class: "seq" }, String(instr.seq_no)),
      el("span", { class: "kind" }, instr.type),
      el("span", { class: "sum", title: summaryOf(instr) }, summaryOf(instr)),
      badge(status));
    li.addEventListener("click", () => select(instr.seq_no));
    return li;
  }));
  if (items.length === 0) list.append(el("li", { class: "muted" }, "No steps yet."));
  // NB: a goal's plan is the planner's whole reply: what the reader made of it is above,
  // the reply itself a click away.
  const read = page.shown.plan;
  const source = page.shown.source;
  const raw = document.getElementById("plan-source");
  const open = raw.querySelector("details") && raw.querySelector("details").open;
  fill(raw,
    read && read.repairs.length ? el("div", { class: "muted repairs" }, "Read from the reply: ",
      read.repairs.map((r) => r.code + " " + r.message).join("; ")) : null,
    source ? el("details", { class: "raw", open: open || null },
      el("summary", { class: "muted" }, page.shown.goal ? "the planner's reply as it came" : "the plan as submitted"),
      valueBox(source, {}, true)) : null);
}

// The variables just before step `step` (the number of the instruction executed), from
// the run's presets and the writes of the steps before it.
function variablesBefore(step) {
  const vars = Object.assign({}, (page.shown.run && page.shown.run.presets) || {});
  for (const s of page.shown.steps) {
    if (s.step >= step) break;
    Object.assign(vars, s.writes || {});
  }
  return vars;
}

function varsTable(vars, changed) {
  const names = Object.keys(vars);
  if (names.length === 0) return el("p", { class: "muted" }, "none");
  return el("div", { class: "kv" }, names.flatMap((n) => [
    el("div", { class: "mono" }, (changed && changed.has(n) ? "● " : "") + n),
    valueBox(vars[n]),
  ]));
}

function select(seq) {
  page.selected = seq;
  renderSteps();
  renderDetail();
}

function renderDetail() {
  const box = document.getElementById("detail");
  const seq = page.selected;
  if (seq === null) return;
  const { steps, calls } = page.shown;
  const instr = (page.plan || []).find((i) => i.seq_no === seq);
  const runs = steps.filter((s) => s.seq_no === seq);
  const parts = [el("h2", {}, "Step ", el("span", { class: "mono" }, String(seq)), " ", badge(stepStatus(seq)))];
  if (instr) parts.push(valueBox(instr));
  const own = calls.filter((c) => c.seq_no === seq);
  for (const c of own) {
    parts.push(el("h2", { style: "margin-top:12px" }, "Call ", el("span", { class: "mono" }, c.tool), " ", badge(c.state)));
    parts.push(el("div", { class: "kv" },
      el("div", {}, "arguments"), valueBox(c.args),
      el("div", {}, c.error ? "error" : "output"), c.error ? el("pre", { class: "error" }, c.error) : valueBox(c.output),
      el("div", {}, "latency"), el("div", {}, c.latency_ms !== null && c.latency_ms !== undefined ? duration(c.latency_ms) : "—"),
      el("div", {}, "attempts"), el("div", {}, ["inflight", "cancelled"].includes(c.state) ? "—" : String(c.attempts || 1)),
      el("div", {}, "sent"), el("div", {}, when(c.sent_at))));
  }
  if (runs.length > 0) {
    const first = runs[0];
    const before = variablesBefore(first.step);
    const after = Object.assign({}, before, first.writes || {});
    parts.push(el("h2", { style: "margin-top:12px" }, "Variables before"), varsTable(before));
    parts.push(el("h2", { style: "margin-top:12px" }, "Variables after"), varsTable(after, new Set(Object.keys(first.writes || {}))));
    if (runs.length > 1) parts.push(el("p", { class: "muted" }, "Executed " + runs.length + " times (a loop); the first is shown."));
    if (page.shown.run) {
      parts.push(el("div", { class: "toolbar", style: "margin-top:12px" },
        el("button", { id: "branch-here", onclick: () => openBranch(seq) }, "Branch from this step")));
    }
  } else {
    parts.push(el("p", { class: "muted" }, "Not executed."));
  }
  fill(box, ...parts);
}

function renderTimeline() {
  const box = document.getElementById("timeline");
  const calls = page.shown.calls.filter((c) => c.sent_at);
  if (calls.length === 0) {
    fill(box, el("p", { class: "muted" }, "No calls."));
    return;
  }
  const now = Date.now();
  const end = (c) => c.latency_ms !== null && c.latency_ms !== undefined ? c.sent_at + c.latency_ms : now;
  const t0 = Math.min(...calls.map((c) => c.sent_at));
  const t1 = Math.max(...calls.map(end), t0 + 1);
  const span = t1 - t0;
  fill(box,
    el("div", { class: "muted", style: "margin-bottom:4px" }, "0 – " + duration(span)),
    ...calls.map((c) => {
      const left = ((c.sent_at - t0) / span) * 100;
      const width = Math.max(((end(c) - c.sent_at) / span) * 100, 0.3);
      const cls = c.error || c.state === "cancelled" ? "failed" : (c.state === "inflight" ? "" : "ok");
      return el("div", { class: "tl-row", title: `${c.tool} · ${duration(end(c) - c.sent_at)}` },
        el("span", { class: "tl-label" }, (c.seq_no ?? "?") + " " + c.tool),
        el("div", { class: "tl-track" },
          el("div", { class: "tl-bar " + cls, style: `left:${left}%;width:${width}%` })));
    }));
}

function openBranch(seq) {
  const box = document.getElementById("branch");
  box.hidden = false;
  document.getElementById("branch-at").value = seq;
  const area = document.getElementById("branch-plan");
  if (!area.value) area.value = page.plan ? JSON.stringify(page.plan, null, 2) : (page.shown.source || "");
  document.getElementById("preview-out").replaceChildren();
  box.scrollIntoView({ behavior: "smooth" });
}

function branchBody() {
  return JSON.stringify({
    at: Number(document.getElementById("branch-at").value),
    plan: document.getElementById("branch-plan").value,
  });
}

// The question a run stopped at, with a box to answer it (and a button per choice).
function questionBox(q) {
  const input = el("input", { type: "text", id: "input-text", placeholder: "Your answer", style: "flex:1 1 320px" });
  const error = el("span", { class: "error", id: "input-error" });
  const send = async (text) => {
    error.textContent = "";
    try {
      await api(`/v1/runs/${encodeURIComponent(id)}/input`, { method: "POST", body: JSON.stringify({ text }) });
      await load();
    } catch (err) {
      error.textContent = err.message;
    }
  };
  const choices = q.choices || [];
  return el("div", { class: "banner question", id: "question", style: "margin-top:8px" },
    el("div", { class: "muted" }, "The run asks" + (q.seq_no !== null && q.seq_no !== undefined ? " (seq_no " + q.seq_no + ")" : "")),
    el("div", { class: "answer", id: "question-text" }, q.question),
    choices.length ? el("div", { class: "toolbar", style: "margin:8px 0 0" },
      choices.map((c) => el("button", { class: "choice", onclick: () => send(c) }, c))) : null,
    el("form", { class: "toolbar", style: "margin:8px 0 0", onsubmit: (e) => { e.preventDefault(); send(input.value); } },
      input, el("button", { class: "primary", type: "submit", id: "send-input" }, "Answer"), error));
}

// A person's verdict on the run: shown, and given or changed with a note.
function feedbackBox(given) {
  const note = el("input", { type: "text", id: "feedback-note", placeholder: "why (optional)", style: "flex:1 1 240px",
    value: (given && given.note) || "" });
  const error = el("span", { class: "error", id: "feedback-error" });
  const send = async (verdict) => {
    error.textContent = "";
    try {
      await api(`/v1/runs/${encodeURIComponent(id)}/feedback`, { method: "POST",
        body: JSON.stringify(note.value.trim() ? { verdict, note: note.value } : { verdict }) });
      await load();
    } catch (err) {
      error.textContent = err.message;
    }
  };
  return el("div", { class: "toolbar", id: "feedback", style: "margin:8px 0 0" },
    el("span", { class: "muted" }, "Your verdict:"),
    given ? el("span", { id: "feedback-given" }, badge(given.verdict === "good" ? "ok" : "failed"), " " + given.verdict) : null,
    el("button", { id: "feedback-good", onclick: () => send("good") }, "good"),
    el("button", { id: "feedback-bad", onclick: () => send("bad") }, "bad"),
    note, error);
}

function showBranchError(err) {
  const diags = (err.body && err.body.diagnostics) || [];
  document.getElementById("branch-error").textContent =
    err.message + diags.map((d) => `\n${d.code}${d.seq_no !== null && d.seq_no !== undefined ? " (seq_no " + d.seq_no + ")" : ""}: ${d.message}`).join("");
}

document.getElementById("preview").addEventListener("click", async () => {
  document.getElementById("branch-error").textContent = "";
  const out = document.getElementById("preview-out");
  try {
    const p = await api(`/v1/runs/${encodeURIComponent(id)}/branch/preview`, { method: "POST", body: branchBody() });
    const items = [];
    items.push(el("h2", { style: "margin-top:12px" }, "Preview"));
    items.push(el("div", { class: "reuse" }, "Reused from this run: the variables ",
      p.variables.length ? p.variables.join(", ") : "(none)",
      p.reused.length ? "; the answers of " + p.reused.map((c) => `${c.tool} (seq_no ${c.seq_no})`).join(", ") : ""));
    items.push(el("div", { class: "call" }, "Called anew: ",
      p.calls.length ? p.calls.map((c) => `${c.tool} (seq_no ${c.seq_no}${c.always ? "" : ", if reached"})`).join(", ") : "nothing"));
    if (p.ignored.length) {
      items.push(el("div", { class: "ignored" }, "Edits before the branch point are not run: seq_no " + p.ignored.join(", ")));
    }
    fill(out, el("div", { id: "preview-result" }, items));
  } catch (err) {
    showBranchError(err);
  }
});

document.getElementById("start-branch").addEventListener("click", async () => {
  document.getElementById("branch-error").textContent = "";
  try {
    const run = await api(`/v1/runs/${encodeURIComponent(id)}/branch`, { method: "POST", body: branchBody() });
    location.href = "/runs/" + encodeURIComponent(run.id);
  } catch (err) {
    showBranchError(err);
  }
});

function going() {
  const { run, goal } = page.shown;
  if (goal && goal.status === "open") return true;
  // NB: a run waiting for an answer is followed too: whoever answers it, the page goes on.
  return run && ["running", "needs_input"].includes(run.status);
}

async function load() {
  const shown = await api("/v1/runs/" + encodeURIComponent(id));
  const goalWas = page.shown && page.shown.goal && page.shown.goal.status;
  page.shown = shown;
  const read = shown.plan ? shown.plan.instructions : arrayIn(shown.source);
  page.plan = read ? read.filter((i) => i && typeof i === "object") : null;
  document.getElementById("crumb").textContent = id;
  document.title = "planvm · " + id;
  renderSummary();
  renderSteps();
  renderTimeline();
  renderVersions();
  if (shown.goal && shown.goal.status !== goalWas) renderConversation().catch(() => {});
  if (page.selected !== null) renderDetail();
  if (going() && !page.stop) {
    // NB: read again on every event, and on every connection: after the service
    // restarted, what happened meanwhile shows without a reload.
    const again = () => {
      clearTimeout(page.refresh);
      page.refresh = setTimeout(() => load().catch(() => {}), 150);
    };
    // NB: while its goal is open, the goal's stream (every run of it, then its end):
    // this run's own ends with it, though a re-plan may follow.
    const goal = page.shown.goal;
    const streamed = goal && goal.status === "open" ? goal.id : id;
    page.stop = follow(`/v1/runs/${encodeURIComponent(streamed)}/events`, again, again);
  } else if (!going() && page.stop) {
    page.stop();
    page.stop = null;
  }
}

load().catch((err) => {
  document.getElementById("summary").replaceChildren(
    el("p", { class: "error" }, err.status === 404 ? "No run " + id + " in this store." : err.message));
});

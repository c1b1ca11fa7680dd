// A goal's plan versions on `/runs/{id}`: each planning round's plan as the compiler read
// it (its reasoning and every step's parameters), its status and why it ended, the
// planner's reply as it came; two versions compared step by step; and the conversation
// the goal is a round of.
"use strict";

const versionsView = { open: new Set(), from: null, to: null, shownFor: null };

function versionLabel(v, i) {
  return "v" + (i + 1) + " · " + v.kind;
}

// Why a version ended as it did: the compiler's errors (sent back for a repair), its run's
// error (sent back for a re-plan), or the planner's failure.
function whyEnded(v) {
  const errors = (v.diagnostics || []).filter((d) => d.severity === "error");
  if (errors.length) {
    return el("ul", { class: "diags" }, errors.map((d) => el("li", {},
      el("span", { class: "mono" }, d.code), d.seq_no !== null && d.seq_no !== undefined ? " (seq_no " + d.seq_no + ")" : "",
      ": " + d.message)));
  }
  if (v.error) {
    return el("div", { class: "error" }, (v.error.code || "") +
      (v.error.seq_no !== null && v.error.seq_no !== undefined ? " at seq_no " + v.error.seq_no : "") + ": " + (v.error.message || ""));
  }
  return null;
}

// A plan's steps with their parameters, its reasoning first.
function planSteps(instructions) {
  const thoughts = instructions.filter((i) => i.type === "reasoning")
    .map((i) => (i.parameters || {}).chain_of_thoughts).filter((t) => typeof t === "string");
  return el("div", {},
    thoughts.length ? el("div", { class: "reasoning" }, el("div", { class: "muted" }, "Reasoning"),
      thoughts.map((t) => el("p", {}, t))) : null,
    el("table", { class: "plan-steps" },
      el("thead", {}, el("tr", {}, el("th", {}, "seq_no"), el("th", {}, "type"), el("th", {}, "parameters"))),
      el("tbody", {}, instructions.map((i) => el("tr", { "data-seq": i.seq_no },
        el("td", { class: "mono" }, String(i.seq_no)),
        el("td", {}, String(i.type)),
        el("td", {}, valueBox(i.parameters || {})))))));
}

// A read plan's instructions that are objects (an LLM may write anything in the array).
function objects(plan) {
  return ((plan && plan.instructions) || []).filter((i) => i && typeof i === "object" && !Array.isArray(i));
}

function versionBox(v, i, current) {
  const open = versionsView.open.has(v.round);
  const box = el("details", { class: "version", "data-round": v.round, open },
    el("summary", {},
      el("strong", {}, versionLabel(v, i)), " ", badge(v.status),
      v.run ? el("span", {}, " ", v.run === current ? el("span", { class: "mono" }, v.run + " (this run)") : runLink(v.run)) : null),
    whyEnded(v),
    v.plan && v.plan.repairs.length ? el("div", { class: "muted repairs" }, "Read from the reply: ",
      v.plan.repairs.map((r) => r.code + " " + r.message).join("; ")) : null,
    v.plan ? planSteps(objects(v.plan)) : el("p", { class: "muted" }, "No plan could be read from the reply."),
    v.reply !== null && v.reply !== undefined ? el("details", { class: "raw" },
      el("summary", { class: "muted" }, "the planner's reply as it came"), valueBox(v.reply, {}, true))
      : v.reply_bytes ? el("p", { class: "muted" }, "The reply (" + v.reply_bytes + " bytes) is too large to show here.") : null);
  box.addEventListener("toggle", () => {
    if (box.open) versionsView.open.add(v.round); else versionsView.open.delete(v.round);
  });
  return box;
}

// Every leaf of `v` by its path (`tool_params.query`), as JSON text.
function leaves(v, path, out) {
  if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) {
    for (const [k, x] of Object.entries(v)) leaves(x, path ? path + "." + k : k, out);
  } else {
    out.set(path || "(value)", JSON.stringify(v));
  }
  return out;
}

// Version `a`'s plan against `b`'s, by seq_no: the steps added, removed and changed (with
// each changed parameter), and how many are the same.
function diffPlans(a, b) {
  const bySeq = (p) => new Map(p.map((i) => [i.seq_no, i]));
  const before = bySeq(a), after = bySeq(b);
  const seqs = [...new Set([...before.keys(), ...after.keys()])].sort((x, y) => x - y);
  const changes = [];
  let same = 0;
  for (const seq of seqs) {
    const x = before.get(seq), y = after.get(seq);
    if (!x) { changes.push({ seq, kind: "added", instr: y }); continue; }
    if (!y) { changes.push({ seq, kind: "removed", instr: x }); continue; }
    const lx = leaves({ type: x.type, parameters: x.parameters }, "", new Map());
    const ly = leaves({ type: y.type, parameters: y.parameters }, "", new Map());
    const fields = [];
    for (const k of new Set([...lx.keys(), ...ly.keys()])) {
      if (lx.get(k) !== ly.get(k)) fields.push({ path: k, from: lx.get(k), to: ly.get(k) });
    }
    if (fields.length) changes.push({ seq, kind: "changed", fields });
    else same += 1;
  }
  return { changes, same };
}

function diffBox(versions) {
  const readable = versions.map((v, i) => ({ v, i })).filter((x) => x.v.plan);
  if (readable.length < 2) return null;
  const last = readable[readable.length - 1].i;
  if (versionsView.to === null || versionsView.to >= versions.length) versionsView.to = last;
  if (versionsView.from === null || versionsView.from >= versions.length) versionsView.from = readable[readable.length - 2].i;
  const pick = (id, value, set) => {
    const s = el("select", { id }, readable.map((x) => el("option", { value: x.i, selected: x.i === value }, versionLabel(x.v, x.i))));
    s.addEventListener("change", () => { set(Number(s.value)); renderVersions(); });
    return s;
  };
  const a = versions[versionsView.from], b = versions[versionsView.to];
  const { changes, same } = diffPlans(objects(a.plan), objects(b.plan));
  const rows = changes.map((c) => {
    if (c.kind !== "changed") {
      return el("li", { class: "diff-" + c.kind, "data-seq": c.seq },
        (c.kind === "added" ? "+ " : "− ") + "seq_no " + c.seq + " " + c.kind + ": " + c.instr.type + " ",
        el("span", { class: "mono" }, JSON.stringify(c.instr.parameters || {})));
    }
    return el("li", { class: "diff-changed", "data-seq": c.seq }, "~ seq_no " + c.seq + " changed",
      el("ul", {}, c.fields.map((f) => el("li", {}, el("span", { class: "mono" }, f.path), ": ",
        el("del", { class: "mono" }, f.from === undefined ? "(none)" : f.from), " → ",
        el("ins", { class: "mono" }, f.to === undefined ? "(none)" : f.to)))));
  });
  return el("div", { id: "diff" },
    el("div", { class: "toolbar", style: "margin:12px 0 6px" }, el("strong", {}, "Compare"),
      pick("diff-from", versionsView.from, (n) => { versionsView.from = n; }), "→",
      pick("diff-to", versionsView.to, (n) => { versionsView.to = n; })),
    changes.length ? el("ul", { class: "diff" }, rows) : el("p", { class: "muted" }, "The two plans are the same."),
    el("div", { class: "muted" }, same + " step" + (same === 1 ? "" : "s") + " the same"));
}

// The goal's versions, in the card `#versions` (hidden for a plan's run).
function renderVersions() {
  const card = document.getElementById("versions");
  const goal = page.shown.goal;
  const versions = (goal && goal.versions) || [];
  card.hidden = versions.length === 0;
  if (!versions.length) return;
  if (versionsView.shownFor !== goal.id) {
    // NB: the version of this run opens first (else the last).
    const here = versions.find((v) => v.run === id) || versions[versions.length - 1];
    versionsView.open = new Set([here.round]);
    versionsView.shownFor = goal.id;
  }
  fill(card, el("h2", {}, "Plan versions ", el("span", { class: "muted" },
    versions.length + " round" + (versions.length === 1 ? "" : "s") + " of planning")),
  ...versions.map((v, i) => versionBox(v, i, id)), diffBox(versions));
}

// The conversation the goal is a round of, in the card `#conversation`.
async function renderConversation() {
  const card = document.getElementById("conversation");
  const goal = page.shown.goal;
  if (!goal || !goal.session) { card.hidden = true; return; }
  const session = await api("/v1/sessions/" + encodeURIComponent(goal.session));
  card.hidden = false;
  fill(card, el("h2", {}, "Conversation ", el("span", { class: "mono muted" }, session.id)),
    session.summary ? el("p", { class: "muted" }, "Earlier rounds, summarized: " + session.summary.summary) : null,
    el("ol", { class: "rounds" }, session.goals.map((g) => {
      const runs = g.runs || [];
      const link = runs.length ? runs[runs.length - 1] : g.id;
      return el("li", { class: g.id === goal.id ? "current" : "", "data-goal": g.id },
        el("div", {}, el("a", { href: "/runs/" + encodeURIComponent(link) }, g.goal), " ", badge(g.status)),
        g.answer !== null && g.answer !== undefined ? valueBox(g.answer, { class: "answer-small" })
          : g.error ? el("div", { class: "error" }, g.error.message || g.error.code) : null);
    })));
}

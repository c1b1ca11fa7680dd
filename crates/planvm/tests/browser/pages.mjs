// The web pages of `planvm serve`, as a person uses them, in headless Chromium driven by
// Playwright: the runs list, a finished run, a step's variables and call, the calls'
// timeline, a branch from a step with an edited plan, previewed and then run to its
// answer, a run that asks a question, answered on its page, a person's verdict on a run,
// an evaluation stored by `planvm eval --store`, its cases and a case's run, a goal's plan
// versions (a repair and a re-plan) compared, a conversation, runs named and filtered,
// and a page that recovers when the service restarts. Everything is real and on
// loopback: a tool server and a planner (below), the service (the
// binary in $PLANVM_BIN) on a fresh store, the browser. Screenshots go to $SHOTS (default:
// a temporary directory) and must not be blank. Exit 0 when every check holds.

import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import zlib from "node:zlib";
import { chromium } from "playwright-core";

const BIN = process.env.PLANVM_BIN || path.resolve("target/debug/planvm");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "planvm-browser-"));
const SHOTS = process.env.SHOTS || dir;

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
  console.log("ok - " + what);
}

// `vector_search` over loopback: answers `found(QUERY)` after 300 ms, so that two calls
// issued together overlap on the timeline; the query `broken` fails (500). On the same
// server, a planner as an OpenAI-compatible chat completion (streamed when asked) that
// answers as LLMs do, prose around a ```json fence (see `plannerReply`).
async function toolServer() {
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const args = JSON.parse(body || "{}");
      if (req.url.endsWith("/chat/completions")) return chat(args, res);
      setTimeout(() => {
        if (args.query === "broken") {
          res.writeHead(500, { "content-type": "text/plain" });
          return res.end("the index is offline");
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ text: `found(${args.query})` }));
      }, 300);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return server;
}

const step = (seq_no, type, parameters) => ({ seq_no, type, parameters });
const fenced = (prose, plan) => prose + "\n\n```json\n" + JSON.stringify(plan, null, 2) + "\n```\n\nThis plan should work.";

// The planner's reply to a conversation: for the goal about gamma, first a plan calling a
// tool that does not exist (the compiler refuses it: a repair), then one whose search
// fails (a re-plan), then one that answers, in Japanese; any other goal is answered at
// once.
function plannerReply(messages) {
  const prompt = messages[0].content;
  const last = messages.length > 1 ? messages[messages.length - 2].content : "";
  // NB: a later round's prompt tells the earlier ones: the newest goal decides.
  if (prompt.includes("Say thanks.") || !prompt.includes("Look up gamma")) {
    return fenced("Nothing to look up.", [step(0, "assign", { final_answer: "You are welcome." })]);
  }
  if (messages.length === 1) {
    return fenced("Here is my plan.", [
      step(0, "reasoning", { chain_of_thoughts: "Search the web for gamma." }),
      step(1, "calling", { tool_name: "web_lookup", tool_params: { q: "gamma" }, output_vars: ["a"] }),
      step(2, "assign", { final_answer: "${a}" })]);
  }
  if (last.includes("web_lookup")) {
    return fenced("Sorry, I will use the search tool.", [
      step(0, "reasoning", { chain_of_thoughts: "Search the index for the broken entry." }),
      step(1, "calling", { tool_name: "vector_search", tool_params: { query: "broken" }, output_vars: ["a"] }),
      step(2, "assign", { final_answer: "${a}" })]);
  }
  return fenced("The index failed on that query; another one.", [
    step(0, "reasoning", { chain_of_thoughts: "Look up gamma in the index, then answer in Japanese." }),
    step(1, "calling", { tool_name: "vector_search", tool_params: { query: "gamma" }, output_vars: ["a"] }),
    step(2, "assign", { final_answer: "${a}：日本語の答えです" })]);
}

function chat(body, res) {
  const text = plannerReply(body.messages);
  if (!body.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(JSON.stringify({ id: "c", object: "chat.completion", model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }] }));
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  const chunk = (delta, finish) => "data: " + JSON.stringify({ id: "c", object: "chat.completion.chunk", model: "m",
    choices: [{ index: 0, delta, finish_reason: finish }] }) + "\n\n";
  for (let i = 0; i < text.length; i += 40) res.write(chunk({ content: text.slice(i, i + 40) }, null));
  res.end(chunk({}, "stop") + "data: [DONE]\n\n");
}

// Starts the service (on `port`, else any) and resolves with its base URL once it listens.
async function service(tools, port) {
  const child = spawn(BIN, ["serve", "--store", path.join(dir, "s.db"), "--tools", tools,
    "--listen", "127.0.0.1:" + (port || 0)], { stdio: ["ignore", "inherit", "pipe"],
    env: Object.assign({}, process.env, { PLANNER_KEY: "k" }) });
  const lines = readline.createInterface({ input: child.stderr });
  const base = await new Promise((resolve, reject) => {
    child.on("exit", (code) => reject(new Error("planvm serve exited with " + code)));
    lines.on("line", (line) => {
      process.stderr.write("serve: " + line + "\n");
      const m = line.match(/^listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
  });
  return { child, base };
}

// Whether a PNG shows something: decoded (8-bit RGB or RGBA, no interlace, as Chromium
// writes them), it has many colours and a fair share of pixels unlike the background.
function notBlank(png) {
  let pos = 8, width = 0, height = 0, channels = 0;
  const idat = [];
  while (pos < png.length) {
    const len = png.readUInt32BE(pos);
    const type = png.toString("ascii", pos + 4, pos + 8);
    const data = png.subarray(pos + 8, pos + 8 + len);
    if (type === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      channels = { 2: 3, 6: 4 }[data[9]];
      if (data[8] !== 8 || !channels || data[12] !== 0) return false;
    } else if (type === "IDAT") {
      idat.push(data);
    }
    pos += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const prev = Buffer.alloc(stride), cur = Buffer.alloc(stride);
  const colours = new Map();
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? cur[x - channels] : 0, b = prev[x], c = x >= channels ? prev[x - channels] : 0;
      let p = 0;
      if (filter === 1) p = a;
      else if (filter === 2) p = b;
      else if (filter === 3) p = (a + b) >> 1;
      else if (filter === 4) {
        const e = a + b - c, pa = Math.abs(e - a), pb = Math.abs(e - b), pc = Math.abs(e - c);
        p = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      cur[x] = (line[x] + p) & 255;
    }
    for (let x = 0; x < stride; x += channels) {
      const key = (cur[x] << 16) | (cur[x + 1] << 8) | cur[x + 2];
      colours.set(key, (colours.get(key) || 0) + 1);
    }
    cur.copy(prev);
  }
  const counts = [...colours.values()].sort((p, q) => q - p);
  const others = width * height - counts[0];
  return colours.size > 20 && others / (width * height) > 0.01;
}

async function shot(page, name) {
  const file = path.join(SHOTS, name + ".png");
  const png = await page.screenshot({ path: file, fullPage: true });
  check(notBlank(png), `the screenshot ${file} is not blank`);
}

const PLAN = [
  { seq_no: 0, type: "calling", parameters: { tool_name: "vector_search", tool_params: { query: "alpha" }, output_vars: ["a"] } },
  { seq_no: 1, type: "calling", parameters: { tool_name: "vector_search", tool_params: { query: "beta" }, output_vars: ["b"] } },
  { seq_no: 2, type: "assign", parameters: { final_answer: "${a} and ${b}" } },
];

// A plan that asks which topic to look up, then looks it up.
const ASKS = [
  { seq_no: 0, type: "calling", parameters: { tool_name: "ask_user", tool_params: { question: "Which topic?", choices: ["alpha", "gamma"] }, output_vars: ["topic"] } },
  { seq_no: 1, type: "calling", parameters: { tool_name: "vector_search", tool_params: { query: "${topic}" }, output_vars: ["final_answer"] } },
];

async function main() {
  const tools = await toolServer();
  const toolsFile = path.join(dir, "tools.toml");
  const toolsBase = `http://127.0.0.1:${tools.address().port}`;
  fs.writeFileSync(toolsFile, `[planner.backend]\nkind = "openai"\nbase_url = "${toolsBase}/v1"\n` +
    `model = "m"\napi_key_env = "PLANNER_KEY"\nmax_retries = 0\n\n` +
    `[[tool]]\nname = "vector_search"\n[tool.backend]\nkind = "http"\n` +
    `url = "${toolsBase}/search"\npointer = "/text"\nmax_retries = 0\n`);
  let svc = await service(toolsFile);
  let browser = null;
  try {
    const res = await fetch(svc.base + "/v1/runs", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ plan: PLAN, run_id: "first" }),
    });
    check(res.status === 201, "a plan is submitted over the API");
    for (let i = 0; i < 200; i++) {
      const run = await (await fetch(svc.base + "/v1/runs/first")).json();
      if (run.run.status === "ok") break;
      await new Promise((r) => setTimeout(r, 50));
    }

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    // NB: the refused answer below is a 422 the browser logs: expected, not a script's.
    page.on("console", (m) => {
      if (m.type() === "error" && !/status of 422/.test(m.text())) errors.push(m.text());
    });

    // The runs.
    await page.goto(svc.base + "/");
    const row = page.locator('tr[data-id="first"]');
    await row.waitFor();
    check((await row.locator(".badge").textContent()) === "ok", "the runs list shows the run, finished");
    await shot(page, "runs");

    // One run: its answer, its steps, a step's variables and call, the timeline.
    await row.locator("a").first().click();
    await page.waitForURL(/\/runs\/first$/);
    await page.locator("#answer").waitFor();
    check((await page.locator("#answer").textContent()) === "found(alpha) and found(beta)",
      "the run page shows the final answer");
    check((await page.locator("#steps li").count()) === 3, "the plan shows as three steps");
    await page.locator('#steps li[data-seq="1"]').click();
    const detail = page.locator("#detail");
    await detail.getByText("Variables before").waitFor();
    const text = await detail.textContent();
    check(text.includes("beta") && text.includes("found(beta)"), "a step shows its call's arguments and output");
    check(text.includes("found(alpha)"), "a step shows the variables before it");
    check((await page.locator(".tl-bar").count()) === 2, "the timeline has a bar per call");
    await shot(page, "run");

    // A branch from the last step with an edited plan: previewed, then run.
    await page.locator('#steps li[data-seq="2"]').click();
    await page.locator("#branch-here").click();
    const area = page.locator("#branch-plan");
    const edited = (await area.inputValue()).replace("${a} and ${b}", "${b}, then ${a}");
    await area.fill(edited);
    await page.locator("#preview").click();
    const preview = page.locator("#preview-result");
    await preview.waitFor();
    const said = await preview.textContent();
    check(said.includes("Reused") && said.includes("vector_search (seq_no 0)") && said.includes("Called anew: nothing"),
      "the preview says what is reused and that nothing is called");
    await page.locator("#start-branch").click();
    await page.waitForURL((u) => !u.pathname.endsWith("/runs/first"));
    await page.locator("#answer").waitFor({ timeout: 15000 });
    check((await page.locator("#answer").textContent()) === "found(beta), then found(alpha)",
      "the branch runs to the edited plan's answer");
    check((await page.locator("#summary").textContent()).includes("Branch of first at seq_no 2"),
      "the branch links to its parent");
    check((await page.locator('#steps li[data-seq="0"] .badge').textContent()) === "inherited",
      "the steps before the branch point show as the parent's");
    await shot(page, "branch");

    // A run that asks: its page shows the question, a choice answers it, the run ends.
    const asked = await fetch(svc.base + "/v1/runs", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ plan: ASKS, run_id: "asks" }),
    });
    check(asked.status === 201, "a plan that asks is submitted");
    await page.goto(svc.base + "/runs/asks");
    await page.locator("#question-text").waitFor({ timeout: 15000 });
    check((await page.locator("#question-text").textContent()) === "Which topic?",
      "the run page shows the question the run waits on");
    check((await page.locator("#summary .badge").first().textContent()) === "needs_input",
      "the run shows as waiting for input");
    await page.locator("#input-text").fill("beta");
    await page.locator("#send-input").click();
    await page.locator("#input-error").getByText("not one of the choices").waitFor();
    check(true, "an answer not among the choices is refused on the page");
    await shot(page, "question");
    await page.locator("button.choice", { hasText: "gamma" }).click();
    await page.locator("#answer").waitFor({ timeout: 15000 });
    check((await page.locator("#answer").textContent()) === "found(gamma)",
      "the answered run goes on to its answer");

    // A person's verdict on a run, given on its page and kept.
    await page.goto(svc.base + "/runs/first");
    await page.locator("#feedback-bad").waitFor();
    await page.locator("#feedback-note").fill("the order is wrong");
    await page.locator("#feedback-bad").click();
    await page.locator("#feedback-given").waitFor();
    await page.reload();
    await page.locator("#feedback-given").waitFor();
    check((await page.locator("#feedback-given").textContent()).includes("bad") &&
      (await page.locator("#feedback-note").inputValue()) === "the order is wrong",
      "a person's verdict on a run is kept with its note");

    // An evaluation stored in the service's store: listed, its cases, a case's run.
    const set = path.join(dir, "set.jsonl");
    const cassette = path.join(dir, "planner.jsonl");
    fs.writeFileSync(set, '{"id": "hello", "goal": "Say hi.", "expected": "hi"}\n' +
      '{"id": "bye", "goal": "Say bye.", "expected": "bye"}\n');
    const reply = (answer) => "```json\n" + JSON.stringify([{ seq_no: 0, type: "assign", parameters: { final_answer: answer } }]) + "\n```";
    fs.writeFileSync(cassette, ["Say hi.", "Say bye."].map((goal) => JSON.stringify({
      tool: "planner", args: { goal, response_format: null, feedback: null }, output: reply(goal === "Say hi." ? "hi" : "see you"),
    })).join("\n") + "\n");
    const evaluated = spawnSync(BIN, ["eval", set, "--replay", cassette, "--store", path.join(dir, "s.db"),
      "--eval-id", "e1"], { encoding: "utf8" });
    check(evaluated.status === 0, "an evaluation is stored: " + evaluated.stderr);
    await page.goto(svc.base + "/");
    const evalRow = page.locator('tr[data-eval="e1"]');
    await evalRow.waitFor();
    check((await evalRow.textContent()).includes("1 of 2"), "the runs page lists the evaluation, 1 of 2 passed");
    await evalRow.locator("a").click();
    const bye = page.locator('tr[data-case="bye"]');
    await bye.waitFor();
    check((await bye.textContent()).includes("fail") && (await bye.textContent()).includes("the answer is not"),
      "a failed case shows its verdict and reason");
    await shot(page, "evaluation");
    await page.locator('tr[data-case="hello"] td a').click();
    await page.locator("#eval").waitFor();
    check((await page.locator("#eval").textContent()).includes("Evaluation e1, case hello"),
      "a case's run shows the case and its verdict");

    // A goal answered after a repair and a re-plan, as a round of a conversation.
    const post = (body) => fetch(svc.base + "/v1/runs", { method: "POST",
      headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const ended = async (goalId) => {
      for (let i = 0; i < 400; i++) {
        const shown = await (await fetch(svc.base + "/v1/runs/" + goalId)).json();
        if (shown.goal && !["open"].includes(shown.goal.status)) return shown;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error("goal " + goalId + " never ended");
    };
    check((await post({ goal: "Look up gamma, please.", session: "talk", run_id: "g1" })).status === 201,
      "a goal is submitted in a session");
    const g1 = await ended("g1");
    check(g1.goal.status === "answered" && g1.goal.versions.map((v) => v.kind + ":" + v.status).join(" ") ===
      "plan:invalid repair:failed replan:ok", "the goal is answered after a repair and a re-plan: " +
      g1.goal.versions.map((v) => v.kind + ":" + v.status).join(" "));
    check((await post({ goal: "Say thanks.", session: "talk", run_id: "g2" })).status === 201, "a second round is asked");
    await ended("g2");

    await page.goto(svc.base + "/runs/g1.2");
    await page.locator("#answer").waitFor({ timeout: 15000 });
    check((await page.locator("#answer").textContent()) === "found(gamma)：日本語の答えです",
      "the goal's page shows its answer");
    const kinds = await page.locator("#steps li .kind").allTextContents();
    check(kinds.join(",") === "reasoning,calling,assign",
      "the run's steps are the plan read from the planner's reply, not its prose: " + kinds.join(","));
    check((await page.locator("#steps").textContent()).includes("vector_search(query)"),
      "a step shows its tool and parameters");
    check((await page.locator("#plan-source .repairs").textContent()).includes("W0003"),
      "the reader's repairs of the reply are noted");
    await page.locator("#plan-source details.raw summary").click();
    check((await page.locator("#plan-source details.raw").textContent()).includes("The index failed on that query"),
      "the planner's whole reply is behind a toggle");
    const versions = page.locator("#versions details.version");
    check((await versions.count()) === 3, "the goal shows its three plan versions");
    const expected = [
      ["invalid", "Search the web for gamma.", "web_lookup", "E"],
      ["failed", "Search the index for the broken entry.", "\"broken\"", "the index is offline"],
      ["ok", "Look up gamma in the index, then answer in Japanese.", "\"gamma\"", "日本語"],
    ];
    for (let i = 0; i < 3; i++) {
      const v = versions.nth(i);
      if (!(await v.evaluate((d) => d.open))) await v.locator("summary").first().click();
      const text = await v.textContent();
      const [status, thought, param, why] = expected[i];
      check((await v.locator("summary .badge").first().textContent()) === status, `version ${i + 1} is ${status}`);
      check(text.includes(thought), `version ${i + 1} shows its reasoning`);
      check(text.includes(param) && text.includes(why), `version ${i + 1} shows its steps' parameters and why it ended`);
    }
    check((await versions.nth(0).textContent()).includes("web_lookup") &&
      /E\d{4}/.test(await versions.nth(0).locator("ul.diags").textContent()),
      "the refused version shows the compiler's errors sent back");
    const diff = page.locator("#diff");
    const changed = await diff.locator('li.diff-changed[data-seq="1"]').textContent();
    check(changed.includes("tool_params.query") && changed.includes("broken") && changed.includes("gamma"),
      "the diff between the last two versions shows the changed parameter");
    await page.locator("#diff-from").selectOption({ index: 0 });
    await diff.locator('li.diff-changed[data-seq="1"]').getByText("tool_name").waitFor();
    check(true, "another pair of versions can be compared");
    await shot(page, "goal-versions");

    const rounds = page.locator("#conversation ol.rounds > li");
    await rounds.nth(1).waitFor();
    check((await rounds.count()) === 2 && (await rounds.nth(1).textContent()).includes("You are welcome."),
      "the conversation shows its rounds in order, each with its answer");
    // NB: which fonts Chromium drew the answer with: CJK text needs a CJK font (no tofu).
    const cdp = await page.context().newCDPSession(page);
    const { root } = await cdp.send("DOM.getDocument", { depth: -1 });
    const { nodeId } = await cdp.send("DOM.querySelector", { nodeId: root.nodeId, selector: "#answer" });
    await cdp.send("CSS.enable");
    const { fonts } = await cdp.send("CSS.getPlatformFontsForNode", { nodeId });
    check(fonts.some((f) => /CJK|Han|Hei|Gothic|JP|SC/.test(f.familyName) && f.glyphCount >= 5),
      "the Japanese answer is drawn with a CJK font: " + fonts.map((f) => f.familyName + "×" + f.glyphCount).join(", "));

    // Runs named: a goal by its text, a plan by its name, else its first reasoning line.
    check((await post({ plan: PLAN, name: "nightly check", run_id: "named" })).status === 201, "a named plan is submitted");
    const reasoned = [step(0, "reasoning", { chain_of_thoughts: "Greet the reader.\nThen stop." }),
      step(1, "assign", { final_answer: "hello" })];
    check((await post({ plan: reasoned, run_id: "reasoned" })).status === 201, "a plan with a reasoning step is submitted");
    await page.goto(svc.base + "/");
    await page.locator('tr[data-id="reasoned"]').waitFor();
    check((await page.locator('tr[data-id="named"] td.what').textContent()).includes("nightly check"),
      "a plan's run is listed by the name given with it");
    check((await page.locator('tr[data-id="reasoned"] td.what').textContent()).includes("Greet the reader."),
      "a plan's run without a name is listed by its first reasoning line");
    check((await page.locator('tr[data-id="g1.2"] td.what').textContent()).includes("Look up gamma, please."),
      "a goal's run is listed by the goal's text");
    await page.locator("#q").fill("NIGHTLY");
    await page.waitForFunction(() => document.querySelectorAll("#runs tr[data-id]").length === 1);
    check((await page.locator("#runs tr[data-id]").getAttribute("data-id")) === "named", "the list filters by text");
    await shot(page, "runs-named");

    // The page recovers after the service restarts: a run waiting for an answer, answered
    // while the page stays open, shows its answer without a reload.
    check((await post({ plan: ASKS, run_id: "asks2" })).status === 201, "a plan that asks is submitted again");
    await page.goto(svc.base + "/runs/asks2");
    await page.locator("#question-text").waitFor({ timeout: 15000 });
    const port = new URL(svc.base).port;
    svc.child.kill("SIGTERM");
    await once(svc.child, "exit");
    svc = await service(toolsFile, port);
    const answered = await fetch(svc.base + "/v1/runs/asks2/input", { method: "POST",
      headers: { "content-type": "application/json" }, body: JSON.stringify({ text: "alpha" }) });
    check(answered.status === 202, "the restarted service takes the run's answer");
    await page.locator("#answer").waitFor({ timeout: 20000 });
    check((await page.locator("#answer").textContent()) === "found(alpha)",
      "the page shows the answer given across a restart, without a reload");
    check((await page.locator("#summary .badge").first().textContent()) === "ok", "and the run's new status");
    await shot(page, "after-restart");

    check(errors.length === 0, "no script errors: " + errors.join("; "));
  } finally {
    if (browser) await browser.close();
    svc.child.kill("SIGTERM");
    tools.close();
  }
}

main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});

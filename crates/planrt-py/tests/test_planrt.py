"""The Python package against real plans: check, compile, load and save, run with async
and plain tools, failures, limits, suspension, and concurrency timing."""

import asyncio
import json
import os
import pathlib
import threading
import time

import pytest

import planrt

ROOT = pathlib.Path(__file__).resolve().parents[3]
# The 14-step plan of the seed specification: 4 aspects x (knowledge graph, vector search
# -> synthesis) -> final synthesis. 13 calls; critical path 3.
ASPECTS = (ROOT / "tests/corpus/valid/current_retrieval.json").read_text()

CHAIN = json.dumps(
    [
        {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Look up, then answer."}},
        {
            "seq_no": 1,
            "type": "calling",
            "parameters": {"tool_name": "lookup", "tool_params": {"q": "${topic}"}, "output_vars": ["facts"]},
        },
        {
            "seq_no": 2,
            "type": "calling",
            "parameters": {
                "tool_name": "write",
                "tool_params": {"facts": "${facts}", "n": 3},
                "output_vars": ["final_answer"],
            },
        },
    ],
    indent=1,
)


def lookup(q):
    return {"about": q, "items": [1, 2.5, True, None]}


async def write(facts, n):
    await asyncio.sleep(0)
    return f"{n} facts about {facts['about']}"


TOOLS = {"lookup": lookup, "write": write}


# ---- check and compile ----------------------------------------------------------------


def test_check_lists_every_diagnostic_with_its_place():
    bad = '[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "nope", "tool_params": {}}}]'
    diags = planrt.check(bad)
    codes = sorted(d.code for d in diags)
    assert "E0202" in codes and "E0206" in codes, codes
    unknown = next(d for d in diags if d.code == "E0202")
    assert unknown.severity == "error"
    assert unknown.seq_no == 0 and unknown.line == 1 and unknown.column > 1
    assert "nope" in unknown.message
    assert unknown.help
    assert "E0202" in repr(unknown)


def test_compile_raises_plan_error_with_the_diagnostics():
    with pytest.raises(planrt.PlanError) as e:
        planrt.compile('[{"seq_no": 0, "type": "assign", "parameters": {"x": "${y}"}}]')
    codes = [d.code for d in e.value.diagnostics]
    assert "E0206" in codes, codes
    assert "E0206" in str(e.value)


def test_variables_the_runs_preset_count_as_set():
    codes = lambda **kw: [d.code for d in planrt.check(CHAIN, tools=TOOLS, **kw)]
    assert "W0201" in codes()
    assert "W0201" not in codes(vars={"topic": "TiDB"})
    assert "W0201" not in codes(vars=["topic"])
    plan = planrt.compile(CHAIN, tools=TOOLS, vars=["topic"])
    assert [w.code for w in plan.warnings if w.code == "W0201"] == []


def test_tools_declare_the_tools_they_name():
    plan = planrt.compile(CHAIN, tools=TOOLS)
    assert plan.tools == ["lookup", "write"]
    # `topic` is set only by the caller's vars: the compiler says so.
    assert [d.code for d in plan.warnings] == ["W0201"]
    with pytest.raises(planrt.PlanError):
        planrt.compile(CHAIN)  # lookup and write are not built-in tools
    with pytest.raises(TypeError, match="not callable"):
        planrt.compile(CHAIN, tools={"lookup": 3})


def test_a_tools_file_declares_tools(tmp_path):
    toml = tmp_path / "tools.toml"
    toml.write_text('[[tool]]\nname = "lookup"\n[[tool]]\nname = "write"\n')
    assert planrt.compile(CHAIN, tools=str(toml)).tools == ["lookup", "write"]
    with pytest.raises(planrt.PlanError):
        planrt.compile(CHAIN, tools=str(tmp_path / "missing.toml"))


def test_pbc_round_trip_strip_explain_and_disasm():
    plan = planrt.compile(ASPECTS)
    pbc = plan.to_pbc()
    again = planrt.Plan.from_pbc(pbc)
    assert again.to_pbc() == pbc
    assert again.source is None and plan.source == ASPECTS
    assert len(plan.to_pbc(strip=True)) < len(pbc)
    steps = plan.explain()
    assert [s["seq_no"] for s in steps] == list(range(14))
    assert steps[3]["depends_on"] == [1, 2]
    assert "call" in plan.disasm()
    with pytest.raises(ValueError, match="source"):
        again.explain()
    with pytest.raises(planrt.PlanError, match="magic"):
        planrt.Plan.from_pbc(b"[]")
    damaged = bytearray(pbc)
    damaged[-1] ^= 0xFF
    with pytest.raises(planrt.PlanError, match="checksum"):
        planrt.Plan.from_pbc(bytes(damaged))


# ---- running ---------------------------------------------------------------------------
#
# A run whose tools are all Python callables is driven on the event loop's thread; with a
# tools file it goes through the Rust host. `via` runs each test both ways: the outcome
# and the errors must not depend on the path.


@pytest.fixture(params=["loop", "host"])
def via(request, tmp_path):
    def run_sync(plan, tools, **kw):
        if request.param == "host":
            toml = tmp_path / "tools.toml"
            toml.write_text("".join(f'[[tool]]\nname = "{n}"\n' for n in tools))
            kw["tools_file"] = str(toml)
        return plan.run_sync(tools=tools, **kw)

    return run_sync



def test_run_with_async_and_plain_tools(via):
    seen = {}

    def lookup(q):
        seen["thread"] = threading.current_thread() is not threading.main_thread()
        return {"about": q, "items": [1, 2.5, True, None]}

    plan = planrt.compile(CHAIN, tools=TOOLS)
    out = asyncio.run(plan.run(tools={"lookup": lookup, "write": write}, vars={"topic": "TiDB"}))
    assert out.final_answer == "3 facts about TiDB"
    assert out.variables["facts"] == {"about": "TiDB", "items": [1, 2.5, True, None]}
    assert out.tool_calls == 2 and out.steps == 3
    assert seen["thread"], "a plain tool runs in the thread pool, not on the loop"
    assert via(plan, TOOLS, vars={"topic": "x"}).final_answer == "3 facts about x"


def test_a_tool_exception_fails_the_run_with_it_as_cause(via):
    def broken(q):
        raise KeyError("no such topic")

    plan = planrt.compile(CHAIN, tools=TOOLS)
    with pytest.raises(planrt.RunError) as e:
        via(plan, {"lookup": broken, "write": write}, vars={"topic": "x"})
    err = e.value
    assert err.code == "R0005"
    # The line of the instruction's opening brace.
    line = CHAIN[: CHAIN.index('"seq_no": 1')].rstrip().count("\n") + 1
    assert err.seq_no == 1 and err.line == line
    assert isinstance(err.__cause__, KeyError)
    assert "KeyError" in str(err) and "no such topic" in str(err)


def test_a_result_that_is_not_json_fails_the_run(via):
    plan = planrt.compile(CHAIN, tools=TOOLS)
    with pytest.raises(planrt.RunError) as e:
        via(plan, {"lookup": lambda q: object(), "write": write}, vars={"topic": "x"})
    assert e.value.code == "R0005"
    assert isinstance(e.value.__cause__, TypeError)
    assert "not JSON-compatible" in str(e.value)


def test_a_missing_tool_fails_before_anything_runs():
    calls = []

    def lookup(q):
        calls.append(q)
        return q

    plan = planrt.compile(CHAIN, tools=TOOLS)
    with pytest.raises(planrt.RunError) as e:
        plan.run_sync(tools={"lookup": lookup}, vars={"topic": "x"})
    assert e.value.code == "R0010", str(e.value)
    assert "write" in str(e.value)
    assert calls == [], "nothing ran"


LOOP = json.dumps(
    [
        {"seq_no": 0, "type": "assign", "parameters": {"n": 0}},
        {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "tick", "tool_params": {"n": "${n}"}, "output_vars": ["t"]}},
        {"seq_no": 2, "type": "assign", "parameters": {"n": "${n} + 1"}},
        {"seq_no": 3, "type": "jmp", "parameters": {"condition_prompt": "done?", "jump_if_true": 4, "jump_if_false": 1}},
        {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${t}"}},
    ]
)


def test_limits_steps_and_timeout(via):
    never = {"jmp_condition": lambda prompt, context=None: False}
    tools = {"tick": lambda n: n, **never}
    plan = planrt.compile(LOOP, tools=tools)
    with pytest.raises(planrt.RunError) as e:
        via(plan, tools, max_steps=50)
    assert e.value.code == "R0001"

    async def slow(n):
        await asyncio.sleep(30)

    start = time.monotonic()
    with pytest.raises(planrt.RunError) as e:
        via(plan, {"tick": slow, **never}, timeout=0.2)
    assert e.value.code == "R0009"
    assert "deadline of 0.2 s exceeded" in str(e.value)
    # Cut by the deadline, not by the tool's own 30 s.
    assert time.monotonic() - start < 30 / 3
    with pytest.raises(ValueError):
        via(plan, tools, timeout=-1)


def counting_loop_tools(answers=3):
    """`tick` and a condition that says "done" on its `answers`-th question."""
    asked = []

    def done(prompt, context=None):
        asked.append(prompt)
        return len(asked) >= answers

    return {"tick": lambda n: n * 10, "jmp_condition": done}


def test_both_paths_count_fail_and_time_out_alike(tmp_path):
    plan = planrt.compile(LOOP, tools=counting_loop_tools())
    toml = tmp_path / "tools.toml"
    toml.write_text("".join(f'[[tool]]\nname = "{n}"\n' for n in ("tick", "jmp_condition")))
    on_loop = plan.run_sync(tools=counting_loop_tools())
    on_host = plan.run_sync(tools=counting_loop_tools(), tools_file=str(toml))
    assert on_loop.final_answer == on_host.final_answer == 20
    assert on_loop.variables == on_host.variables
    # 3 ticks and 3 conditions, whichever path.
    assert on_loop.tool_calls == on_host.tool_calls == 6
    assert on_loop.steps == on_host.steps

    async def slow(n):
        await asyncio.sleep(30)

    errors = []
    for extra in ({}, {"tools_file": str(toml)}):
        with pytest.raises(planrt.RunError) as e:
            plan.run_sync(tools={**counting_loop_tools(), "tick": slow}, timeout=0.2, **extra)
        errors.append((str(e.value), e.value.code, e.value.seq_no, e.value.line))
    assert errors[0] == errors[1], errors
    assert errors[0][1:] == ("R0009", 1, 1)  # LOOP is one line


@pytest.mark.parametrize("hosted", [False, True])
def test_a_call_the_run_stops_waiting_for_is_cancelled(tmp_path, hosted):
    events = []

    async def slow(n):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    plan = planrt.compile(LOOP, tools=counting_loop_tools())
    extra = {}
    if hosted:
        toml = tmp_path / "tools.toml"
        toml.write_text('[[tool]]\nname = "tick"\n[[tool]]\nname = "jmp_condition"\n')
        extra["tools_file"] = str(toml)

    async def main():
        with pytest.raises(planrt.RunError):
            await plan.run(tools={**counting_loop_tools(), "tick": slow}, timeout=0.1, **extra)
        # The run's loop goes on: the abandoned call must not.
        for _ in range(50):
            if events:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert events == ["cancelled"]


def test_run_sync_refuses_a_running_loop():
    plan = planrt.compile(CHAIN, tools=TOOLS)

    async def inside():
        with pytest.raises(RuntimeError, match="await"):
            plan.run_sync(tools=TOOLS)
        # The coroutine form works on the running loop.
        out = await plan.run(tools=TOOLS, vars={"topic": "y"})
        assert out.final_answer == "3 facts about y"

    asyncio.run(inside())


# ---- suspension ------------------------------------------------------------------------


def test_start_requests_resume_state_and_restore():
    plan = planrt.compile(CHAIN, tools=TOOLS)
    run = plan.start(vars={"topic": "TiDB"})
    (req,) = run.requests()
    assert (req.tool, req.args, req.seq_no, req.kind) == ("lookup", {"q": "TiDB"}, 1, "tool")
    saved = run.state()

    # Continued elsewhere from the saved bytes: the call in flight is waiting again.
    other = planrt.Run.restore(plan, saved)
    (again,) = other.requests()
    assert (again.id, again.args) == (req.id, req.args)

    for r in (run, other):
        r.resume(req.id, {"about": "TiDB"})
        (w,) = r.requests()
        assert w.args == {"facts": {"about": "TiDB"}, "n": 3}
        r.resume(w.id, "done")
        assert r.requests() == [] and r.done
        assert r.outcome.final_answer == "done"
        assert r.outcome.tool_calls == 2

    with pytest.raises(ValueError, match="waiting"):
        run.resume(12345, 1)
    with pytest.raises(planrt.RunError) as e:
        planrt.Run.restore(plan, b"not a state")
    assert e.value.code == "R0011"
    other_plan = planrt.compile(ASPECTS)
    with pytest.raises(planrt.RunError):
        planrt.Run.restore(other_plan, saved)


def test_an_exception_as_an_answer_fails_the_run_at_its_step():
    run = planrt.compile(CHAIN, tools=TOOLS).start(vars={"topic": "x"})
    (req,) = run.requests()
    run.resume(req.id, ValueError("backend down"))
    with pytest.raises(planrt.RunError) as e:
        run.requests()
    assert e.value.code == "R0005" and e.value.seq_no == 1
    assert "backend down" in str(e.value)
    assert run.done and run.outcome is None


# ---- concurrency -----------------------------------------------------------------------


def aspect_tools(latency):
    async def call(**args):
        await asyncio.sleep(latency)
        return "result for " + json.dumps(args, sort_keys=True)[:40]

    return {"retrieve_knowledge_graph": call, "vector_search": call, "llm_generate": call}


def test_thirteen_calls_run_on_the_critical_path(tmp_path):
    plan = planrt.compile(ASPECTS)
    tools = aspect_tools(0.1)
    toml = tmp_path / "tools.toml"
    toml.write_text('[defaults.backend]\nkind = "replay"\n')

    async def timed(max_concurrency, **kw):
        start = time.monotonic()
        out = await plan.run(tools=tools, max_concurrency=max_concurrency, **kw)
        return out, time.monotonic() - start

    concurrent, took = asyncio.run(timed(16))
    assert concurrent.tool_calls == 13
    sequential, seq_took = asyncio.run(timed(1))
    assert sequential.final_answer == concurrent.final_answer
    assert sequential.variables == concurrent.variables
    # One call at a time: 13 calls of 0.1 s at least.
    assert seq_took >= 1.3, seq_took
    # Concurrent: the critical path (retrieval, synthesis, final synthesis: 3 calls), a
    # quarter of the sequential time; at least 2.5 times faster, measured side by side.
    assert took * 2.5 <= seq_took, (took, seq_took)
    # Through the Rust host (a tools file is named): the same answer, the same overlap.
    hosted, host_took = asyncio.run(timed(16, tools_file=str(toml)))
    assert hosted.variables == concurrent.variables
    assert host_took * 2.5 <= seq_took, (host_took, seq_took)


def test_many_runs_of_one_plan_at_once():
    plan = planrt.compile(CHAIN, tools=TOOLS)

    async def main():
        outs = await asyncio.gather(*(plan.run(tools=TOOLS, vars={"topic": str(i)}) for i in range(50)))
        return [o.final_answer for o in outs]

    assert asyncio.run(main()) == [f"3 facts about {i}" for i in range(50)]


# ---- ask ---------------------------------------------------------------------------------

ASK_TOOLS = ROOT / "examples/ask.toml"
ASK_CASSETTE = ROOT / "examples/ask_tidb_sql.cassette.jsonl"


def test_ask_answers_a_goal_from_the_replayed_planner_and_tools():
    answer = asyncio.run(
        planrt.ask(
            "Does TiDB support SQL?",
            {"lang": "Japanese"},
            tools=str(ASK_TOOLS),
            replay=str(ASK_CASSETTE),
        )
    )
    assert answer.status == "answered", answer.error
    assert "TiDB は SQL をサポートしています" in answer.answer
    assert answer.tool_calls == 3
    assert json.loads(answer.plan[answer.plan.index("[") : answer.plan.rindex("]") + 1])
    assert [r["kind"] for r in answer.rounds] == ["plan"]


def test_ask_runs_the_plan_with_python_tools():
    seen = []

    async def search(**args):
        seen.append(args)
        return "TiDB speaks the MySQL dialect of SQL."

    def write(prompt, context=None):
        return "はい。" + context[-20:]

    tools = {"retrieve_knowledge_graph": search, "vector_search": search, "llm_generate": write}
    answer = asyncio.run(
        planrt.ask(
            "Does TiDB support SQL?",
            {"lang": "Japanese"},
            tools=tools,
            tools_file=str(ASK_TOOLS),
            replay=str(ASK_CASSETTE),
        )
    )
    assert answer.status == "answered", answer.error
    assert answer.answer.startswith("はい。")
    assert len(seen) == 2


def test_a_bad_example_file_is_skipped_with_a_warning(tmp_path):
    for example in (ROOT / "examples/planner").glob("*.json"):
        (tmp_path / example.name).write_text(example.read_text())
    (tmp_path / "broken.json").write_text('{"goal": ')
    with pytest.warns(UserWarning, match="broken.json"):
        answer = asyncio.run(
            planrt.ask(
                "Does TiDB support SQL?",
                {"lang": "Japanese"},
                tools=str(ASK_TOOLS),
                replay=str(ASK_CASSETTE),
                examples=str(tmp_path),
            )
        )
    assert answer.status == "answered", answer.error


def test_ask_without_a_planner_says_so():
    with pytest.raises(planrt.RunError, match="no backend for the planner"):
        asyncio.run(planrt.ask("Does TiDB support SQL?"))


# ---- runs in a store ------------------------------------------------------------------


def test_a_stored_run_resumes_after_a_tool_error_without_calling_again_what_completed(tmp_path):
    store = planrt.Store(tmp_path / "runs.db")
    calls = {"lookup": 0, "write": 0}
    broken = {"write": True}

    def counted_lookup(q):
        calls["lookup"] += 1
        return lookup(q)

    async def flaky_write(facts, n):
        calls["write"] += 1
        if broken["write"]:
            raise ConnectionError("the writer is down")
        return await write(facts, n)

    tools = {"lookup": counted_lookup, "write": flaky_write}
    plan = planrt.compile(CHAIN, tools=TOOLS)
    with pytest.raises(planrt.RunError) as e:
        asyncio.run(plan.run(tools=tools, vars={"topic": "TiDB"}, store=store, run_id="r1"))
    assert e.value.code == "R0005" and e.value.run_id == "r1"
    assert isinstance(e.value.__cause__, ConnectionError)

    [row] = store.runs()
    assert row["id"] == "r1" and row["status"] == "failed"
    assert row["parent"] is None and row["tool_calls"] == 2  # lookup, and the failed write
    shown = store.run("r1")
    assert shown["run"]["id"] == "r1"
    assert [c["tool"] for c in shown["calls"]][0] == "lookup"
    assert shown["calls"][0]["output"] == lookup("TiDB")
    assert any(s["writes"].get("facts") == lookup("TiDB") for s in shown["steps"])
    assert calls["lookup"] == 1

    broken["write"] = False
    out = asyncio.run(store.resume("r1", tools=tools))
    assert out.final_answer == "3 facts about TiDB" and out.run_id == "r1"
    assert calls["lookup"] == 1, "the call that completed is not made again"
    assert out.tool_calls == 2
    assert [(c["tool"], c["state"]) for c in store.run("r1")["calls"]] == [
        ("lookup", "committed"),
        ("write", "committed"),
    ]
    [row] = store.runs()
    assert row["status"] == "ok" and row["final_answer"] == "3 facts about TiDB"

    # A finished run gives its stored answer and calls nothing.
    before = dict(calls)
    again = asyncio.run(store.resume("r1", tools=tools))
    assert again.final_answer == "3 facts about TiDB" and calls == before


def test_a_stored_run_gets_an_id_and_store_errors_say_why(tmp_path):
    store = planrt.Store(str(tmp_path / "runs.db"), durability="full")
    plan = planrt.compile(CHAIN, tools=TOOLS)
    out = plan.run_sync(tools=TOOLS, vars={"topic": "x"}, store=store)
    assert out.final_answer == "3 facts about x" and out.run_id
    assert [r["id"] for r in store.runs()] == [out.run_id]
    assert store.runs()[0]["steps"] == out.steps

    with pytest.raises(planrt.StoreError) as e:
        plan.run_sync(tools=TOOLS, vars={"topic": "x"}, store=store, run_id=out.run_id)
    assert e.value.code == "duplicate_run"
    with pytest.raises(planrt.StoreError) as e:
        asyncio.run(store.resume("nope", tools=TOOLS))
    assert e.value.code == "unknown_run"
    with pytest.raises(planrt.StoreError) as e:
        store.run("nope")
    assert e.value.code == "unknown_run"

    assert store.cancel(out.run_id) is False, "a finished run is left as it was"
    assert store.path == tmp_path / "runs.db"
    with pytest.raises(planrt.StoreError) as e:
        plan.run_sync(tools=TOOLS, vars={"topic": "x"}, store=store, run_id="no spaces")
    assert e.value.code == "bad_run_id"
    with pytest.raises(ValueError):
        plan.run_sync(tools=TOOLS, vars={"topic": "x"}, run_id="r9")
    with pytest.raises(planrt.RunError) as e:
        plan.run_sync(tools={}, vars={"topic": "x"})
    assert e.value.run_id is None
    with pytest.raises(planrt.StoreError) as e:
        store.cancel("nope")
    assert e.value.code == "unknown_run"

    not_a_store = tmp_path / "notes.txt"
    not_a_store.write_text("just some notes, not a database\n")
    with pytest.raises(planrt.StoreError) as e:
        planrt.Store(not_a_store)
    assert e.value.code == "not_a_store"
    assert not_a_store.read_text() == "just some notes, not a database\n"
    with pytest.raises(ValueError):
        planrt.Store(tmp_path / "x.db", durability="sometimes")


# ---- sessions --------------------------------------------------------------------------


def _fake_planner(replies):
    """An OpenAI-compatible planner on loopback: each request's prompt is kept, and the
    reply is ``replies(prompt)``. Returns (base URL, prompts, server)."""
    import http.server

    prompts = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            prompt = body["messages"][0]["content"]
            prompts.append(prompt)
            out = json.dumps(
                {"choices": [{"index": 0, "message": {"role": "assistant", "content": replies(prompt)}}]}
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1", prompts, server


def test_ask_in_a_session_tells_the_planner_the_earlier_goals(tmp_path, monkeypatch):
    def reply(prompt):
        goal = prompt.split("# Goal\n\n")[1].splitlines()[0]
        plan = [{"seq_no": 0, "type": "assign", "parameters": {"final_answer": f"answer to <{goal}>"}}]
        return json.dumps(plan)

    base, prompts, server = _fake_planner(reply)
    tools = tmp_path / "tools.toml"
    tools.write_text(
        f'[planner.backend]\nkind = "openai"\nbase_url = "{base}"\nmodel = "m"\n'
        'api_key_env = "PLANNER_KEY"\nmax_retries = 0\n'
    )
    monkeypatch.setenv("PLANNER_KEY", "a-long-enough-test-key")
    store = planrt.Store(tmp_path / "runs.db")
    try:
        first = asyncio.run(planrt.ask("Who sold the most?", tools=str(tools), store=store, session="s1"))
        assert first.status == "answered", first.error
        assert first.runs == [first.run_id]
        second = asyncio.run(
            planrt.ask("Where does that person work?", tools=str(tools), store=store, session="s1", run_id="q2")
        )
        assert second.run_id == "q2"
        assert "User: Who sold the most?\nAnswer: answer to <Who sold the most?>" in prompts[-1]
        assert store.run("q2")["run"]["final_answer"] == "answer to <Where does that person work?>"
        with pytest.raises(ValueError, match="store="):
            asyncio.run(planrt.ask("x", tools=str(tools), session="s1"))
    finally:
        server.shutdown()


# ---- questions to the user ---------------------------------------------------------------

ASKS = json.dumps(
    [
        {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "lookup", "tool_params": {"q": "regions"}, "output_vars": ["facts"]}},
        {
            "seq_no": 1,
            "type": "calling",
            "parameters": {
                "tool_name": "ask_user",
                "tool_params": {"question": "Which region of ${facts.about}?", "choices": ["EU", "US"]},
                "output_vars": ["region"],
            },
        },
        {
            "seq_no": 2,
            "type": "calling",
            "parameters": {"tool_name": "write", "tool_params": {"facts": {"about": "${region}"}, "n": 2}, "output_vars": ["final_answer"]},
        },
    ]
)


def test_a_question_stops_a_stored_run_until_resume_answers_it(tmp_path):
    store = planrt.Store(tmp_path / "runs.db")
    calls = {"lookup": 0, "write": 0}

    def counted_lookup(q):
        calls["lookup"] += 1
        return lookup(q)

    async def counted_write(facts, n):
        calls["write"] += 1
        return await write(facts, n)

    tools = {"lookup": counted_lookup, "write": counted_write}
    plan = planrt.compile(ASKS, tools=TOOLS)
    assert plan.asks_user
    out = asyncio.run(plan.run(tools=tools, store=store, run_id="q"))
    assert out.status == "needs_input" and out.run_id == "q"
    assert out.question == "Which region of regions?" and out.choices == ["EU", "US"]
    assert out.final_answer is None
    assert store.runs()[0]["status"] == "needs_input"
    # Without an answer it is asked again; a wrong one is refused; nothing runs.
    again = asyncio.run(store.resume("q", tools=tools))
    assert again.status == "needs_input" and again.question == out.question
    with pytest.raises(planrt.StoreError) as e:
        asyncio.run(store.resume("q", tools=tools, input="Asia"))
    assert e.value.code == "bad_input" and "`EU`, `US`" in str(e.value)
    assert calls == {"lookup": 1, "write": 0}

    done = asyncio.run(store.resume("q", tools=tools, input="EU"))
    assert done.status == "ok" and done.final_answer == "2 facts about EU"
    assert calls == {"lookup": 1, "write": 1}, "each call once"
    with pytest.raises(planrt.StoreError) as e:
        asyncio.run(store.resume("q", tools=tools, input="US"))
    assert e.value.code == "not_waiting"

    # Without a store the outcome says so too (there is nothing to resume).
    out = asyncio.run(plan.run(tools=tools))
    assert out.status == "needs_input" and out.run_id is None


def test_ask_whose_plan_asks_the_user_is_answered_once_its_run_is(tmp_path, monkeypatch):
    def reply(prompt):
        plan = [
            {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "ask_user", "tool_params": {"question": "Which store?"}, "output_vars": ["store"]}},
            {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "trend of ${store}"}},
        ]
        return json.dumps(plan)

    base, prompts, server = _fake_planner(reply)
    tools = tmp_path / "tools.toml"
    tools.write_text(f'[planner.backend]\nkind = "openai"\nbase_url = "{base}"\nmodel = "m"\nmax_retries = 0\n')
    store = planrt.Store(tmp_path / "runs.db")
    try:
        asked = asyncio.run(planrt.ask("Show our store's trend", tools=str(tools), store=store))
        assert asked.status == "needs_input" and asked.question == "Which store?"
        assert "ask_user" in prompts[0]
        out = asyncio.run(store.resume(asked.runs[-1], tools=str(tools), input="Berlin"))
        assert out.final_answer == "trend of Berlin"
        import sqlite3

        with sqlite3.connect(tmp_path / "runs.db") as db:
            goal = db.execute("SELECT status, answer FROM goals WHERE id = ?", (asked.run_id,)).fetchone()
        assert goal == ("answered", '"trend of Berlin"')
        assert len(prompts) == 1, "the planner is not asked again"
    finally:
        server.shutdown()


# ---- MCP ---------------------------------------------------------------------------------

MCP_PYTHON = pathlib.Path(os.environ.get("PLANRT_MCP_PYTHON", ROOT / "target/mcp-venv/bin/python"))
MCP_SERVER = ROOT / "crates/planvm/tests/mcp/server.py"


def test_mcp_tools_are_checked_and_one_server_serves_every_run(tmp_path, monkeypatch):
    if not MCP_PYTHON.exists():
        why = f"SKIPPED: no Python with the MCP SDK at {MCP_PYTHON} (run scripts/mcp-deps)"
        if os.environ.get("PLANRT_REQUIRE_MCP"):
            pytest.fail(why)
        pytest.skip(why)
    monkeypatch.setenv("PLANVM_CACHE_DIR", str(tmp_path / "cache"))
    toml = tmp_path / "tools.toml"
    toml.write_text(
        f'[[mcp]]\nname = "py"\ncommand = ["{MCP_PYTHON}", "{MCP_SERVER}", "stdio"]\n'
        'include = ["add_note", "lookup"]\n'
    )

    def plan(tool, args):
        step = {"tool_name": tool, "tool_params": args, "output_vars": ["final_answer"]}
        return json.dumps([{"seq_no": 0, "type": "calling", "parameters": step}])

    with pytest.raises(planrt.PlanError) as e:
        planrt.compile(plan("lookup", {"unit": "C"}), tools=str(toml))
    assert "`lookup` requires parameter `city`" in str(e.value)
    note = planrt.compile(plan("add_note", {"text": "seen"}), tools=str(toml))
    # The server counts the notes it holds: the second run talks to the same process.
    counts = [note.run_sync(tools_file=str(toml)).final_answer for _ in range(2)]
    assert counts == [{"result": 1}, {"result": 2}]

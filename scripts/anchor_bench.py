#!/usr/bin/env python3
# Usage: scripts/anchor-bench [ROUNDS] (which installs what this needs in a venv), or
#        python3 scripts/anchor_bench.py POSTGRES_SUPERUSER_URL [ROUNDS]
# The anchors of BENCHMARKS.md's "Scale-out: PostgreSQL": what a durable step costs in
# DBOS Transact (Python) and in LangGraph's PostgreSQL checkpointer, against the same
# local server as planrt's store, with `synchronous_commit` on (planrt's
# `--durability full`) and off (planrt's default). Each measure runs in a process and a
# database of its own (DBOS is a singleton per process, and sizes and WAL are read per
# database), one at a time, and prints one line:
#   a one-row INSERT   the floor: what a commit costs the server at that moment;
#   per step p50 / p99 the run's wall time over its steps (p99 by nearest rank, so the
#                      largest of up to 100 runs);
#   step alone         DBOS only: each step call timed inside the workflow;
#   disk B/step        growth of the tables' heap, index and TOAST pages (main forks: a
#                      VACUUM, or autovacuum mid-run, adds free-space and visibility maps
#                      of a fixed size that are not the data) over every step run,
#                      warm-up included; per table in brackets;
#   WAL B/step         pg_current_wal_lsn() moved over the same steps (the server runs
#                      nothing else meanwhile);
#   commits/step       pg_stat_database.xact_commit of the database (read-only
#                      transactions count too), read once the connections are closed so
#                      that their counters are flushed.
import math, operator, subprocess, sys, time, uuid
from typing import Annotated, TypedDict
from urllib.parse import urlsplit, urlunsplit

import psycopg

DBOS_STEPS, DBOS_WARMUP, DBOS_RUNS = 100, 5, 20
FLUSH_WARMUP, FLUSH_COMMITS = 50, 200
LG_WARMUP, LG_RUNS = 5, 50


def db_url(url, name):
    u = urlsplit(url)
    return urlunsplit((u.scheme, u.netloc, "/" + name, u.query, u.fragment))


def p(xs, q):
    # Nearest rank: with 20 or 50 runs a p99 is the slowest run, said so in the header.
    xs = sorted(xs)
    return xs[max(0, math.ceil(q / 100 * len(xs)) - 1)]


def ms(xs):
    # In µs below 0.1 ms, so that the plain Python floor shows as more than 0.000.
    if p(xs, 99) < 1e-4:
        return f"{p(xs, 50) * 1e6:.3f} / {p(xs, 99) * 1e6:.3f} µs"
    return f"{p(xs, 50) * 1e3:.3f} / {p(xs, 99) * 1e3:.3f} ms"


def create_db(admin_url, name, sync):
    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}"')
        c.execute(f'CREATE DATABASE "{name}"')
        # NB: a database default applies to the sessions opened after it, so before the
        # system under test connects; checked below from such a session.
        c.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = {sync}')
    with psycopg.connect(db_url(admin_url, name)) as c:
        got = c.execute("SHOW synchronous_commit").fetchone()[0]
    assert got == sync, (name, got)
    return db_url(admin_url, name)


# Main-fork pages of each table of the schema whose name matches, its indexes and TOAST.
SIZES = """
SELECT c.relname, pg_relation_size(c.oid)
  + coalesce((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i
              WHERE i.indrelid IN (c.oid, c.reltoastrelid)), 0)
  + CASE WHEN c.reltoastrelid <> 0 THEN pg_relation_size(c.reltoastrelid) ELSE 0 END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname = %s AND c.relname LIKE %s
"""


class Meter:
    """Sizes, WAL position and commits of one database, before and after."""

    def __init__(self, admin_url, name, schema, like):
        self.admin_url, self.name, self.schema, self.like = admin_url, name, schema, like

    def read(self):
        with psycopg.connect(db_url(self.admin_url, self.name), autocommit=True) as c:
            sizes = dict(c.execute(SIZES, (self.schema, self.like)).fetchall())
        # NB: from the admin database, so that these reads commit nothing in the one measured.
        with psycopg.connect(self.admin_url, autocommit=True) as c:
            lsn = c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
            commits = c.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s",
                                (self.name,)).fetchone()[0]
            # The WAL position as a byte count, for the difference.
            wal = c.execute("SELECT pg_wal_lsn_diff(%s, '0/0')", (lsn,)).fetchone()[0]
        return sizes, int(wal), commits

    def start(self):
        self.before = self.read()

    def report(self, steps):
        (s0, w0, c0), (s1, w1, c1) = self.before, self.read()
        grown = {k: v - s0.get(k, 0) for k, v in s1.items() if v - s0.get(k, 0)}
        each = ", ".join(f"{k} {v / steps:.0f}" for k, v in sorted(grown.items(), key=lambda kv: -kv[1]))
        return (f"disk {sum(grown.values()) / steps:.0f} B/step [{each}], "
                f"WAL {(w1 - w0) / steps:.0f} B/step, commits/step {(c1 - c0) / steps:.2f}")


def settle():
    # A backend flushes its statistics when idle, at most once a second (PostgreSQL 15).
    time.sleep(1.5)


def flush(admin_url, name, sync):
    # The server's floor at that moment: one one-row INSERT a commit, as a step's record
    # would be at best. With `on` it is the WAL flush, which the build sharing this disk
    # makes vary from round to round.
    with psycopg.connect(create_db(admin_url, name, sync), autocommit=True) as c:
        c.execute("CREATE TABLE t (n int)")
        times = []
        for n in range(FLUSH_WARMUP + FLUSH_COMMITS):
            t = time.perf_counter()
            c.execute("INSERT INTO t VALUES (%s)", (n,))
            if n >= FLUSH_WARMUP:
                times.append(time.perf_counter() - t)
    print(f"PostgreSQL, a one-row INSERT a commit, synchronous_commit {sync}: {ms(times)}",
          flush=True)


def plain():
    # The floor under DBOS: the workflow's 100 no-op calls as plain Python.
    def step(i):
        return i

    def workflow():
        return [step(i) for i in range(DBOS_STEPS)]

    times = []
    for n in range(DBOS_WARMUP + DBOS_RUNS):
        t = time.perf_counter()
        workflow()
        if n >= DBOS_WARMUP:
            times.append((time.perf_counter() - t) / DBOS_STEPS)
    print(f"Python, {DBOS_STEPS} no-op calls, no DBOS: per step {ms(times)}", flush=True)


def dbos(admin_url, name, sync):
    from dbos import DBOS, DBOSConfig

    url = create_db(admin_url, name, sync)
    alone = []

    @DBOS.step()
    def step(i):
        return i

    @DBOS.workflow()
    def workflow(record):
        out = []
        for i in range(DBOS_STEPS):
            t = time.perf_counter()
            out.append(step(i))
            if record:
                alone.append(time.perf_counter() - t)
        return len(out)

    config: DBOSConfig = {"name": "anchor-bench", "system_database_url": url, "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    meter = Meter(admin_url, name, "dbos", "%")
    settle()
    meter.start()
    times = []
    for n in range(DBOS_WARMUP + DBOS_RUNS):
        t = time.perf_counter()
        assert workflow(n >= DBOS_WARMUP) == DBOS_STEPS
        if n >= DBOS_WARMUP:
            times.append((time.perf_counter() - t) / DBOS_STEPS)
    DBOS.destroy()
    settle()
    steps = (DBOS_WARMUP + DBOS_RUNS) * DBOS_STEPS
    print(f"DBOS, {DBOS_STEPS} no-op steps a workflow, synchronous_commit {sync}: "
          f"per step {ms(times)}, step alone {ms(alone)}, {meter.report(steps)}", flush=True)


def graph(nodes, checkpointer, delta=False):
    from langgraph.graph import END, START, StateGraph

    if delta:
        # Opt-in, beta in LangGraph 1.2: checkpoints keep the channel's writes, not its whole
        # value (a snapshot every 100 updates).
        from langgraph.channels.delta import DeltaChannel

        reducer = DeltaChannel(lambda state, writes: state + [x for w in writes for x in w], list)
    else:
        reducer = operator.add

    class State(TypedDict):
        items: Annotated[list[str], reducer]

    g = StateGraph(State)
    for i in range(nodes):
        # A short string a node, so that the state grows as a plan's variables do.
        g.add_node(f"n{i}", lambda state, i=i: {"items": [f"output of step {i}"]})
        g.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    g.add_edge(f"n{nodes - 1}", END)
    return g.compile(checkpointer=checkpointer)


def run_graph(app, nodes, durability=None):
    times, thread = [], None
    for n in range(LG_WARMUP + LG_RUNS):
        thread = str(uuid.uuid4())
        kw = {"config": {"configurable": {"thread_id": thread}}}
        if durability:
            kw["durability"] = durability
        t = time.perf_counter()
        out = app.invoke({"items": []}, **kw)
        if n >= LG_WARMUP:
            times.append((time.perf_counter() - t) / nodes)
        assert len(out["items"]) == nodes, len(out["items"])
    return times, thread


def langgraph_plain(nodes):
    times, _ = run_graph(graph(nodes, None), nodes)
    print(f"LangGraph, {nodes} nodes, no checkpointer: per step {ms(times)}", flush=True)


def langgraph(admin_url, name, sync, nodes, durability, delta):
    from langgraph.checkpoint.postgres import PostgresSaver

    url = create_db(admin_url, name, sync)
    meter = Meter(admin_url, name, "public", "checkpoint%")
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        app = graph(nodes, saver, delta)
        settle()
        meter.start()
        times, last = run_graph(app, nodes, durability)
    settle()
    # The last run's channel blob and checkpoint row, first and last: does a step's record
    # grow with the state?
    with psycopg.connect(url) as c:
        blobs = [r[0] for r in c.execute(
            "SELECT coalesce(octet_length(blob), 0) FROM checkpoint_blobs"
            " WHERE thread_id = %s AND channel = 'items' ORDER BY version", (last,))]
        rows = [r[0] for r in c.execute(
            "SELECT pg_column_size(checkpoint) + pg_column_size(metadata) FROM checkpoints"
            " WHERE thread_id = %s ORDER BY checkpoint_id", (last,))]
    steps = (LG_WARMUP + LG_RUNS) * nodes
    # NB: a DeltaChannel keeps no blob of its value: its writes are the record.
    blob = f"{blobs[0]}/{blobs[-1]} B ({len(blobs)} blobs)" if blobs else "none"
    kind = "DeltaChannel" if delta else "operator.add"
    print(f"LangGraph, {nodes} nodes ({kind}), PostgresSaver, durability {durability}, "
          f"synchronous_commit {sync}: per step {ms(times)}, {meter.report(steps)}, "
          f"a run's items blob first/last {blob}, "
          f"checkpoint row first/last {rows[0]}/{rows[-1]} B ({len(rows)} rows)", flush=True)


# (label, arguments to this script's `one` mode), in the order they run in a round.
MEASURES = [
    ("flush_on", ["flush", "on"]),
    ("flush_off", ["flush", "off"]),
    ("plain", ["plain"]),
    ("dbos_on", ["dbos", "on"]),
    ("dbos_off", ["dbos", "off"]),
    ("lg_plain", ["lgplain", "14"]),
    ("lg_on_sync", ["lg", "on", "14", "sync", "add"]),
    ("lg_on_async", ["lg", "on", "14", "async", "add"]),
    ("lg_off_sync", ["lg", "off", "14", "sync", "add"]),
    ("lg_off_async", ["lg", "off", "14", "async", "add"]),
    # The same 4x longer: bytes per step against the state's size.
    ("lg56_off_async", ["lg", "off", "56", "async", "add"]),
    ("lg56d_off_async", ["lg", "off", "56", "async", "delta"]),
]


def one(admin_url, name, kind, *args):
    if kind == "flush":
        flush(admin_url, name, args[0])
    elif kind == "plain":
        plain()
    elif kind == "dbos":
        dbos(admin_url, name, args[0])
    elif kind == "lgplain":
        langgraph_plain(int(args[0]))
    elif kind == "lg":
        sync, nodes, durability, reducer = args
        langgraph(admin_url, name, sync, int(nodes), durability, reducer == "delta")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "one":
        return one(*sys.argv[2:])
    admin_url, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2
    for r in range(1, rounds + 1):
        for label, args in MEASURES:
            name = f"anchor_{label}_r{r}"
            out = subprocess.run([sys.executable, __file__, "one", admin_url, name, *args],
                                 check=True, stdout=subprocess.PIPE, text=True).stdout
            for line in out.splitlines():
                print(f"round {r}: {line}", flush=True)
            if label not in ("plain", "lg_plain"):
                # Read and done with: the disk keeps one measure's database at a time.
                with psycopg.connect(admin_url, autocommit=True) as c:
                    c.execute(f'DROP DATABASE "{name}"')


if __name__ == "__main__":
    main()

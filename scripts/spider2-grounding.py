#!/usr/bin/env python3
"""Grounding (schema linking) evaluation sets from Spider 2.0, for
`cargo run --release -p plan-sql --example grounding -- --per-db DIR...` (BENCHMARKS.md).

Spider2: github.com/xlang-ai/Spider2 at commit e12c5f1e6550a5df88995520c3bf00bbe7bad2d2
(2025-11-07); only its spider2-lite/ and spider2-snow/ folders are read. Re-run:

    pip install sqlglot     # 30.30.0 built the sets
    git clone https://github.com/xlang-ai/Spider2 && git -C Spider2 checkout e12c5f1e6550
    python3 scripts/spider2-grounding.py Spider2 /work/data/grounding [bigquery snowflake sqlite]

It writes OUT/{bigquery,snowflake,sqlite}/ (the data stays out of the repo), each with
- tables.json: Spider's shape, one object per database: db_id, table_names_original,
  column_names_original ([-1, "*"] first), column_types, primary_keys and foreign_keys (empty:
  the resources have none), table_descriptions and column_descriptions (indexed like the
  names), sample_values ({"table.column": [up to five distinct strings]});
- dev.json: instance_id, db_id, question, gold_tables, gold_columns ("table.column"), both
  lowercase, and external_knowledge (the text of the document it names) when there is one;
and prints a summary: questions, databases, tables a database, and the questions to look at.

The sets (a question is kept only with a gold SQL file, evaluation_suite/gold/sql/ID.sql):
- bigquery: spider2-lite's bq*/ga* questions, schemas from resource/databases/bigquery;
- snowflake: spider2-snow's questions but sf_local* (they repeat the held-out sqlite ones);
  spider2-snow has no gold SQL for sf001, spider2-lite's (the same question) is used;
- sqlite (held out): spider2-lite's local* questions, schemas from resource/databases/sqlite.

A database's tables are its resource JSON files (one a table: columns, types, descriptions,
sample rows), named by file name; DDL.csv gives table descriptions only (it lacks tables, or
lists other databases', in places). Date-sharded tables (name ending in YYYYMMDD:
events_20210101) are folded into one `prefix*` table (events_*), and tables of one name in
two datasets of a database into one; such a table has the union of the columns, the newest
member giving samples and descriptions first. BigQuery's columns are the top-level ones (a
STRUCT's fields are not columns). Sampled values over 200 characters are left out.

Gold: each gold SQL is parsed by sqlglot in its dialect, identifiers lowercased, tables renamed
to the schema's (project/dataset/schema dropped, shards folded), and qualified against the
schema (stars not expanded). Gold tables are the tables it reads (not CTEs, nor the tables
and functions it creates); a wildcard (`ga_sessions_2017*`, `gsod19*`) reads every table of
the schema it matches. Gold columns are the columns resolved to a schema table, followed
through `SELECT *` subqueries and CTEs; where sqlglot cannot qualify a query (fields of an
UNNEST without alias), an unqualified column goes to the one table of its scope (or an
enclosing one) having it. A question with gold tables missing from the schema keeps those
found (the summary lists them); one with none found would be dropped. Output is sorted:
reruns give identical files.
"""
import csv
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema

csv.field_size_limit(sys.maxsize)

# name: (questions, question text key, keep(instance_id), databases, dialect,
#        gold SQL folders (the first having a question's wins), documents)
SETS = {
    "bigquery": ("spider2-lite/spider2-lite.jsonl", "question",
                 lambda i: i.startswith(("bq", "ga")),
                 "spider2-lite/resource/databases/bigquery", "bigquery",
                 ("spider2-lite/evaluation_suite/gold/sql",), "spider2-lite/resource/documents"),
    "snowflake": ("spider2-snow/spider2-snow.jsonl", "instruction",
                  lambda i: not i.startswith("sf_local"),
                  "spider2-snow/resource/databases", "snowflake",
                  ("spider2-snow/evaluation_suite/gold/sql",
                   "spider2-lite/evaluation_suite/gold/sql"),
                  "spider2-snow/resource/documents"),
    "sqlite": ("spider2-lite/spider2-lite.jsonl", "question",
               lambda i: i.startswith("local"),
               "spider2-lite/resource/databases/sqlite", "sqlite",
               ("spider2-lite/evaluation_suite/gold/sql",), "spider2-lite/resource/documents"),
}

SHARD = re.compile(r"^(.*?)(?:19|20)\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])$")


def fold(name):
    """A table's name in the schema: date shards as `prefix*`."""
    m = SHARD.match(name)
    return m.group(1) + "*" if m else name


def key(db):
    """Question and folder names of a database differ in case and `-`/`_` (Db-IMDB)."""
    return db.lower().replace("-", "_")


def table_descriptions(folder):
    """Table name -> description from a dataset's DDL.csv (its column, or BigQuery's OPTIONS)."""
    out = {}
    path = folder / "DDL.csv"
    if not path.exists():
        return out
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            text = (row.get("description") or "").strip()
            ddl = row.get("ddl") or ""
            # NB: BigQuery's table OPTIONS come after the columns' closing parenthesis.
            m = re.search(r"\n\)\s*(?:(?:PARTITION|CLUSTER) BY[^\n]*\n)*OPTIONS\((.*)\);?\s*$",
                          ddl, re.S)
            if not text and m:
                d = re.search(r'description\s*=\s*"((?:[^"\\]|\\.)*)"', m.group(1), re.S)
                if d:
                    text = re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1),
                                  d.group(1))
            out[row["table_name"].split(".")[-1].strip()] = text.strip()  # DB.SCHEMA.T, some
    return out


def sample(v):
    if v is None or isinstance(v, (dict, list)):
        return None
    s = str(v).strip()
    return s if s and len(s) <= 200 else None


def load_db(folder):
    """One database's tables: lowercase folded name -> table (original folded name, columns)."""
    members = defaultdict(list)  # folded lowercase name -> [(dataset, file)]
    descs = {}
    for dataset in sorted(p for p in folder.iterdir() if p.is_dir()) or [folder]:
        descs[dataset.name] = table_descriptions(dataset)
        for f in sorted(dataset.glob("*.json")):
            members[fold(f.stem.strip()).lower()].append((dataset, f))
    tables = {}
    for low, files in sorted(members.items()):
        files.sort(key=lambda df: (df[1].stem, df[0].name), reverse=True)  # newest shard first
        name = fold(files[0][1].stem.strip())
        cols = {}  # lowercase -> dict(name, type, desc, values)
        tdesc = ""
        for dataset, f in files:
            d = json.load(open(f, encoding="utf-8"))
            tdesc = tdesc or descs[dataset.name].get(f.stem.strip(), "")
            names, types = d["column_names"], d["column_types"]
            # NB: BigQuery's descriptions follow nested_column_names when that list is longer.
            described = d.get("nested_column_names") or names
            if len(d.get("description") or []) != len(described):
                described = names
            about = {}
            for n, t in zip(described, d.get("description") or []):
                about.setdefault(n, (t or "").strip())
            for n, t in zip(names, types):
                c = cols.setdefault(n.lower(), {"name": n, "type": t, "desc": "", "values": []})
                c["desc"] = c["desc"] or about.get(n, "")
                if not c["values"]:
                    vals = (sample(r.get(n)) for r in d.get("sample_rows") or [])
                    c["values"] = list(dict.fromkeys(v for v in vals if v))[:5]
        tables[low] = {"name": name, "desc": tdesc, "columns": cols}
    return tables


def spider_db(db_id, tables):
    """A database in Spider's tables.json shape."""
    out = {"db_id": db_id, "table_names_original": [], "column_names_original": [[-1, "*"]],
           "column_types": ["text"], "primary_keys": [], "foreign_keys": [],
           "table_descriptions": [], "column_descriptions": [""], "sample_values": {}}
    for i, t in enumerate(tables.values()):
        out["table_names_original"].append(t["name"])
        out["table_descriptions"].append(t["desc"])
        for c in t["columns"].values():
            out["column_names_original"].append([i, c["name"]])
            out["column_types"].append(c["type"])
            out["column_descriptions"].append(c["desc"])
            if c["values"]:
                out["sample_values"][f'{t["name"]}.{c["name"]}'] = c["values"]
    return out


def resolve(name, tables):
    """Schema tables (lowercase) that a table reference (lowercase, unqualified) reads."""
    if name in tables:
        return {name}
    if name.endswith("*"):  # a BigQuery wildcard: every table whose name starts so
        prefix = name[:-1]
        return {low for low, t in tables.items()
                if low.startswith(prefix) or (low.endswith("*") and prefix.startswith(low[:-1]))}
    low = fold(name)
    return {low} if low in tables else set()


def starred(name, scope, tables, local, depth=0):
    """Schema tables a column of a subquery or CTE comes from when it selects `*` (or `t.*`)."""
    if depth > 10:
        return set()
    if scope.set_operation_scopes:
        return set().union(*(starred(name, s, tables, local, depth + 1)
                             for s in scope.set_operation_scopes))
    select = scope.expression
    if not isinstance(select, exp.Select) or not any(
            isinstance(p, exp.Star) or isinstance(p.this, exp.Star) for p in select.expressions):
        return set()
    out = set()
    for s in scope.sources.values():
        if isinstance(s, Scope):
            out |= starred(name, s, tables, local, depth + 1)
        elif isinstance(s, exp.Table) and s.name not in local:
            out |= {low for low in resolve(s.name, tables) if name in tables[low]["columns"]}
    return out


def owners(col, scope, tables, local, qualified):
    """Schema tables a column is read from: its source's, or, if qualify failed and the column
    names no source, the one table read in its scope or an enclosing one having the column."""
    src = scope.sources.get(col.table)
    if isinstance(src, exp.Table) and src.name not in local:
        return {low for low in resolve(src.name, tables) if col.name in tables[low]["columns"]}
    if isinstance(src, Scope):
        return starred(col.name, src, tables, local)
    if qualified or src is not None:
        return set()
    having = set()
    while scope and not having:
        for s in scope.sources.values():
            if isinstance(s, exp.Table) and s.name not in local:
                having |= {low for low in resolve(s.name, tables)
                           if col.name in tables[low]["columns"]}
        scope = scope.parent
    return having if len(having) == 1 else set()


def gold(sql, dialect, tables, schema):
    """(gold tables, gold columns, missing table names, statements left unqualified) of a
    gold SQL, or None if it does not parse."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s]
    except sqlglot.errors.SqlglotError:
        return None
    found, columns, missing, unqualified = set(), set(), set(), 0
    for tree in statements:
        for ident in tree.find_all(exp.Identifier):
            ident.set("this", ident.name.lower())
            ident.set("quoted", True)
        local = {c.alias_or_name for c in tree.find_all(exp.CTE)}
        for c in tree.find_all(exp.Create):  # temporary tables and functions
            made = c.this
            while isinstance(made, (exp.Schema, exp.UserDefinedFunction)):
                made = made.this
            local.add(made.name if isinstance(made, exp.Expression) else str(made))
        for t in list(tree.find_all(exp.Table)):
            if not t.name or t.name in local:
                continue
            hit = resolve(t.name, tables)
            found |= hit
            if not hit:
                missing.add(t.name)
                continue
            # NB: named as in the schema, unqualified, so that qualify finds its columns
            # (a wildcard over several tables gets their columns under its own name).
            name = exp.table_(exp.to_identifier(next(iter(hit)) if len(hit) == 1 else t.name,
                                                quoted=True))
            if len(hit) > 1 and not schema.find(name, raise_on_missing=False):
                cols = {c: "UNKNOWN" for low in sorted(hit) for c in tables[low]["columns"]}
                schema.add_table(name, cols)
            t.set("this", name.this)
            t.set("db", None)
            t.set("catalog", None)
        # NB: alias references stop qualify where a source is unknown (an UNNEST's fields):
        # tried without expanding them, then left unqualified.
        qualified = False
        for expand in (True, False):
            try:
                tree = qualify(tree.copy(), dialect=dialect, schema=schema, expand_stars=False,
                               expand_alias_refs=expand, validate_qualify_columns=False,
                               identify=False)
                qualified = True
                break
            except Exception:
                pass
        unqualified += not qualified
        try:
            scopes = traverse_scope(tree)
        except Exception:
            scopes = []
        for scope in scopes:
            for col in scope.columns:
                for low in owners(col, scope, tables, local, qualified):
                    columns.add(f"{low}.{col.name}")
    return found, columns, missing, unqualified


def build(root, out, name):
    jsonl, text, keep, dbroot, dialect, golddirs, docs = SETS[name]
    root = Path(root)
    folders = {key(p.name): p for p in (root / dbroot).iterdir() if p.is_dir()}
    sqls = {}
    for d in reversed(golddirs):
        sqls.update({p.stem: p for p in (root / d).glob("*.sql")})
    questions = [json.loads(line) for line in open(root / jsonl, encoding="utf-8")]
    questions = [q for q in questions if keep(q["instance_id"]) and q["instance_id"] in sqls]
    dbs, dev, notes = {}, [], defaultdict(list)  # notes: what -> instance ids
    for q in sorted(questions, key=lambda q: q["instance_id"]):
        iid = q["instance_id"]
        folder = folders.get(key(q.get("db") or q.get("db_id")))
        if folder is None:
            notes["dropped: no database"].append(iid)
            continue
        if folder.name not in dbs:
            tables = load_db(folder)
            schema = MappingSchema(
                {low: {c: "UNKNOWN" for c in t["columns"]} for low, t in tables.items()},
                dialect=dialect, normalize=False)
            dbs[folder.name] = (tables, schema)
        tables, schema = dbs[folder.name]
        if sqls[iid].parent != root / golddirs[0]:
            notes[f"gold SQL from {sqls[iid].parent.relative_to(root)}"].append(iid)
        g = gold(sqls[iid].read_text(encoding="utf-8"), dialect, tables, schema)
        if g is None:
            notes["dropped: gold SQL not parsed"].append(iid)
            continue
        found, columns, missing, unqualified = g
        if unqualified:
            notes["gold SQL not qualified by sqlglot (columns by name)"].append(iid)
        if missing:
            kept = "kept with the others" if found else "dropped: none in the schema"
            notes[f"gold tables missing from the schema, {kept}"].append(
                f"{iid} ({', '.join(sorted(missing))})")
        if not found:
            continue
        item = {"instance_id": iid, "db_id": folder.name, "question": q[text],
                "gold_tables": sorted(found), "gold_columns": sorted(columns)}
        if q.get("external_knowledge"):
            doc = root / docs / q["external_knowledge"]
            if doc.exists():
                item["external_knowledge"] = doc.read_text(encoding="utf-8")
            else:
                notes["external_knowledge document missing"].append(iid)
        if not columns:
            notes["no gold column"].append(iid)
        if len(found) > 10:
            notes["more than 10 gold tables"].append(f"{iid} ({len(found)})")
        dev.append(item)

    used = sorted({q["db_id"] for q in dev})
    target = Path(out) / name
    target.mkdir(parents=True, exist_ok=True)
    with open(target / "tables.json", "w", encoding="utf-8") as f:
        json.dump([spider_db(db, dbs[db][0]) for db in used], f, ensure_ascii=False,
                  separators=(",", ":"))
    with open(target / "dev.json", "w", encoding="utf-8") as f:
        json.dump(dev, f, ensure_ascii=False, indent=1)

    sizes = [len(dbs[db][0]) for db in used]
    per = [len(q["gold_tables"]) for q in dev]
    print(f"{target}: {len(dev)} of {len(questions)} questions with gold SQL, "
          f"{len(used)} databases of {min(sizes)}-{max(sizes)} tables ({sum(sizes)} in all), "
          f"{min(per)}-{max(per)} gold tables a question, "
          f"{sum('external_knowledge' in q for q in dev)} with external knowledge")
    for what, ids in sorted(notes.items()):
        print(f"  {what}: {len(ids)}\n    " + "\n    ".join(ids))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: spider2-grounding.py SPIDER2_CHECKOUT OUT_DIR [SET...]"
                 f" (sets: {' '.join(SETS)})")
    for name in sys.argv[3:] or SETS:
        build(sys.argv[1], sys.argv[2], name)

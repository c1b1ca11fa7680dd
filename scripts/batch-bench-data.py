#!/usr/bin/env python3
# Usage: mkdir -p /tmp/sched && cd /tmp/sched && python3 /path/to/scripts/batch-bench-data.py
# Writes aspects.json (13 calls: 4 x (kg, vector) -> 4 syntheses -> final) and its cassette
# with latency 0 and 300 ms, plus list files of N identical runs.
import json, sys
A = ["purpose", "key features", "technical details", "use cases"]
plan = [{"seq_no": 0, "type": "reasoning", "parameters": {
    "chain_of_thoughts": "Retrieve each aspect from both sources, synthesise each, combine.",
    "dependency_analysis": "Aspects are independent; each synthesis needs its two retrievals."}}]
tape, seq, ctx = [], 1, ""
for i, a in enumerate(A):
    plan.append({"seq_no": seq, "type": "calling", "parameters": {"tool_name": "retrieve_knowledge_graph",
        "tool_params": {"query": f"TiDB {a}"}, "output_vars": [f"kg_{i}"]}})
    plan.append({"seq_no": seq + 1, "type": "calling", "parameters": {"tool_name": "vector_search",
        "tool_params": {"query": f"What are the {a} of TiDB?", "top_k": 3}, "output_vars": [f"vs_{i}"]}})
    tape.append(("retrieve_knowledge_graph", {"query": f"TiDB {a}"}, f"kg {i}"))
    tape.append(("vector_search", {"query": f"What are the {a} of TiDB?", "top_k": 3}, f"vs {i}"))
    seq += 2
for i, a in enumerate(A):
    plan.append({"seq_no": seq, "type": "calling", "parameters": {"tool_name": "llm_generate",
        "tool_params": {"prompt": f"Explain the {a} of TiDB.",
                        "context": f"Knowledge graph: ${{kg_{i}}}\nVector search: ${{vs_{i}}}"},
        "output_vars": [f"explanation_{i}"]}})
    tape.append(("llm_generate", {"prompt": f"Explain the {a} of TiDB.",
                 "context": f"Knowledge graph: kg {i}\nVector search: vs {i}"}, f"explanation {i}"))
    ctx += f"{a}: ${{explanation_{i}}}\n"
    seq += 1
plan.append({"seq_no": seq, "type": "calling", "parameters": {"tool_name": "llm_generate",
    "tool_params": {"prompt": "Combine the explanations into one answer.", "context": ctx},
    "output_vars": ["final_answer"]}})
tape.append(("llm_generate", {"prompt": "Combine the explanations into one answer.",
             "context": "".join(f"{a}: explanation {i}\n" for i, a in enumerate(A))}, "TiDB, explained."))
json.dump(plan, open("aspects.json", "w"), indent=1)
for ms in (0, 300):
    with open(f"aspects.{ms}ms.jsonl", "w") as f:
        for tool, args, out in tape:
            f.write(json.dumps({"tool": tool, "args": args, "output": out, "latency_ms": ms}) + "\n")
for n, ms in ((10000, 0), (1000, 300), (1000, 0), (1, 300)):
    open(f"runs.{n}x{ms}ms.txt", "w").write(f"aspects.json aspects.{ms}ms.jsonl\n" * n)

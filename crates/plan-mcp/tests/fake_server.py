"""An MCP server over stdio in plain Python (no SDK), for plan-mcp's tests: it says
exactly what a test needs, including what a real server should not.

    python3 fake_server.py [--tools N] [--bad-name JSON] [--starts FILE]

Tools: `echo` (its `text`), `big` (a text of `bytes` bytes), `t0` .. `t<N-1>` (listed
in pages of 5,000), and one named by the JSON string `--bad-name`. `--starts` appends a
line to FILE each time the server starts.
"""

import json
import sys

PAGE = 5000


def arg(name, default=None):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


def tools():
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    out = [
        {"name": "echo", "inputSchema": schema, "annotations": {"readOnlyHint": True}},
        {
            "name": "big",
            "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}},
            "annotations": {"readOnlyHint": True},
        },
    ]
    out += [{"name": f"t{i}", "inputSchema": schema} for i in range(int(arg("--tools", "0")))]
    bad = arg("--bad-name")
    if bad is not None:
        out.append({"name": json.loads(bad), "inputSchema": schema})
    return out


def answer(request, listing):
    method = request.get("method")
    params = request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake", "version": "0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        start = int(params.get("cursor") or 0)
        page = {"tools": listing[start : start + PAGE]}
        if start + PAGE < len(listing):
            page["nextCursor"] = str(start + PAGE)
        return page
    if method == "tools/call":
        args = params.get("arguments") or {}
        if params.get("name") == "big":
            text = "x" * int(args["bytes"])
        else:
            text = str(args.get("text", ""))
        return {"content": [{"type": "text", "text": text}]}
    return None


def main():
    starts = arg("--starts")
    if starts:
        with open(starts, "a") as f:
            f.write("started\n")
    listing = tools()
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue
        result = answer(request, listing)
        if result is None:
            reply = {"jsonrpc": "2.0", "id": request["id"],
                     "error": {"code": -32601, "message": "no such method"}}
        else:
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

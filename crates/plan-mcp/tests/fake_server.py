"""An MCP server over stdio in plain Python (no SDK), for plan-mcp's tests: it says
exactly what a test needs, including what a real server should not.

    python3 fake_server.py [--tools N] [--bad-name JSON] [--starts FILE] [--http]

Tools: `echo` (its `text`), `big` (a text of `bytes` bytes), `t0` .. `t<N-1>` (listed
in pages of 5,000), and one named by the JSON string `--bad-name`. `--starts` appends a
line to FILE each time the server starts. `--http`: streamable HTTP on a loopback port
(printed as the first line of stdout) instead of stdio, each answer a JSON body.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def reply(request, listing):
    result = answer(request, listing)
    if result is None:
        return {"jsonrpc": "2.0", "id": request["id"],
                "error": {"code": -32601, "message": "no such method"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def serve_http(listing):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "id" not in request:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = json.dumps(reply(request, listing)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_DELETE = do_GET

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A client that hangs up on an answer it refuses is no error here.
    server.handle_error = lambda *_: None
    print(server.server_address[1], flush=True)
    server.serve_forever()


def main():
    starts = arg("--starts")
    if starts:
        with open(starts, "a") as f:
            f.write("started\n")
    listing = tools()
    if "--http" in sys.argv:
        return serve_http(listing)
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue
        sys.stdout.write(json.dumps(reply(request, listing)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

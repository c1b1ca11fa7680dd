"""An MCP server for planvm's tests, written with the Python SDK.

    python server.py stdio          # over stdio
    python server.py http PORT      # streamable HTTP at http://127.0.0.1:PORT/mcp

Tools: `lookup` (read-only, structured), `slow` (read-only, sleeps), `fail` (isError),
`add_note` (destructive), `die` (the process exits mid-call), `quit_soon` (it exits
between calls), `whoami` (the Authorization header it was sent, HTTP only: to show
planvm redacts it).
"""

import asyncio
import os
import sys
import threading

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("planvm-test")
READ = ToolAnnotations(readOnlyHint=True)
notes: list[str] = []


@server.tool(annotations=READ)
def lookup(city: str, unit: str = "C") -> dict:
    """The weather of a city."""
    return {"city": city, "temperature": 21 if unit == "C" else 70, "unit": unit}


@server.tool(annotations=READ)
async def slow(seconds: float) -> str:
    """Waits, then answers."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(annotations=READ)
def fail(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"cannot do it: {reason}")


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def add_note(text: str) -> int:
    """Adds a note; returns how many there are."""
    notes.append(text)
    return len(notes)


@server.tool(annotations=READ)
def die() -> str:
    """Exits the server in the middle of the call."""
    print("dying now", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool(annotations=READ)
def quit_soon(seconds: float) -> str:
    """Answers, then exits the server a moment later (between calls)."""
    threading.Timer(seconds, lambda: os._exit(0)).start()
    return "bye"


@server.tool(annotations=READ)
def whoami(ctx: Context) -> str:
    """The Authorization header of the request."""
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None) or {}
    return headers.get("authorization", "none")


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        print("test server on stdio", file=sys.stderr, flush=True)
        server.run("stdio")

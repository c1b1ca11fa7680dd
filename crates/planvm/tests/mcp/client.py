"""A client of `planvm mcp` (stdio) or of `planvm serve`'s `/mcp` (streamable HTTP), with
the Python MCP SDK, for planvm's tests.

    python client.py stdio PLANVM ARGS... < calls.json
    python client.py http URL TOKEN < calls.json

calls.json: a list of [tool, arguments]; the list of tools comes first. Prints one JSON
object: {"tools": [...], "results": [{"isError", "text", "structured"}, ...]}.
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def session_calls(read, write, calls):
    async with ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        tools = [
            {"name": t.name, "required": (t.input_schema or {}).get("required", [])}
            for t in listed.tools
        ]
        results = []
        for name, args in calls:
            r = await session.call_tool(name, args)
            results.append(
                {
                    "isError": bool(r.is_error),
                    "text": "\n".join(c.text for c in r.content if c.type == "text"),
                    "structured": r.structured_content,
                }
            )
        return {"tools": tools, "results": results}


async def main():
    calls = json.load(sys.stdin)
    if sys.argv[1] == "stdio":
        params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])
        async with stdio_client(params) as (read, write):
            out = await session_calls(read, write, calls)
    else:
        url, token = sys.argv[2], sys.argv[3]
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                out = await session_calls(read, write, calls)
    print(json.dumps(out))


asyncio.run(main())

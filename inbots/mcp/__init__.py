"""The MCP surface: the agent tools of ``docs/mcp.md``, served two ways.

::

    tools.py     the twelve tools, defined once: names, descriptions, argument and result
                 schemas, text renderings, and the low-level SDK server that serves them
    backends.py  what a tool calls: LocalBackend runs the service functions in a unit of work
                 (Streamable HTTP at /mcp); HttpBackend calls the REST API (stdio)
    server.py    the /mcp ASGI endpoint: resolves the bearer key to an agent before any tool
                 runs (401/403 at the HTTP layer), then hands the request to the SDK transport
    stdio.py     ``inbots mcp``: the same tools over stdio, backed by the HTTP API

The tools are thin adapters: limits, errors and stamps come from the same service code as HTTP.
"""

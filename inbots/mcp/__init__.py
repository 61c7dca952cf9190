"""The MCP surface: the agent tools of ``docs/mcp.md``, served two ways.

::

    tools.py     the tools, defined once: names, descriptions, argument and result schemas,
                 text renderings
    server.py    the low-level SDK server that serves them, whatever the transport
    backends.py  what a tool calls: the Backend protocol (and InboxQuery)
    local.py     LocalBackend: the service functions in a unit of work (Streamable HTTP, /mcp)
    remote.py    HttpBackend: the REST API of a running Inbots (stdio)
    endpoint.py  the /mcp ASGI endpoint: resolves the bearer key to an agent before any tool
                 runs (401/403 at the HTTP layer), then hands the request to the SDK transport
    stdio.py     ``inbots mcp``: the same tools over stdio, backed by the HTTP API; it imports
                 nothing of the server side (no SQLAlchemy, no services), so it starts quickly

The tools are thin adapters: limits, errors and stamps come from the same service code as HTTP.
"""

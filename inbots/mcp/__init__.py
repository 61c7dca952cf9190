"""The MCP surface: the agent tools of ``docs/mcp.md``, served at ``/mcp`` and relayed over stdio.

::

    arguments.py  each tool's argument model (the HTTP request models where there is one)
    spec.py       what a tool is (ToolSpec) and how one call runs: the arguments parsed, the
                  service run in a unit of work (ToolContext, as the HTTP route runs it), the
                  answer rendered, a failure as a tool error
    tools.py      the tools, defined once: name, description, arguments, result, the service
                  call and the rendering
    render.py     the text renderings of the answers
    server.py     the low-level SDK server that serves them
    endpoint.py   the /mcp ASGI endpoint: resolves the bearer key to an agent before any tool
                  runs (401/403 at the HTTP layer), then hands the request to the SDK transport
    stdio.py      ``inbots mcp``: a stdio relay to the server's /mcp; it imports nothing of the
                  server side (no SQLAlchemy, no services) and not the MCP SDK, so it starts quickly
    enrol.py      ``inbots mcp --enroll``: registers the agent, then relays as it

The tools are thin adapters: limits, errors and stamps come from the same service code as HTTP.
This package's ``__init__`` imports nothing, so ``inbots mcp`` does not load the server.
"""

"""The web plumbing that the three web adapters share (the HTTP API, ``/mcp`` and the dashboard):
the error envelope and its rendering, the request's size limits, and the protocol that caps the
request head. Below all three; the app factory (:mod:`inbots.app`) stands above them."""

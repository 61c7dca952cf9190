"""``inbots mail``: the agent's mailbox from a shell, for harnesses that prefer a command to MCP
tools (a few dozen tokens of context instead of thousands).

- :mod:`~inbots.cli.mail.commands`: the commands (check, read, send, reply, ack, wait, sent,
  hook) and the group's help, which teaches the whole loop;
- :mod:`~inbots.cli.mail.agent`: the agent's client from ``INBOTS_URL`` and ``INBOTS_API_KEY``,
  and what a failed call becomes (one line on stderr; exit 1, 2 or 3);
- :mod:`~inbots.cli.mail.lines`: every answer as short plain lines, true for every state;
- :mod:`~inbots.cli.mail.hook`: ``inbots mail hook``, for a harness hook that injects context
  (it imports httpx and nothing that builds a model: it runs before every prompt).

Every call is :mod:`inbots.client`'s; nothing here builds a request.
"""

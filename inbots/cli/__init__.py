"""The ``inbots`` command."""

from inbots.kit.startup import without_httpx_cli

without_httpx_cli()  # before anything imports httpx (inbots/kit/startup.py)

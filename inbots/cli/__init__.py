"""The ``inbots`` command."""

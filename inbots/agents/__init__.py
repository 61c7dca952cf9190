"""Agents (and the operator's own row, which receives and sends like one)."""

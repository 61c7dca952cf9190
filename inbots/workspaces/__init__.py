"""Workspaces and operator tokens."""

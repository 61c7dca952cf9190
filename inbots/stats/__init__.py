"""Workspace-wide counts for the operator: ``GET /v1/stats``, the CLI and the dashboard."""

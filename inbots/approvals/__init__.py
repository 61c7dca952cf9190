"""The approval gate: a workspace policy that holds matching messages until the operator
approves or rejects them (agents-and-governance.md §3)."""

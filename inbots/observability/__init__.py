"""Metrics (Prometheus) and structured logs, both free of tokens, keys, secrets and bodies."""

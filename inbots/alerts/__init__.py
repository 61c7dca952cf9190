"""The operator's alerts: a webhook of the workspace's operator told of deliveries that stalled or
failed, agents whose webhooks keep failing, and messages held for approval."""

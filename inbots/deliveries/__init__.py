"""Deliveries: one recipient's copy of one message, its receipt stamps and attempt log."""

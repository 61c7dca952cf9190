"""Threads (one per task) and their participants."""

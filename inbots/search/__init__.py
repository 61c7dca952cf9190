"""Message search: full-text over thread titles, summaries and bodies, ranked."""

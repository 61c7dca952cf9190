"""Bearer tokens resolved to exactly one caller before any handler runs."""

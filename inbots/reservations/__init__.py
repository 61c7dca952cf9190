"""Reservations: advisory leases on repository paths (coordination.md §1)."""

"""The ORM models: one module per group of tables, on one declarative base (:mod:`.base`).

Importing this package — which importing any of its modules does first — registers every table on
``Base.metadata``, so a query, a join, a foreign key or a migration never meets a table it does
not know, whichever entry point (web, worker, CLI, tests) came first. The models import nothing of
Inbots but :mod:`inbots.vocabulary`: every domain may import them, and they import no domain.
"""

from inbots.models import (  # noqa: F401  (the registry: every table on Base.metadata)
    agents,
    alerts,
    approvals,
    attachments,
    auth,
    deliveries,
    enrollments,
    events,
    heartbeats,
    messages,
    reservations,
    threads,
    workspaces,
)
from inbots.models.base import Base

__all__ = ["Base"]

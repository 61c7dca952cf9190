"""Events other than new mail that an agent is told of: a recipient acknowledged a message the
agent sent (``message.acknowledged``), a thread it is in had its close requested or was closed.
Each is one row per agent told, carried by the same engine as deliveries (see
:mod:`inbots.deliveries.outbox`)."""

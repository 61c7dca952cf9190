"""one statement admits a send (PostgreSQL)

``inbots_admit(...)``: what :mod:`inbots.messages.governance` did in three statements — spend a
rate-limit token, count the send into the caps ledger, take each recipient's advisory lock
(shared far from its caps, exclusive near them) and read the ledger again under the lock — in
one call. A VOLATILE PL/pgSQL function takes a fresh snapshot for each statement it runs, so the
read after the locks sees every send that committed before them, as a separate statement did.
SQLite has no such function and needs none (one writer at a time); the upgrade does nothing
there.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01 03:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Arguments: the sender; its recipients and their lock keys (same order); whether it is
# rate-limited, with the bucket's size, refill per second and the time now (epoch seconds); the
# lock namespace; the caps' thresholds: a recipient is locked exclusive when its pair row
# passes `pair_cap` or its ledger sum passes `exclusive_above` (0: that cap is off).
# Returns one row per recipient — its pair row with this send counted, its ledger sum as read
# under its lock, whether that lock is exclusive — each with the tokens left (NULL: not
# rate-limited); or, when the bucket is empty or there are no recipients, one row with only the
# tokens (the caller refuses the send: its rollback undoes the rest).
ADMIT = """
CREATE OR REPLACE FUNCTION inbots_admit(
    p_agent varchar, p_recipients varchar[], p_keys integer[],
    p_limited boolean, p_burst double precision, p_per_second double precision,
    p_now double precision, p_space integer, p_pair_cap integer, p_exclusive_above bigint)
RETURNS TABLE (recipient_id varchar, pair_count integer, total bigint, exclusive boolean,
               tokens double precision)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_tokens double precision;
    v_rids varchar[];
    v_pairs integer[];
    v_excl boolean[];
    v_key integer;
    v_x boolean;
BEGIN
    IF p_limited THEN
        INSERT INTO send_buckets AS b (agent_id, tokens, stamp)
        VALUES (p_agent, p_burst - 1, p_now)
        ON CONFLICT (agent_id) DO UPDATE SET
            tokens = LEAST(b.tokens + (p_now - b.stamp) * p_per_second, p_burst) - 1,
            stamp = p_now
        RETURNING b.tokens INTO v_tokens;
        IF v_tokens < 0 THEN
            RETURN QUERY SELECT NULL::varchar, NULL::integer, NULL::bigint, NULL::boolean,
                v_tokens;
            RETURN;
        END IF;
    END IF;
    IF coalesce(cardinality(p_recipients), 0) = 0 THEN
        RETURN QUERY SELECT NULL::varchar, NULL::integer, NULL::bigint, NULL::boolean, v_tokens;
        RETURN;
    END IF;
    -- Count the send: one pair row per recipient, in the order given (one sender's sends lock
    -- their rows in one order), and decide each lock's mode from the ledger as it stands.
    WITH counted AS (
        INSERT INTO cap_ledger AS l (recipient_id, sender_id, open_count)
        SELECT r, p_agent, 1 FROM unnest(p_recipients) AS r
        ON CONFLICT ON CONSTRAINT pk_cap_ledger DO UPDATE SET open_count = l.open_count + 1
        RETURNING l.recipient_id, l.open_count)
    SELECT array_agg(c.recipient_id), array_agg(c.open_count),
           array_agg((p_pair_cap > 0 AND c.open_count > p_pair_cap)
               OR (p_exclusive_above IS NOT NULL AND c.open_count + coalesce((
                   SELECT sum(o.open_count) FROM cap_ledger o
                   WHERE o.recipient_id = c.recipient_id AND o.sender_id <> p_agent), 0)
                   > p_exclusive_above))
    INTO v_rids, v_pairs, v_excl
    FROM counted c;
    -- Each key once, exclusive if any recipient on it needs it, in key order: two sends never
    -- deadlock.
    FOR v_key, v_x IN
        SELECT k.key, bool_or(x.excl)
        FROM unnest(p_recipients, p_keys) AS k(rid, key)
        JOIN unnest(v_rids, v_excl) AS x(rid, excl) ON x.rid = k.rid
        GROUP BY k.key ORDER BY k.key
    LOOP
        IF v_x THEN
            PERFORM pg_advisory_xact_lock(p_space, v_key);
        ELSE
            PERFORM pg_advisory_xact_lock_shared(p_space, v_key);
        END IF;
    END LOOP;
    -- A fresh snapshot: every send that committed before the locks were granted.
    RETURN QUERY
    SELECT x.rid, x.pair, (SELECT sum(l.open_count) FROM cap_ledger l
                           WHERE l.recipient_id = x.rid)::bigint, x.excl, v_tokens
    FROM unnest(v_rids, v_pairs, v_excl) AS x(rid, pair, excl);
END;
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(ADMIT)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "DROP FUNCTION IF EXISTS inbots_admit(varchar, varchar[], integer[], boolean, "
            "double precision, double precision, double precision, integer, integer, bigint)"
        )

"""Times read from the database are aware UTC on both backends; on PostgreSQL every session
runs in UTC, so psycopg answers UTC itself and UTCDateTime converts nothing per value."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from sqlalchemy import bindparam, text
from sqlalchemy.engine import make_url

from inbots.config import load_settings
from inbots.db.engine import Database, _utc_session
from inbots.db.uow import unit_of_work
from inbots.models.base import UTCDateTime


def test_times_come_back_aware_utc(db_url: str) -> None:
    url = make_url(db_url)
    if url.get_backend_name() == "postgresql":  # a zone of the URL's own is overridden
        url = url.update_query_dict({"options": "-c TimeZone=Pacific/Auckland"})
    db = Database(load_settings(database_url=url.render_as_string(hide_password=False)))
    sent = datetime(2026, 12, 7, 23, 30, 15, 123456, tzinfo=UTC)
    statement = text("SELECT :at AS at").bindparams(bindparam("at", type_=UTCDateTime()))
    try:
        with unit_of_work(db, readonly=True) as uow:
            back = uow.session.execute(statement.columns(at=UTCDateTime()), {"at": sent})
            got = back.scalar_one()
            if db.dialect == "postgresql":
                zone = uow.session.execute(text("SHOW TimeZone")).scalar_one()
                assert zone == "UTC"
    finally:
        db.dispose()
    assert got == sent
    assert got.tzinfo is UTC


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.postgres
def test_a_connection_whose_options_were_dropped_is_set_to_utc(db_url: str) -> None:
    """As a pooler that drops the startup packet's options would leave it."""
    dsn = make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, options="-c TimeZone=Europe/Paris") as conn:
        assert conn.info.parameter_status("TimeZone") == "Europe/Paris"
        _utc_session(conn)
        assert conn.info.parameter_status("TimeZone") == "UTC"
        now = conn.execute("SELECT now()").fetchone()
        assert now is not None and now[0].tzinfo is UTC
        assert not conn.autocommit

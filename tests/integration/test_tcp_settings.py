"""The TCP settings at their largest allowed values are taken by libpq, the kernel and the
server (a larger one is refused at start-up: tests/unit/test_config.py)."""

from __future__ import annotations

from tickwork import App
from tickwork.config import MAX_KEEPALIVES_COUNT, MAX_KEEPALIVES_SECONDS, MAX_TCP_USER_TIMEOUT


def test_the_largest_tcp_settings_reach_the_database(tcp_database_url: str) -> None:
    app = App(
        database_url=tcp_database_url,
        tcp={
            "user_timeout": MAX_TCP_USER_TIMEOUT,
            "keepalives_idle": MAX_KEEPALIVES_SECONDS,
            "keepalives_interval": MAX_KEEPALIVES_SECONDS,
            "keepalives_count": MAX_KEEPALIVES_COUNT,
        },
    )
    try:
        with app.db.connect() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with app.db.pool().connection() as conn:  # the server-side settings too
            assert conn.execute("SHOW tcp_keepalives_count").fetchone() == (
                str(MAX_KEEPALIVES_COUNT),
            )
    finally:
        app.close()

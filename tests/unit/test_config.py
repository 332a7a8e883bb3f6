"""Settings: defaults, environment, TOML file, validation messages that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickwork import ConfigError, load_settings
from tickwork.config import DEFAULT_LEASE_TTL, DEFAULT_SCHEMA


@pytest.fixture(autouse=True)
def no_ambient_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(__import__("os").environ):
        if key.startswith("TICKWORK_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


def test_defaults() -> None:
    settings = load_settings()
    assert settings.schema_name == DEFAULT_SCHEMA
    assert settings.database_url is None
    assert settings.worker.lease_ttl == DEFAULT_LEASE_TTL
    assert settings.worker.queues == ["default"]


def test_environment_overrides_including_nested(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWORK_DATABASE_URL", "postgresql://u:hunter2@db/x")
    monkeypatch.setenv("TICKWORK_SCHEMA", "jobs_here")
    monkeypatch.setenv("TICKWORK_WORKER__CONCURRENCY", "32")
    settings = load_settings()
    assert settings.schema_name == "jobs_here"
    assert settings.worker.concurrency == 32
    assert settings.database_url is not None
    assert "hunter2" not in repr(settings)  # the URL is a secret


def test_toml_file_then_environment_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "tickwork.toml").write_text(
        'schema = "from_file"\n[worker]\nconcurrency = 3\nqueues = ["a", "b"]\n'
    )
    settings = load_settings()
    assert settings.schema_name == "from_file"
    assert settings.worker.queues == ["a", "b"]
    monkeypatch.setenv("TICKWORK_WORKER__CONCURRENCY", "4")
    assert load_settings().worker.concurrency == 4


def test_named_config_file_must_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWORK_CONFIG", "/nowhere/tickwork.toml")
    with pytest.raises(ConfigError, match=r"TICKWORK_CONFIG \('/nowhere/tickwork.toml'\)"):
        load_settings()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"schema": "Bad-Name"}, "schema ('Bad-Name') must be a lower-case identifier"),
        (
            {"worker": {"lease_ttl": 5, "lease_renew_interval": 10}},
            "worker.lease_ttl (5.0s) must be greater than worker.lease_renew_interval (10.0s)",
        ),
        ({"worker": {"concurrency": 0}}, "worker.concurrency (0)"),
        ({"pool_min_size": 5, "pool_max_size": 2}, "pool_max_size (2) must be at least"),
        ({"colour": "red"}, "colour ('red')"),
        # durations the database could not add to a timestamp are refused at start-up
        ({"retention": {"finished_after": 1e300}}, "retention.finished_after (1e+300)"),
        ({"retention": {"dead_letter_after": float("inf")}}, "retention.dead_letter_after (inf)"),
        ({"worker": {"poll_interval": float("nan")}}, "worker.poll_interval (nan)"),
        ({"signals": {"debounce": {"order": float("inf")}}}, "signals.debounce.order (inf)"),
        ({"signals": {"retention_days": 1e9}}, "signals.retention_days (1000000000.0)"),
    ],
)
def test_invalid_settings_name_field_and_value(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(**overrides)
    assert message in str(raised.value)


def test_database_url_never_echoed_in_errors() -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(database_url=["postgresql://u:hunter2@db/x"])
    assert "hunter2" not in str(raised.value)
    assert "database_url" in str(raised.value)


def test_names_with_a_trailing_newline_are_refused() -> None:
    """``$`` would match before a final newline; every name pattern anchors with ``\\Z``."""
    from tickwork.config import QUEUE_NAME, SCHEMA_NAME
    from tickwork.ops.appconfig import VARIABLE_NAME
    from tickwork.signals.reactor import REACTOR_NAME, SIGNAL_TYPE

    for pattern in (QUEUE_NAME, SCHEMA_NAME, REACTOR_NAME, SIGNAL_TYPE, VARIABLE_NAME):
        assert pattern.match("abc") and not pattern.match("abc\n"), pattern.pattern


def test_admin_bootstrap_settings_have_short_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TICKWORK_ADMIN_EMAIL", "boss@example.com")
    monkeypatch.setenv("TICKWORK_ADMIN_PASSWORD", "correct horse battery staple")
    settings = load_settings()
    assert settings.auth.admin_email == "boss@example.com"
    assert settings.auth.admin_password is not None
    assert settings.auth.admin_password.get_secret_value() == "correct horse battery staple"
    monkeypatch.setenv("TICKWORK_AUTH__ADMIN_EMAIL", "wins@example.com")
    assert load_settings().auth.admin_email == "wins@example.com"


@pytest.mark.parametrize(
    "url", ["postgresq://user:canary-7f3@127.0.0.1/x", "host=x password=canary-7f3 port"]
)
def test_a_malformed_database_url_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(database_url=url)
    assert "database_url" in str(caught.value)
    assert "canary-7f3" not in str(caught.value) and "canary-7f3" not in repr(caught.value)


def test_trusted_proxies_must_be_addresses() -> None:
    assert load_settings(api={"trusted_proxies": ["10.0.0.5", "10.0.0.0/8", "::1"]})
    with pytest.raises(ConfigError) as caught:
        load_settings(api={"trusted_proxies": ["proxy.internal"]})
    assert "api.trusted_proxies" in str(caught.value)


def test_a_schema_name_leaves_room_for_the_longest_notification_channel() -> None:
    assert load_settings(schema="s" * 54).schema_name == "s" * 54
    with pytest.raises(ConfigError, match="at most 54"):
        load_settings(schema="s" * 55)


POOLER = "postgresql://tw:canary-9c1@pooler.internal:6432/app"
DIRECT = "postgresql://tw:canary-9c1@db.internal:5432/app"


def test_a_transaction_pooler_needs_a_direct_url() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(database_url=POOLER, database_pooler="transaction")
    assert "database_direct_url" in str(caught.value) and "LISTEN" in str(caught.value)
    with pytest.raises(ConfigError, match="needs database_url"):
        load_settings(database_pooler="transaction", database_direct_url=DIRECT)
    settings = load_settings(
        database_url=POOLER, database_pooler="transaction", database_direct_url=DIRECT
    )
    assert settings.database_pooler == "transaction"


def test_a_direct_url_at_the_poolers_address_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(
            database_url=POOLER,
            database_pooler="transaction",
            database_direct_url=POOLER.replace("/app", "/other"),
        )
    message = str(caught.value)
    assert "database_direct_url (<redacted>) must reach PostgreSQL itself" in message
    assert "pooler.internal:6432" in message and "canary-9c1" not in message


def test_a_malformed_direct_url_is_named_and_not_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(database_direct_url="postgresq://u:canary-9c1@x/y")
    assert "database_direct_url" in str(caught.value) and "canary-9c1" not in str(caught.value)


def test_session_settings_at_connect_are_refused_behind_a_transaction_pooler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pooler refuses the ``options`` startup parameter: said at start-up, with the remedy,
    rather than by every connection (and the direct path takes them as before)."""
    with_options = POOLER + "?options=-c%20statement_timeout%3D5s"
    with pytest.raises(ConfigError) as caught:
        load_settings(
            database_url=with_options, database_pooler="transaction", database_direct_url=DIRECT
        )
    assert "database_url's options ('-c statement_timeout=5s')" in str(caught.value)
    assert "ALTER ROLE" in str(caught.value)
    assert load_settings(database_url=with_options).database_pooler == "none"
    monkeypatch.setenv("PGOPTIONS", "-c jit=off")
    with pytest.raises(ConfigError, match="PGOPTIONS"):
        load_settings(
            database_url=POOLER, database_pooler="transaction", database_direct_url=DIRECT
        )


def test_pooler_modes_are_named() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(database_pooler="session")
    assert "database_pooler ('session')" in str(caught.value)


@pytest.mark.parametrize(
    ("tcp", "field"),
    [
        ({"user_timeout": 3e9}, "tcp.user_timeout"),  # libpq takes milliseconds as an int
        ({"user_timeout": -1}, "tcp.user_timeout"),
        ({"keepalives_idle": 40_000}, "tcp.keepalives_idle"),  # past Linux's TCP_KEEPIDLE
        ({"keepalives_interval": 0}, "tcp.keepalives_interval"),
        ({"keepalives_count": 128}, "tcp.keepalives_count"),  # past Linux's TCP_KEEPCNT
    ],
)
def test_tcp_settings_a_connection_would_refuse_are_refused_by_name(
    tcp: dict[str, float], field: str
) -> None:
    # refused at start-up, naming the setting, not at the first connection as a libpq error
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_settings(tcp=tcp)

"""The connection string tickwork builds from a Django database's settings: every value
quoted as libpq reads it back, and only libpq's options in it."""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict

from tickwork.contrib.django.conf import conninfo_of


def test_a_password_with_quotes_spaces_backslashes_and_equals_reads_back_as_given() -> None:
    password = "a b'c\\d\"e=f \\' g"
    given = {"NAME": "shop db", "USER": "o'brien", "PASSWORD": password, "HOST": "", "PORT": 5433}
    assert conninfo_to_dict(conninfo_of(given)) == {
        "dbname": "shop db",
        "user": "o'brien",
        "password": password,
        "port": "5433",
    }


def test_a_socket_directory_host_and_libpq_options_are_kept() -> None:
    options = {"sslmode": "require", "options": "-c search_path=shop,public", "sslrootcert": "x"}
    given = {"NAME": "shop", "HOST": "/var/run/postgresql", "OPTIONS": options}
    assert conninfo_to_dict(conninfo_of(given)) == {
        "dbname": "shop",
        "host": "/var/run/postgresql",
        **options,
    }


def test_djangos_and_psycopgs_own_options_are_left_out() -> None:
    options = {
        "pool": {"min_size": 2},
        "server_side_binding": True,
        "isolation_level": 1,
        "assume_role": "owner",
        "prepare_threshold": 0,
        "cursor_factory": object,
        "autocommit": True,
        "application_name": "shop",
    }
    given = {"NAME": "shop", "OPTIONS": options}
    assert conninfo_to_dict(conninfo_of(given)) == {"dbname": "shop", "application_name": "shop"}

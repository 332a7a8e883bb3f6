"""Settings of the example project: a shop whose orders send a receipt through tickwork.

The database is ``DATABASE_URL`` (a libpq URL; default: the local server's ``postgres``
database). tickwork's schema lives in the same database, beside Django's tables.
"""

import os

from psycopg.conninfo import conninfo_to_dict

_db = conninfo_to_dict(os.environ.get("DATABASE_URL", "postgresql://127.0.0.1:5432/postgres"))

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-a-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
ROOT_URLCONF = "site_config.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "tickwork.contrib.django",
    "shop",
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _db.get("dbname", "postgres"),
        "USER": _db.get("user", ""),
        "PASSWORD": _db.get("password", ""),
        "HOST": _db.get("host", ""),
        "PORT": _db.get("port", ""),
        # several test runs may share one server: each names its own test database
        "TEST": {"NAME": os.environ.get("DJANGO_TEST_DATABASE")},
    }
}

TICKWORK = {
    "DATABASE": "default",
    "SCHEMA": os.environ.get("SHOP_TICKWORK_SCHEMA", "tickwork"),
    "SETTINGS": {"worker": {"concurrency": 4}},
}

# closes tickwork's connections before the test database is dropped
TEST_RUNNER = "tickwork.contrib.django.test.TestRunner"

"""tickwork in a Django project: settings in ``settings.py``, enqueue on Django's own
connection, tickwork's schema migrated with ``migrate``, and management commands.

.. code-block:: python

    # settings.py
    INSTALLED_APPS = [..., "tickwork.contrib.django"]
    TICKWORK = {"DATABASE": "default", "SCHEMA": "tickwork"}

    # shop/tasks.py (every installed app's ``tasks`` module is imported at start)
    from tickwork.contrib.django import app

    @app.task
    def send_receipt(order_id: int) -> None: ...

    # shop/views.py
    with transaction.atomic():
        order = Order.objects.create(...)
        send_receipt.defer(order_id=order.id)  # in the same transaction: no on_commit

- :mod:`~tickwork.contrib.django.conf`: the ``TICKWORK`` setting, and the App built from it
- :mod:`~tickwork.contrib.django.apps`: the Django app (tasks found, schema migrated)
- ``manage.py tickwork ...`` (any tickwork command), ``tickwork_worker``, ``tickwork_migrate``
- :mod:`~tickwork.contrib.django.test`: a test runner that closes tickwork's connections
  before Django drops the test database
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwork.app import App

    app: App


def __getattr__(name: str) -> Any:
    if name == "app":  # made on first use: Django's settings are read then, not at import
        from tickwork.contrib.django.conf import get_app

        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

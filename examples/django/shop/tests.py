"""The shop's tests, run by Django's test runner (``python manage.py test``) against a real
PostgreSQL: the test database Django creates, with tickwork's schema migrated beside
Django's tables by ``migrate``."""

import contextlib
import io
import json

from django.core.management import call_command
from django.db import connection, transaction
from django.test import TestCase, TransactionTestCase

from tickwork.contrib.django import app
from tickwork.testing import clean, drain, eager

from .models import Order
from .tasks import send_receipt

SCHEMA = app.settings.schema_name


def jobs_of(task: str) -> list[tuple[int, str]]:
    """(id, state) of the task's jobs, read on Django's connection (uncommitted rows too)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, state FROM {SCHEMA}.jobs WHERE task = %s ORDER BY id", [task])
        return list(cursor.fetchall())


class Abort(Exception):
    pass


class EnqueueInTheRequestTransaction(TestCase):
    """``defer()`` joins Django's transaction: ``TestCase`` rolls each test back, jobs too."""

    def test_a_job_is_stored_with_the_order(self) -> None:
        answer = self.client.post(
            "/orders", json.dumps({"email": "a@example.com", "total_cents": 1250}), "json"
        )
        self.assertEqual(answer.status_code, 201)
        body = answer.json()
        self.assertEqual(jobs_of(send_receipt.name), [(body["job"], "PENDING")])
        self.assertTrue(Order.objects.filter(id=body["order"]).exists())

    def test_a_rolled_back_transaction_leaves_no_job(self) -> None:
        with self.assertRaises(Abort), transaction.atomic():
            order = Order.objects.create(email="b@example.com", total_cents=1)
            send_receipt.defer(order_id=order.id)
            self.assertEqual(len(jobs_of(send_receipt.name)), 1)  # seen inside
            raise Abort
        self.assertEqual(jobs_of(send_receipt.name), [])
        self.assertFalse(Order.objects.exists())

    def test_a_signal_joins_the_transaction_too(self) -> None:
        with self.assertRaises(Abort), transaction.atomic():
            app.signals.emit("order.placed", "order", 1)
            raise Abort
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {SCHEMA}.signals")
            self.assertEqual(cursor.fetchone(), (0,))

    def test_the_schema_is_migrated_beside_djangos_tables(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM django_migrations WHERE app = 'tickwork'")
            self.assertEqual(cursor.fetchone(), (0,))  # not one of Django's migrations
        out = io.StringIO()
        call_command("tickwork_migrate", stdout=out)  # migrate has done it
        self.assertIn("is up to date", out.getvalue())


class RunJobsInTheTest(TransactionTestCase):
    """Jobs run on tickwork's own connections, which see committed rows: a test that runs
    them commits (``TransactionTestCase``), and empties tickwork's tables itself: Django's
    flush between tests empties Django's tables only."""

    def setUp(self) -> None:
        clean(app)

    def test_drain_runs_the_job_with_the_orm(self) -> None:
        answer = self.client.post(
            "/orders", json.dumps({"email": "c@example.com", "total_cents": 990}), "json"
        )
        [outcome] = drain(app)
        self.assertEqual(outcome.job_state, "SUCCEEDED")
        self.assertEqual(app.get_job(outcome.job_id).result, "receipt sent to c@example.com")
        self.assertTrue(Order.objects.get(id=answer.json()["order"]).receipt_sent)
        self.assertEqual(jobs_of(send_receipt.name), [(answer.json()["job"], "SUCCEEDED")])

    def test_eager_runs_the_job_when_the_request_commits(self) -> None:
        with eager(app) as outcomes:
            answer = self.client.post(
                "/orders", json.dumps({"email": "d@example.com", "total_cents": 5}), "json"
            )
            # the response came after the commit, and the commit ran the job
            self.assertEqual([o.job_id for o in outcomes], [answer.json()["job"]])
            self.assertEqual(
                app.get_job(answer.json()["job"]).result, "receipt sent to d@example.com"
            )
        self.assertTrue(Order.objects.get(id=answer.json()["order"]).receipt_sent)

    def test_eager_runs_nothing_that_was_rolled_back(self) -> None:
        with eager(app) as outcomes:
            with self.assertRaises(Abort), transaction.atomic():
                send_receipt.defer(order_id=1)
                raise Abort
            self.assertEqual(outcomes, [])
        self.assertEqual(jobs_of(send_receipt.name), [])

    def test_the_cli_reads_the_projects_database(self) -> None:
        job = send_receipt.defer(order_id=42)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):  # tickwork's commands print to sys.stdout
            call_command("tickwork", "jobs", "show", str(job.id), "--json")
        self.assertEqual(json.loads(out.getvalue())["id"], job.id)

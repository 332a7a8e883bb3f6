"""The shop's tests, run by Django's test runner (``python manage.py test``) against a real
PostgreSQL: the test database Django creates, with tickwork's schema migrated beside
Django's tables by ``migrate``."""

import contextlib
import io
import json
from datetime import UTC, datetime

from django.core.exceptions import SynchronousOnlyOperation
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.transaction import TransactionManagementError
from django.test import TestCase, TransactionTestCase

from tickwork import JobSpec
from tickwork.contrib.django import app
from tickwork.errors import EnqueueError, TickworkError
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

    def test_a_batch_joins_the_transaction_too(self) -> None:
        with self.assertRaises(Abort), transaction.atomic():
            app.enqueue_many([JobSpec(send_receipt.name, {"order_id": n}) for n in range(3)])
            self.assertEqual(len(jobs_of(send_receipt.name)), 3)
            raise Abort
        self.assertEqual(jobs_of(send_receipt.name), [])

    def test_a_signal_joins_the_transaction_too(self) -> None:
        with self.assertRaises(Abort), transaction.atomic():
            app.signals.emit("order.placed", "order", 1)
            raise Abort
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {SCHEMA}.signals")
            self.assertEqual(cursor.fetchone(), (0,))

    def test_a_savepoint_rolled_back_takes_its_job_back_the_outer_one_keeps_its(self) -> None:
        with transaction.atomic():
            kept = send_receipt.defer(order_id=1)
            with self.assertRaises(Abort), transaction.atomic():  # a savepoint
                send_receipt.defer(order_id=2)
                raise Abort
        self.assertEqual(jobs_of(send_receipt.name), [(kept.id, "PENDING")])

    def test_a_unique_key_gives_back_the_job_already_enqueued(self) -> None:
        with transaction.atomic():
            first = app.enqueue(send_receipt.name, {"order_id": 3}, unique_key="receipt-3")
            again = app.enqueue(send_receipt.name, {"order_id": 3}, unique_key="receipt-3")
        self.assertEqual((again.id, again.duplicate), (first.id, True))
        self.assertEqual(len(jobs_of(send_receipt.name)), 1)

    def test_a_defer_that_fails_in_atomic_marks_the_transaction_for_rollback(self) -> None:
        with connection.cursor() as cursor:  # undone with the test's transaction
            cursor.execute(
                f"ALTER TABLE {SCHEMA}.jobs ADD CONSTRAINT no_order_0"
                " CHECK (args->>'order_id' <> '0')"
            )
        with transaction.atomic():
            Order.objects.create(email="f@example.com", total_cents=1)
            with self.assertRaises(TickworkError) as failed:
                send_receipt.defer(order_id=0)
            self.assertIn("no_order_0", str(failed.exception))
            # as after a failed save(): Django knows, and refuses the block's next query
            self.assertTrue(connection.needs_rollback)
            with self.assertRaises(TransactionManagementError):
                Order.objects.count()
        self.assertFalse(Order.objects.exists())  # the block was rolled back, not committed

    def test_a_defer_refused_before_the_database_leaves_the_transaction_usable(self) -> None:
        with transaction.atomic():
            with self.assertRaisesMessage(EnqueueError, "args.order_id"):
                send_receipt.defer(order_id={1, 2})  # not JSON: refused before any SQL
            self.assertFalse(connection.needs_rollback)
            Order.objects.create(email="h@example.com", total_cents=1)
        self.assertTrue(Order.objects.exists())

    def test_a_defer_in_a_block_marked_for_rollback_is_refused_as_a_query_is(self) -> None:
        with transaction.atomic():
            transaction.set_rollback(True)
            with self.assertRaises(TransactionManagementError):
                send_receipt.defer(order_id=4)
        self.assertEqual(jobs_of(send_receipt.name), [])

    def test_run_at_is_stored_and_read_back_as_the_same_instant(self) -> None:
        at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
        job = send_receipt.configure(run_at=at).defer(order_id=9)
        self.assertEqual(job.run_at, at)  # whatever TIME_ZONE and USE_TZ are
        self.assertIsNotNone(job.created_at.tzinfo)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT run_at = %s::timestamptz FROM {SCHEMA}.jobs WHERE id = %s",
                [at.isoformat(), job.id],
            )
            self.assertEqual(cursor.fetchone(), (True,))
        with self.assertRaisesMessage(EnqueueError, "must be time-zone aware"):
            send_receipt.configure(run_at=datetime(2031, 1, 2)).defer(order_id=9)

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

    async def test_eager_in_async_code(self) -> None:
        with eager(app) as outcomes:
            order = await Order.objects.acreate(email="g@example.com", total_cents=3)
            job = await send_receipt.defer_async(order_id=order.id)
            self.assertEqual([o.job_id for o in outcomes], [job.id])  # ran before it returned
        self.assertTrue((await Order.objects.aget(id=order.id)).receipt_sent)

    def test_the_cli_reads_the_projects_database(self) -> None:
        job = send_receipt.defer(order_id=42)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):  # tickwork's commands print to sys.stdout
            call_command("tickwork", "jobs", "show", str(job.id), "--json")
        self.assertEqual(json.loads(out.getvalue())["id"], job.id)

    def test_a_failing_command_is_a_command_error_with_its_exit_code(self) -> None:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(CommandError) as failed:
            call_command("tickwork", "jobs", "show", "999999999")
        self.assertEqual(failed.exception.returncode, 2)
        self.assertIn("job 999999999 does not exist", err.getvalue())

    async def test_async_code_defers_with_defer_async(self) -> None:
        with self.assertRaises(SynchronousOnlyOperation):  # Django's connection is sync
            send_receipt.defer(order_id=7)
        job = await send_receipt.defer_async(order_id=7)  # tickwork's own connection
        self.assertEqual((await app.get_job_async(job.id)).state, "PENDING")

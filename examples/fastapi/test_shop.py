"""The application's own tests: requests through FastAPI's test client (which runs the
lifespan), jobs run with ``drain``, on a real PostgreSQL."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tickwork.testing import drain

from shop import api, app


def test_an_order_enqueues_its_receipt_and_a_worker_sends_it(tickwork_clean: None) -> None:
    with TestClient(api) as client:
        placed = client.post("/orders/7")
        assert placed.status_code == 201
        job_id = placed.json()["receipt_job"]
        assert client.get(f"/jobs/{job_id}").json()["state"] == "PENDING"
        outcomes = drain(app)
        assert [o.job_id for o in outcomes] == [job_id]
        assert client.get(f"/jobs/{job_id}").json() == {
            "id": job_id,
            "state": "SUCCEEDED",
            "result": "receipt for order 7",
        }


def test_a_failed_request_leaves_no_job(tickwork_clean: None) -> None:
    with TestClient(api) as client:
        assert client.post("/orders/4242").status_code == 404
    assert drain(app) == []  # the job was rolled back with the request

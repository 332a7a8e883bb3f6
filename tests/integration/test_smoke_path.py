from __future__ import annotations

from tickwork import App, JobState


async def test_enqueue_run_succeed(app: App) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    job = add.defer(a=1, b=2)
    assert job.state is JobState.PENDING
    async with app.worker() as worker:
        result = await worker.run_once()
    assert result.claimed == 1
    done = app.get_job(job.id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == 3

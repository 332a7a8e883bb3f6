"""The job queue: enqueue, rows, retry policy, the watchdog."""

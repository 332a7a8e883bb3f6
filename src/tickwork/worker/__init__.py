"""The worker process: claims jobs, runs handlers, renews leases, shuts down gracefully."""

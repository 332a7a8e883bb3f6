"""The background services' machinery: the loop every service runs (periodic), the process's
lease manager (leases), and the host that composes a process's services by role (host)."""

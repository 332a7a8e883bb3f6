"""Schedules: cron expressions with IANA time zones that materialise jobs."""

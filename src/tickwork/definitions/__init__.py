"""Definitions: HTTP calls and scripts that operators store at runtime, run as ordinary jobs
of the tasks ``tickwork.http`` and ``tickwork.script`` (docs/definitions.md)."""

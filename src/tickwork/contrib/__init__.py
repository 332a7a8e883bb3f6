"""tickwork inside other frameworks: :mod:`~tickwork.contrib.fastapi` (FastAPI and ASGI)."""

# syntax=docker/dockerfile:1
# tickwork's image: `tickwork serve` by default (the API, the dashboard and every background
# service), `tickwork worker ...` as another command. docs/deployment.md (Containers) builds
# it, runs it with compose.yaml and adds your own tasks on top of it.
#
#   docker build --build-arg TICKWORK_VERSION=1.2.3 -t tickwork:1.2.3 .   (a checkout of v1.2.3)

# -- build: the wheel, from the sources, and the wheels of its dependencies ----------------
FROM python:3.11-slim AS build
WORKDIR /src
# The build context holds no .git (.dockerignore), so setuptools-scm finds no tag: the
# version comes from this argument, or is the fallback (0.1.0.dev0) without it.
ARG TICKWORK_VERSION=""
COPY pyproject.toml README.md ./
COPY src ./src
# src/tickwork/docs is a link to docs/: the pages the package ships (the MCP endpoint's)
COPY docs ./docs
RUN if [ -n "$TICKWORK_VERSION" ]; then \
        export SETUPTOOLS_SCM_PRETEND_VERSION_FOR_TICKWORK="$TICKWORK_VERSION"; \
    fi \
    && pip wheel --no-cache-dir --wheel-dir /wheels .

# -- run: the wheels installed into a slim Python, nothing else of the sources -------------
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TICKWORK_API__HOST=0.0.0.0
# Installed from the build stage's wheels only (mounted, so they take no layer of their own;
# --no-index: the one version there is the one installed, pinned by the build).
# hadolint ignore=DL3013
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels tickwork \
    && groupadd --system --gid 10001 tickwork \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/tickwork tickwork
# Never root (PostgreSQL itself, embedded when no TICKWORK_DATABASE_URL is set, refuses to
# run as root); numeric, so an orchestrator can check it (Kubernetes' runAsNonRoot).
USER 10001:10001
WORKDIR /home/tickwork
EXPOSE 8080
# /readyz: the database answers and the schema is migrated (503 otherwise). Only `serve`
# listens: a worker's container turns this off (compose.yaml).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('TICKWORK_API__PORT', '8080'), timeout=4)"]
# The exec form: tickwork is PID 1 and receives SIGTERM itself, to drain on a stop.
CMD ["tickwork", "serve"]

#!/usr/bin/env bash
# Creates benchmarks/.venv-peers (gitignored) with PgQueuer and Procrastinate from PyPI,
# pinned, for benchmarks/peers.py. Their code is never committed to this repository.
#
#   bash benchmarks/setup_peers.sh            # PYTHON=python3.12 bash ... to pick another
#
# Re-running it reinstalls the pins into the existing venv (remove the folder for a clean one).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-peers"

# Same interpreter line as tickwork's own venv where possible (3.11), so the comparison is
# not also a comparison of Python versions.
if [[ -z "${PYTHON:-}" ]]; then
    for candidate in python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1; then
            PYTHON="$candidate"
            break
        fi
    done
fi
: "${PYTHON:?no python3 found; set PYTHON=/path/to/python3.11}"

if [[ ! -x "$venv/bin/python" ]]; then
    "$PYTHON" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip

constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
# Everything the peers pull in, pinned (pip freeze of the venv the published numbers came from).
cat >"$constraints" <<'EOF'
annotated-doc==0.0.7
annotated-types==0.8.0
anyio==4.16.0
asgiref==3.13.0
asyncpg==0.32.0
attrs==26.1.0
croniter==7.0.0
idna==3.20
markdown-it-py==4.3.0
mdurl==0.1.2
packaging==26.4
pgqueuer==1.6.0
procrastinate==3.10.0
psycopg==3.3.9
psycopg-binary==3.3.9
psycopg-pool==3.3.3
pydantic==2.14.4
pydantic-settings==2.16.3
pydantic_core==2.50.5
Pygments==2.21.0
python-dateutil==4.0.0
python-dotenv==1.2.4
rich==15.0.0
shellingham==1.5.4
tabulate==0.10.0
typer==0.29.2
typing-inspection==0.4.5
typing_extensions==4.16.0
tzdata==2026.6
uvloop==0.23.0
EOF

# PgQueuer with its asyncpg driver (uvloop is a PgQueuer dependency on Linux and what its
# `pgq run` uses); Procrastinate with psycopg 3 — the binary build, as tickwork uses.
"$venv/bin/python" -m pip install --quiet -c "$constraints" \
    "pgqueuer[asyncpg]==1.6.0" \
    "asyncpg==0.32.0" \
    "uvloop==0.23.0" \
    "procrastinate==3.10.0" \
    "psycopg[binary,pool]==3.3.9" \
    "psycopg-pool==3.3.3"

"$venv/bin/python" - <<'EOF'
import importlib.metadata as m

names = ("pgqueuer", "asyncpg", "uvloop", "procrastinate", "psycopg", "psycopg-binary", "psycopg-pool")
print("peers venv ready:", ", ".join(f"{n} {m.version(n)}" for n in names))
EOF

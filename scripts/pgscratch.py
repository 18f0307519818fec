"""PostgreSQL at 127.0.0.1:5432 (user postgres, trust) for the scripts that make scratch databases.

Shared by scripts/cluster.py and scripts/approval-crash.py; `python3 scripts/X.py` puts scripts/
on sys.path, so `import pgscratch` works from any working directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess

PG_HOST, PG_PORT = "127.0.0.1", "5432"


def psql(sql: str, check=True) -> subprocess.CompletedProcess:
    """Runs one statement as postgres on the postgres database (3 s connect, 60 s overall)."""
    env = dict(os.environ, PGCONNECT_TIMEOUT="3")
    return subprocess.run(
        ["psql", "-h", PG_HOST, "-p", PG_PORT, "-U", "postgres", "-d", "postgres",
         "-v", "ON_ERROR_STOP=1", "-qAtc", sql],
        env=env, capture_output=True, text=True, check=check, timeout=60)


def postgres_problem() -> str | None:
    """None when PostgreSQL is usable, else why not."""
    if shutil.which("psql") is None:
        return "psql is not installed"
    try:
        r = psql("SELECT 1", check=False)
    except subprocess.TimeoutExpired:
        return "psql timed out"
    if r.returncode != 0:
        return f"cannot connect to PostgreSQL at {PG_HOST}:{PG_PORT}: {r.stderr.strip()}"
    return None

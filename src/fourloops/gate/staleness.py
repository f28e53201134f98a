"""Rule 6: Snakemake's own judgement of what it would rebuild (a dry-run summary in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from fourloops.records import norm

STALE_TRIGGERS = ("mtime", "params", "input", "code", "software-env")
# The metadata backend of the run the gate is a job of (rules/common.smk sets them from its Snakemake's settings):
# under --persistence-backend db its metadata is in a database, which a nested Snakemake reads only when told.
BACKEND_ENV = "FOURLOOPS_PERSISTENCE_BACKEND"
DB_URL_ENV = "FOURLOOPS_PERSISTENCE_DB_URL"


def persistence_env(backend, db_url: str | None) -> dict[str, str]:
    """What rules/common.smk exports for `backend` (Snakemake's PersistenceBackend, or its choice's name) and its
    --persistence-backend-db-url: nothing under the file backend, Snakemake's default."""
    name = backend.item_to_choice() if hasattr(backend, "item_to_choice") else str(backend)
    if name == "file":
        return {}
    return {BACKEND_ENV: name, **({DB_URL_ENV: db_url} if db_url else {})}


def persistence_args(env, private: str | Path) -> list[str]:
    """The nested Snakemake's options that open the metadata the run keeps (`env`: os.environ). The db URL (it may
    carry a password) goes in a profile of its own in `private` (a folder only this user reads), never on the command
    line, which every user of the machine sees (`ps`)."""
    backend = env.get(BACKEND_ENV)
    if not backend:
        return []
    url = env.get(DB_URL_ENV)
    if not url:
        return ["--persistence-backend", backend]
    import yaml

    profile = Path(private) / "config.yaml"
    fd = os.open(profile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump({"persistence-backend-db-url": url}, fh)
    return ["--persistence-backend", backend, "--profile", str(private)]


def snakemake_staleness(
    snakefile: str | Path,
    workdir: str | Path,
    paths: list[str],
    *,
    configfile: str | Path | None = None,
    python: str = sys.executable,
    timeout: int = 600,
) -> dict[str, str | None]:
    """Snakemake's own judgement of `paths`: a dry-run `--summary` with every rerun trigger, run in a
    subprocess with `--nolock` (it writes nothing, and the calling Snakemake holds the lock).

    Returns path -> None (up to date) or the reason it would be rebuilt. A path the summary does not
    list is left out. If Snakemake fails, every path maps to its error. It reads the metadata of the run's own
    backend (`persistence_args`): under the file backend's default, a run with --persistence-backend db would find
    no params, code or input recorded, and call every artifact up to date.
    """
    if not paths:
        return {}
    cmd = [python, "-m", "snakemake", "-s", str(snakefile), "--directory", str(workdir),
           "--summary", "--nolock", "--rerun-triggers", *STALE_TRIGGERS, "--cores", "1"]
    with tempfile.TemporaryDirectory(prefix="fourloops-gate-") as private:  # mode 0700
        cmd += persistence_args(os.environ, private)
        if configfile:
            cmd += ["--configfile", str(configfile)]
        cmd += ["--", *paths]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=dict(os.environ), timeout=timeout)
    if proc.returncode != 0:
        tail = [ln for ln in (proc.stderr + proc.stdout).strip().splitlines() if ln.strip()][-3:]
        reason = "Snakemake could not judge it: " + " | ".join(tail)
        return {p: reason for p in paths}
    return parse_summary(proc.stdout, paths)


def parse_summary(text: str, paths: list[str]) -> dict[str, str | None]:
    """Rows of `snakemake --summary` (output_file, date, rule, log, status, plan) for `paths`."""
    wanted = {norm(p): p for p in paths}
    rows, header = [], None
    for line in text.splitlines():
        cols = line.split("\t")
        if cols[0] == "output_file":
            header = cols
        elif header is not None and len(cols) == len(header):
            rows.append(dict(zip(header, cols)))
    # the files whose own status says why (params changed, missing, ...), for evidence upstream
    causes = [f"{r['output_file']} {r['status']}" for r in rows
              if r["plan"] == "update pending" and r["status"] != "ok" and "/provenance/" not in r["output_file"]]
    out: dict[str, str | None] = {}
    for row in rows:
        key = norm(row["output_file"])
        if key not in wanted:
            continue
        if row["plan"] != "update pending":
            out[wanted[key]] = None
        elif row["status"] != "ok":
            out[wanted[key]] = f"{row['status']} (rule {row['rule']})"
        else:
            more = f" (+{len(causes) - 3} more)" if len(causes) > 3 else ""
            out[wanted[key]] = f"rule {row['rule']} would rerun after upstream: {'; '.join(causes[:3]) or '?'}{more}"
    return out

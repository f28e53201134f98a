"""Glue between a Snakemake `script:` job and the library: logging, threads, provenance.

This is the one module (besides the executor and plan code) that knows Snakemake's script object.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import sys
import time
from typing import Any, Iterator

from fourloops import determinism, gpumem, lifeline, provenance, space
from fourloops.io import write_json


def _plain(obj: Any) -> Any:
    """Snakemake Namedlists and nested values to JSON-able plain values."""
    if hasattr(obj, "items") and callable(obj.items):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


class JobContext:
    def __init__(self, smk):
        self.smk = smk
        self.fields: dict = {}

    def record(self, **fields: Any) -> None:
        """Add fields (models, seed, precision, model_set, ...) to this job's provenance record."""
        self.fields.update(fields)


@contextlib.contextmanager
def job(smk) -> Iterator[JobContext]:
    """Run a script job: log to its log file, pin torch threads, end with its Snakemake, write its provenance on success."""
    determinism.before_cuda()  # cuBLAS reads its workspace setting when CUDA starts, which the card's check below does
    threads = max(1, int(getattr(smk, "threads", 1) or 1))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    log_path = smk.log[0] if len(smk.log) else None
    log_fh = None
    if log_path:
        os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
        log_fh = open(log_path, "a", buffering=1, encoding="utf-8")
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log_fh.fileno(), 1)
        os.dup2(log_fh.fileno(), 2)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr, force=True
    )
    # torch reads OMP_NUM_THREADS when it is first imported; stages that import it later inherit this.
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.perf_counter()
    ctx = JobContext(smk)
    if "model_set" in smk.params.keys():
        ctx.record(model_set=smk.params.model_set)
    logging.getLogger("fourloops").info("rule %s wildcards %s", smk.rule, dict(smk.wildcards.items()))
    # No orphans: the job ends when the Snakemake that started it dies (and frees the card).
    lifeline.hold()
    # What the driver sees of this process (the wall's measure), and a smaller card emulated where asked.
    nvml = gpumem.NvmlPeak().start()
    # what the walls asked for this job (its rule's resources), beside what it then held
    ctx.record(resources={k: getattr(smk.resources, k) for k in ("vram_mb", "mem_mb", "profile")
                          if k in smk.resources.keys()})
    if float(getattr(smk.resources, "vram_mb", 0) or 0) > 0:
        cap = gpumem.apply_cap()
        if cap:
            ctx.record(**cap)
        try:  # the allocator the Snakemake that started this job set (fourloops.card.set_allocator_env)
            alloc = gpumem.check_allocator()
        except gpumem.AllocatorError as err:
            raise SystemExit(f"rule {smk.rule}: {err}") from None
        if alloc:
            ctx.record(**alloc)
    try:
        yield ctx
        ctx.record(**nvml.stop())
        # the determinism settings as the job's process held them at its end, read from torch and the environment
        # (a GPU stage sets them first: fourloops.determinism.apply)
        ctx.record(determinism=determinism.state())
        outputs = [f for name, f in smk.output.items() if name != "provenance"]
        record = provenance.build_record(
            rule=smk.rule,
            wildcards=_plain(smk.wildcards),
            params=_plain(smk.params),
            inputs=list(smk.input),
            outputs=_flatten(outputs),
            started=started,
            wall_seconds=time.perf_counter() - t0,
            fields=_plain(ctx.fields),
        )
        write_json(smk.output.provenance, record)
    except OSError as err:
        outs = _flatten(f for _, f in smk.output.items()) or [smk.output.provenance]
        line = space.one_line(err, os.path.dirname(outs[0]) or ".")  # a full or read-only disk: one line, no traceback
        if line is None:
            raise
        raise SystemExit(f"rule {smk.rule}: {line}") from None
    if log_fh:
        log_fh.flush()


def _flatten(items) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(_flatten(item))
        else:
            out.append(str(item))
    return out

"""The card a GPU job loads onto: the busy-card guard before the load, at the limit of the machine
the job runs on (RFD 1140: on WDDM a job that does not fit pages, ~12x slower, instead of failing).

The limit is a machine setting (config/machines.yaml), read where the job runs, never a job param:
changing it rebuilds nothing.
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import os

MACHINE_ENV = "FOURLOOPS_MACHINE"  # set in a pod's own environment by the RunPod executor
# the name torch reads for CUDA (it ignored PYTORCH_ALLOC_CONF there from 2.9.1: pytorch/pytorch#183387)
ALLOC_VAR = "PYTORCH_CUDA_ALLOC_CONF"


def busy_card_limit_gib(config_machine: str) -> float:
    """The guard's limit on this machine: the pod's under the RunPod executor, else the run's `machine`."""
    from fourloops import machines

    table = machines.load()
    return machines.machine(table, os.environ.get(MACHINE_ENV) or config_machine).busy_card_limit_gib


def allocator_of(config_machine: str, table: dict | None = None) -> str:
    """This machine's torch allocator (machines.yaml `cuda_allocator`): the pod's under the RunPod executor, else the
    run's `machine`. `table`: machines.yaml as the caller loaded it already."""
    from fourloops import machines

    return machines.allocator(machines.load() if table is None else table, os.environ.get(MACHINE_ENV) or config_machine)


def allocator_env(config_machine: str, table: dict | None = None) -> dict[str, str]:
    """torch's own variable for this machine's allocator, for the jobs a Snakemake starts (rules/common.smk) or a
    pod runs (the RunPod executor): empty for the default allocator."""
    if allocator_of(config_machine, table) != "expandable_segments":
        return {}
    return {ALLOC_VAR: "expandable_segments:True"}


# Set beside torch's variable when fourloops put it there from a machine's cuda_allocator (its value: the machine),
# so that a later workflow in the same process, or one a job starts, does not take it for the user's own setting.
SET_BY = "FOURLOOPS_ALLOC_CONF_FROM"


def own_allocator(environ=os.environ) -> str | None:
    """The allocator the user's own torch variables ask for (fourloops.gpumem.allocator_named), which stands over a
    machine's; None where they are unset or fourloops set them (SET_BY)."""
    from fourloops import gpumem

    return None if environ.get(SET_BY) else gpumem.allocator_named(environ)


def set_allocator_env(config_machine: str, table: dict | None = None, environ=os.environ) -> None:
    """Torch's variable for the jobs this Snakemake starts, from the machine's cuda_allocator (rules/common.smk);
    a user's own setting stands; one fourloops set for another machine earlier in this process is replaced."""
    if own_allocator(environ) is not None:
        return
    if environ.pop(SET_BY, None):
        environ.pop(ALLOC_VAR, None)
    for name, value in allocator_env(config_machine, table).items():
        environ[name] = value
        environ[SET_BY] = environ.get(MACHINE_ENV) or config_machine


def check_card(device: str, config_machine: str) -> None:
    """Refuse to load onto a CUDA device that other processes already hold beyond the machine's limit."""
    if not str(device).startswith("cuda"):
        return
    from fourloops.guard import ensure_card_free

    index = int(device.split(":")[1]) if ":" in device else 0
    ensure_card_free(busy_card_limit_gib(config_machine), index)

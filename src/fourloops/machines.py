"""The machines jobs run on (config/machines.yaml): the one loader, the walls of each (a SLURM cluster's
partitions included), and where a profile tag runs under an executor.

Everything that reads machines.yaml (the wall check, the plan, the guard's limit, the RunPod
executor) goes through `load` and `machine`; which profile tags run away from the target machine is
decided once, in `placement`, and where a job of a profile tag runs (`runs_on`) and which machine the tag
names as its own (`home`: what prices it, a container's host) once here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fourloops import yamlcheck

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "config" / "machines.yaml"
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "machines.schema.yaml"

# The profile tags a rule may carry: where its jobs run (RFD 1163/1165).
PROFILE_TAGS = ("desk", "pod", "container")


class MachinesError(ValueError):
    """machines.yaml is missing, unreadable or names a machine that is not there."""


@dataclass(frozen=True)
class Machine:
    # machines.yaml's defaults, here once (a machine, a container and a cluster's partitions leave them out alike)
    name: str
    description: str = ""
    os: str = "linux"
    arch: str = "x86_64"
    gpu_name: str | None = None
    vram_gib: float = 0.0
    ram_gib: float = 0.0
    devices: tuple[str, ...] = ()
    licensed: tuple[str, ...] = ()
    hourly_usd: float = 0.0
    busy_card_limit_gib: float = 2.0
    pages_instead_of_oom: bool = False
    cuda_allocator: str = "default"  # default | expandable_segments (fourloops.card.set_allocator_env)

    def label(self) -> str:
        gpu = f"{self.gpu_name} {self.vram_gib:g} GiB" if self.gpu_name else "no GPU"
        return f"{self.name}: {gpu}"


def load(path: str | Path | None = None) -> dict:
    """The machines file as a dict (default: the repository's config/machines.yaml), validated by
    config/machines.schema.yaml: MachinesError naming the file, line, key, value and what is allowed."""
    path = Path(path) if path else DEFAULT_PATH
    try:
        data = yamlcheck.load_checked(path, SCHEMA_PATH, what="machines file")
    except yamlcheck.YamlError as err:
        raise MachinesError(str(err)) from None
    hosts = names(data)
    problems = [
        f"{path}: {name}.{key} = {raw[key]!r}: not a machine of this file; allowed: one of {hosts}"
        for name, raw in data.items() for key in ("host", "submit_host") if key in raw and raw[key] not in hosts
    ]
    if problems:
        raise MachinesError(f"{path}: invalid machines file (nothing was run or written):\n  " + "\n  ".join(problems))
    return data


def names(machines: dict) -> list[str]:
    """The single machines a run can target (hosts: not containers, not SLURM clusters)."""
    return [n for n, raw in machines.items() if isinstance(raw, dict) and "host" not in raw and "slurm" not in raw]


def placeable(machines: dict) -> list[str]:
    """The single machines a refused job may be sent to: every host but the lent measurement machines."""
    return [n for n in names(machines) if not machines[n].get("measurement_only")]


def targets(machines: dict) -> list[str]:
    """What `machine` (config, or `fourloops plan --machine`) may name: the single machines, then the clusters."""
    return names(machines) + clusters(machines)


def clusters(machines: dict) -> list[str]:
    """The SLURM clusters of the file (their partitions: `cluster`; where a job goes: fourloops.slurm)."""
    return [n for n, raw in machines.items() if isinstance(raw, dict) and "slurm" in raw]


def pod_gpus(pod: dict) -> tuple[str, ...]:
    """The GPU types a pod may be given, in the order the executor asks RunPod for them: pod.gpu_classes' ids,
    then pod.runpod.widen_gpus (the one list the executor and the levers read)."""
    return tuple(g["id"] for g in pod.get("gpu_classes") or []) + tuple((pod.get("runpod") or {}).get("widen_gpus") or [])


def machine(machines: dict, name: str, host: str | None = None) -> Machine:
    """The walls of machine `name`; a container inherits its host's walls and adds its licensed software."""
    if name not in machines or not isinstance(machines[name], dict):
        raise MachinesError(
            f"machine = {name!r} is not in config/machines.yaml; allowed: one of {sorted(machines)}"
        )
    raw = machines[name]
    if "slurm" in raw:  # a cluster as one machine: its largest card (the guard's limit on a node)
        return max(cluster(machines, name).partitions, key=lambda p: (p.machine.vram_gib, p.machine.ram_gib)).machine
    if "host" in raw:
        base = machine(machines, host or raw["host"])
        return Machine(
            name=f"{name} on {base.name}", description=raw.get("description", ""), os=raw.get("os", base.os),
            arch=raw.get("arch", base.arch), gpu_name=base.gpu_name, vram_gib=base.vram_gib, ram_gib=base.ram_gib,
            devices=base.devices if raw.get("devices_from_host", True) else tuple(raw.get("devices") or ()),
            licensed=tuple(sorted(set(base.licensed) | set(raw.get("licensed") or ()))),
            hourly_usd=base.hourly_usd, busy_card_limit_gib=base.busy_card_limit_gib,
            pages_instead_of_oom=base.pages_instead_of_oom, cuda_allocator=base.cuda_allocator,
        )
    return Machine(name=name, **_given(raw, raw.get("gpu") or {}))


def allocator(machines: dict, name: str) -> str:
    """The torch allocator of machine `name` (its `cuda_allocator`); "default" for a name the file does not hold."""
    return machine(machines, name).cuda_allocator if name in machines else "default"


_FIELDS = {"description": str, "os": str, "arch": str, "ram_gib": float, "hourly_usd": float,
           "busy_card_limit_gib": float, "pages_instead_of_oom": bool, "cuda_allocator": str}


def _given(raw: dict, gpu: dict) -> dict:
    """The Machine fields a machines.yaml entry gives (its card from `gpu`); the rest keep Machine's defaults."""
    out = {k: kind(raw[k]) for k, kind in _FIELDS.items() if k in raw}
    out.update({k: tuple(raw[k] or ()) for k in ("devices", "licensed") if k in raw})
    if gpu:
        out.update(gpu_name=gpu.get("name"), vram_gib=float(gpu.get("vram_gib", 0.0)))
    return out


@dataclass(frozen=True)
class Partition:
    name: str
    machine: Machine  # its walls (per node)
    gpu_model: str | None
    gpu_constraint: str | None
    time_limit_min: float


@dataclass(frozen=True)
class Cluster:
    name: str
    description: str
    gpu_request: str  # gpu | gres | constraint
    default_partition: str | None
    partitions: tuple[Partition, ...]
    submit_host: str  # the machine of the file Snakemake runs on and submits from: its local rules run there

    def label(self) -> str:
        return f"cluster {self.name} (partitions {', '.join(p.name for p in self.partitions)})"


def cluster(table: dict, name: str) -> Cluster:
    """The cluster `name` of a loaded machines file (validated by config/machines.schema.yaml)."""
    raw = table.get(name)
    if not isinstance(raw, dict) or "slurm" not in raw:
        have = sorted(n for n, r in table.items() if isinstance(r, dict) and "slurm" in r)
        raise MachinesError(f"machine = {name!r} is not a SLURM cluster of config/machines.yaml; allowed: one of {have}")
    slurm = raw["slurm"]
    parts = []
    for pname, p in slurm["partitions"].items():
        gpu = p.get("gpu") or {}
        # the cluster's os, arch and guard limit; the partition's memory, card, devices and licences; no price
        m = Machine(**{**_given({k: raw[k] for k in ("os", "arch", "busy_card_limit_gib") if k in raw}, gpu),
                       **_given({k: p[k] for k in ("ram_gib", "licensed") if k in p}, {}),
                       "name": f"{name}/{pname}", "description": f"partition {pname} of {raw['description']}",
                       "devices": tuple(sorted(set(p.get("devices") or ()) | ({"cuda"} if gpu else set())))})
        parts.append(Partition(pname, m, gpu.get("model"), gpu.get("constraint"), float(p["time_limit_min"])))
    default = slurm.get("default_partition")
    if default is not None and default not in slurm["partitions"]:
        raise MachinesError(f"{name}.slurm.default_partition = {default!r}: not a partition of the cluster; "
                            f"allowed: one of {sorted(slurm['partitions'])}")
    if slurm["gpu_request"] == "constraint":
        missing = [p.name for p in parts if p.gpu_model and not p.gpu_constraint]
        if missing:
            raise MachinesError(f"{name}.slurm.gpu_request = 'constraint', but partition(s) {missing} name no "
                                "gpu.constraint; allowed: a node feature per GPU partition (sinfo %f)")
    return Cluster(name, raw["description"], slurm["gpu_request"], default, tuple(parts), raw["submit_host"])


def card_capacity_mb(m: Machine) -> int:
    """The `--resources vram_mb=` a profile for this machine declares (MiB of its card)."""
    return int(round(m.vram_gib * 1024))


def home(machines: dict, tag: str) -> str:
    """The machine a profile tag names as its jobs' own: the tag's machine, or a container's host
    (container.host); a tag the file does not describe names itself."""
    raw = machines.get(tag)
    return raw.get("host", tag) if isinstance(raw, dict) else tag


def runs_on(machines: dict, tag: str, target: str, placement: dict | None = None) -> Machine:
    """Where a job of profile `tag` runs when the workflow targets `target`: on the machine `placement` sends the
    tag to (under the pod executor, pod jobs on the pod whatever the target), else on the target; a `container`
    job in the container on that machine, with its walls."""
    where = (placement or {}).get(tag, target)
    if tag == "container" and "container" in machines:
        return machine(machines, "container", host=where)
    return machine(machines, where)


def placement(executor: str | None, machines: dict) -> dict[str, str]:
    """Profile tag -> the machine its jobs run on under `executor`; tags not listed run on the target.

    Under the RunPod executor `pod` jobs run on a rented pod, and so do `container` jobs when the container's
    host is the pod (container.host: pod): there the executor builds the DFC's venv from the user's wheel.
    Every other executor runs every job on the target.
    """
    if executor != "runpod":
        return {}
    out = {"pod": "pod"}
    if "container" in machines and home(machines, "container") == "pod":
        out["container"] = "pod"
    return out


def remote_tags(executor: str | None, machines: dict) -> set[str]:
    """The profile tags whose jobs leave this machine under `executor`."""
    return set(placement(executor, machines))


def resource_value(resources, name: str, default=None):
    """A rule's or a job's resource `name` as a plain value; `default` when absent."""
    if isinstance(resources, Mapping):  # a rule's: Snakemake 9's Resources, values wrapped in Resource(.raw)
        value = resources[name] if name in resources else default
    else:  # a job's ResourceList (plain values), or none at all
        value = default if resources is None else resources.get(name, default)
    return getattr(value, "raw", value)

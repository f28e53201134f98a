"""Busy-card guard: a GPU job refuses to load when other processes already hold more than a limit.

RFD 1140/1163: on Windows/WDDM two pipelines on one 24 GiB card paged and ran ~12x slower, with no
error. Refusing is cheaper than diagnosing that again. Reads NVML (nvidia-ml-py).

    python -m fourloops.guard --limit-gib 2 [--device 0]
    exit 0: free (or no GPU: nothing to guard, with a note), 3: busy, 4: no such card, 2: bad arguments
"""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

import argparse
import math
import os
import sys
from pathlib import Path
from dataclasses import dataclass, field

GIB = 2**30
EXIT_BUSY = 3
EXIT_NO_CARD = 4


@dataclass(frozen=True)
class Holder:
    pid: int
    name: str
    used_gib: float | None  # None where the driver does not say (WSL/WDDM)


@dataclass(frozen=True)
class CardReading:
    index: int
    name: str
    total_gib: float
    used_gib: float
    holders: tuple[Holder, ...] = ()


@dataclass(frozen=True)
class Decision:
    ok: bool
    message: str
    readings: tuple[CardReading, ...] = field(default_factory=tuple)
    no_card: bool = False  # refused because the card asked for does not exist, not because it is busy


class CardBusy(RuntimeError):
    """Other processes hold more of the card than the machine's limit."""


class NoSuchCard(RuntimeError):
    """The card index asked for is not one NVML sees."""


def on_wsl(osrelease: str | os.PathLike = "/proc/sys/kernel/osrelease") -> bool:
    """WSL kernels name themselves in their release string ("...-microsoft-standard-WSL2")."""
    try:
        return "microsoft" in Path(osrelease).read_text().lower()
    except OSError:
        return False


def check_limit(limit_gib: float) -> float:
    """The limit as a float: finite and > 0 (at 0 every job refuses on an idle card: the driver holds some)."""
    try:
        value = float(limit_gib)
    except (TypeError, ValueError):
        raise ValueError(f"busy-card limit = {limit_gib!r}: not a number; allowed: GiB > 0, e.g. 2") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"busy-card limit = {limit_gib!r} GiB; allowed: a finite number > 0, e.g. 2")
    return value


def _process_name(pid: int) -> str:
    try:
        import psutil

        p = psutil.Process(pid)
        return " ".join(p.cmdline())[:120] or p.name()
    except Exception:  # noqa: BLE001 - the name is a courtesy
        return "?"


def read_nvml() -> list[CardReading] | None:
    """Every card's memory in use and the processes holding it; None without an NVIDIA driver."""
    found = read_nvml_with_driver()
    return None if found is None else found[0]


def read_nvml_with_driver() -> tuple[list[CardReading], str] | None:
    """`read_nvml`'s cards and the driver version, from one NVML session."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        cards = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            name = pynvml.nvmlDeviceGetName(h)
            holders = {}
            for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    procs = getattr(pynvml, getter)(h)
                except pynvml.NVMLError:
                    procs = []
                for p in procs:
                    used = getattr(p, "usedGpuMemory", None)
                    holders[p.pid] = Holder(p.pid, _process_name(p.pid), used / GIB if used else None)
            cards.append(CardReading(
                index=i, name=name.decode() if isinstance(name, bytes) else name,
                total_gib=mem.total / GIB, used_gib=mem.used / GIB, holders=tuple(holders.values()),
            ))
        driver = pynvml.nvmlSystemGetDriverVersion()
        return cards, driver.decode() if isinstance(driver, bytes) else driver
    finally:
        pynvml.nvmlShutdown()


def decide(readings: list[CardReading] | None, limit_gib: float, device: int = 0, own_pid: int | None = None,
           wsl: bool | None = None) -> Decision:
    """Refuse when others hold more than `limit_gib` on card `device`. No GPU: nothing to guard (ok).
    `wsl` (default: read from the kernel) adds the hint that WSL hides the processes holding the card."""
    limit_gib = check_limit(limit_gib)
    if readings is None or not readings:
        return Decision(True, "busy-card guard: no NVIDIA GPU visible (NVML absent); nothing to guard")
    card = next((c for c in readings if c.index == device), None)
    if card is None:
        seen = ", ".join(f"{c.index} ({c.name})" for c in readings)
        return Decision(False, f"busy-card guard: --device {device}: no such card; allowed: one of the cards "
                               f"NVML sees: {seen}", tuple(readings), no_card=True)
    own = sum(h.used_gib or 0.0 for h in card.holders if own_pid is not None and h.pid == own_pid)
    others = max(0.0, card.used_gib - own)
    if others <= limit_gib:
        return Decision(True, f"busy-card guard: card {card.index} ({card.name}) holds {others:.2f} GiB "
                              f"of {card.total_gib:.1f}, limit {limit_gib:g}: free", (card,))
    lines = [f"busy-card guard: card {card.index} ({card.name}) already holds {others:.2f} GiB of "
             f"{card.total_gib:.1f} GiB, more than the limit {limit_gib:g} GiB; refusing to load "
             "(a second model here pages ~12x slower on WDDM instead of failing, RFD 1140). Held by:"]
    others_list = [h for h in card.holders if h.pid != own_pid]
    for h in sorted(others_list, key=lambda h: -(h.used_gib or 0)):
        used = f"{h.used_gib:.2f} GiB" if h.used_gib is not None else "amount not reported"
        lines.append(f"  pid {h.pid:>7}  {used:>20}  {h.name}")
    if not others_list and (on_wsl() if wsl is None else wsl):
        lines.append("  (NVML lists no processes: WSL/WDDM hides them; look in nvidia-smi or Task Manager on Windows)")
    return Decision(False, "\n".join(lines), (card,))


def ensure_card_free(limit_gib: float = 2.0, device: int = 0, reader=read_nvml) -> Decision:
    """Call from a GPU job before loading: raises CardBusy with the holders listed."""
    d = decide(reader(), limit_gib, device, own_pid=os.getpid())
    if d.no_card:
        raise NoSuchCard(d.message)
    if not d.ok:
        raise CardBusy(d.message)
    return d


def _limit_arg(text: str) -> float:
    try:
        return check_limit(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The guard's options (shared with `fourloops guard`)."""
    ap.add_argument("--limit-gib", type=_limit_arg, default=2.0, help="refuse above this much held by others, GiB > 0 (default 2)")
    ap.add_argument("--device", type=int, default=0, help="card index (default 0)")


def run(limit_gib: float, device: int, reader=None) -> int:
    """Decide and print; the exit status: 0 free, EXIT_BUSY, EXIT_NO_CARD. `reader` defaults to read_nvml."""
    d = decide((reader or read_nvml)(), limit_gib, device, own_pid=os.getpid())
    print(d.message, file=sys.stdout if d.ok else sys.stderr)
    if d.ok:
        return 0
    return EXIT_NO_CARD if d.no_card else EXIT_BUSY


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fourloops.guard", description=__doc__.splitlines()[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    return run(args.limit_gib, args.device)


if __name__ == "__main__":
    sys.exit(main())

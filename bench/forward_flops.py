"""What the generator's transformer forwards make of the card: their FLOPs over their seconds, through the generate
job's own path.

Question (the batching issue's goal): at one view a call the transformer's forwards leave an H100 idle half the time;
at 8 views a call, do they run at 400 TFLOP/s or more? Each configuration (a reference count; one view, then --batch
views a call) makes a warm-up pipeline call and then --calls timed ones through fourloops.generate.load_backend and
Generator.generate_batch, under the jobs' determinism settings (fourloops.determinism.apply) and attention kernels.
The transformer's forward is wrapped (ForwardMeter): the first forward of each input shape runs under torch's
FlopCounterMode (the FLOPs of its matrix products, convolutions and attention, counted from their shapes; that
forward is not timed, and it falls in the warm-up call), every later forward between two CUDA events. A guidance
branch has the same shapes every step, so each input shape is a branch. Per configuration: each branch's forwards,
samples a forward, FLOPs and seconds a forward, TFLOP/s; the forwards' FLOPs over their seconds; and their seconds'
share of the calls' wall time (the rest is the text encoder, the VAE, the scheduler and the launches between).

    python3 bench/forward_flops.py --model sizing/models/sizing/omnigen2 --references 1 3 --batch 8 --out flops.json
    python3 bench/forward_flops.py --table flops.json

With --device cpu and a tiny model it checks itself; its seconds and FLOP rates say nothing of a GPU. Runs on a GPU
machine: bench/gpu_run.sh batching, GPU_RUN_FLOPS=1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def signature(value) -> tuple:
    """The shapes and dtypes of a call's tensors, nested as its arguments are: what decides its FLOPs."""
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(signature(v) for v in value))
    if isinstance(value, dict):
        return ("map", tuple((k, signature(v)) for k, v in sorted(value.items())))
    if value is None or isinstance(value, (bool, int, float, str)):
        return ("value", value)
    return ("object", type(value).__name__)


def references_in(kwargs: dict) -> int:
    """The reference images an OmniGen2 forward carries (its first sample's `ref_image_hidden_states`): 0 for the
    guidance branch without them."""
    refs = kwargs.get("ref_image_hidden_states")
    first = refs[0] if isinstance(refs, (list, tuple)) and refs else None
    return len(first) if isinstance(first, (list, tuple)) else 0


def samples(args: tuple, kwargs: dict) -> int:
    """The samples a forward carries: its first argument's (a tensor's leading dimension, or a list's length)."""
    first = args[0] if args else next(iter(kwargs.values()), None)
    if isinstance(first, (list, tuple)):
        return len(first)
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else 1


class ForwardMeter:
    """Wraps `module`'s forward (an instance attribute over the class's): the first call of each input shape runs
    under FlopCounterMode and is not timed; every later one is timed, between CUDA events where `cuda`, else by the
    clock. `take()` returns what the timed calls since the last `take()` did, per input shape, and forgets them."""

    def __init__(self, module, cuda: bool):
        import inspect

        self.module, self.cuda, self.inner = module, cuda, module.forward
        # the forward's own signature: OmniGen2's pipeline passes the reference latents only to a forward whose
        # signature names them (inspect.signature), which a bare (*args, **kwargs) would not
        self.__signature__ = inspect.signature(self.inner)
        self.flops: dict[tuple, int] = {}
        self.samples: dict[tuple, int] = {}
        self.references: dict[tuple, int] = {}
        self.timed: list = []
        module.forward = self

    def __call__(self, *args, **kwargs):
        import torch

        sig = signature((args, kwargs))
        if sig not in self.flops:
            from torch.utils.flop_counter import FlopCounterMode

            with FlopCounterMode(display=False) as counter:
                out = self.inner(*args, **kwargs)
            self.flops[sig], self.samples[sig] = int(counter.get_total_flops()), samples(args, kwargs)
            self.references[sig] = references_in(kwargs)
            return out
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = self.inner(*args, **kwargs)
            end.record()
            self.timed.append((sig, start, end))
        else:
            t0 = time.perf_counter()
            out = self.inner(*args, **kwargs)
            self.timed.append((sig, time.perf_counter() - t0))
        return out

    def take(self) -> list[dict]:
        """Per input shape, in the order first seen: forwards, samples and references a forward, FLOPs a forward,
        seconds."""
        import torch

        if self.cuda:
            torch.cuda.synchronize()
        seconds: dict[tuple, list[float]] = {}
        for sig, *t in self.timed:
            seconds.setdefault(sig, []).append(t[0].elapsed_time(t[1]) / 1000.0 if self.cuda else t[0])
        self.timed = []
        order = list(self.flops)
        return [{"shape": order.index(sig), "forwards": len(s), "samples": self.samples[sig],
                 "references": self.references[sig], "flops": self.flops[sig], "seconds": round(sum(s), 6)}
                for sig, s in sorted(seconds.items(), key=lambda kv: order.index(kv[0]))]

    def close(self) -> None:
        del self.module.forward


def run(args) -> dict:
    import numpy as np
    import torch
    from PIL import Image

    from fourloops import determinism
    from fourloops.generate import load_backend

    state = determinism.apply(args.seed)
    cuda = args.device.startswith("cuda")
    if not cuda:
        from fourloops import sizing

        sizing.import_omnigen2()
        torch.set_num_threads(1)
    settings = {"num_inference_steps": args.steps, "guidance": 4.0, "width": args.size, "height": args.size,
                "negative_prompt": ""}
    gen = load_backend("omnigen2", args.model, None, "bf16" if cuda else "fp32", args.device, settings)
    meter = ForwardMeter(gen.pipe.transformer, cuda)
    rng = np.random.default_rng(0)
    refs = [Image.fromarray(rng.integers(0, 256, (args.size, args.size, 3), dtype=np.uint8)) for _ in range(3)]
    prompts = [f"The same person seen from {az} degrees." for az in (0, 45, 90, 135, 180, 225, 270, 315)]
    pad_to = gen.text_length(prompts)  # as a job pads every call's prompts: one text length, the same shapes
    rows = []
    try:
        for n_refs in args.references:
            for batch in dict.fromkeys((1, args.batch)):
                walls = []
                for call in range(args.calls + 1):  # the first a warm-up: it counts each new shape's FLOPs
                    items = [(refs[:n_refs], prompts[(call * batch + j) % len(prompts)], 7 + call * batch + j)
                             for j in range(batch)]
                    if cuda:
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    gen.generate_batch(items, job_seed=args.seed, pad_to=pad_to)
                    if cuda:
                        torch.cuda.synchronize()
                    walls.append(time.perf_counter() - t0)
                    if call == 0:
                        meter.take()
                branches = meter.take()
                flops = sum(b["flops"] * b["forwards"] for b in branches)
                seconds = sum(b["seconds"] for b in branches)
                wall = sum(walls[1:])
                rows.append({"references": n_refs, "batch": batch, "calls": args.calls, "views": args.calls * batch,
                             "wall_seconds": round(wall, 4), "seconds_a_view": round(wall / (args.calls * batch), 4),
                             "forward_seconds": round(seconds, 4), "forward_share": round(seconds / wall, 4),
                             "tflops": round(flops / seconds / 1e12, 2) if seconds else None, "branches": branches})
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "branches"}), flush=True)
    finally:
        meter.close()
    return {"gpu": torch.cuda.get_device_name(0) if cuda else None, "torch": torch.__version__, "steps": args.steps,
            "size": args.size, "determinism": state, "rows": rows}


def table(record: dict) -> str:
    """The record as markdown: a row per configuration, then a row per guidance branch (input shape)."""
    out = [f"Transformer forwards, {record.get('gpu') or 'CPU'}, {record['size']} px, {record['steps']} steps, "
           f"torch {record['torch']}", "",
           "| references | views a call | s a view | forwards' share of the wall | TFLOP/s (forwards) |",
           "|---|---|---|---|---|"]
    out += [f"| {r['references']} | {r['batch']} | {r['seconds_a_view']:.3f} | {r['forward_share']:.0%} | "
            f"{r['tflops'] if r['tflops'] is not None else '-'} |" for r in record["rows"]]
    out += ["", "| references | views a call | branch: references in the forward | forwards | samples a forward | "
            "GFLOP a forward | s a sample | TFLOP/s |", "|---|---|---|---|---|---|---|---|"]
    for r in record["rows"]:
        for b in r["branches"]:
            per = b["seconds"] / b["forwards"]
            out.append(f"| {r['references']} | {r['batch']} | {b['references']} | {b['forwards']} | {b['samples']} | "
                       f"{b['flops'] / 1e9:.1f} | {per / b['samples']:.4f} | {b['flops'] / per / 1e12:.1f} |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="sizing/models/sizing/omnigen2")
    ap.add_argument("--device", default="cuda", help="cuda; cpu checks the bench itself on a tiny model")
    ap.add_argument("--references", type=int, nargs="+", default=[1, 3], choices=[1, 2, 3])
    ap.add_argument("--batch", type=int, default=8, help="views a call in the batched rows")
    ap.add_argument("--calls", type=int, default=2, help="timed calls per configuration, after a warm-up")
    ap.add_argument("--steps", type=int, default=28)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--seed", type=int, default=20260830)
    ap.add_argument("--out")
    ap.add_argument("--table", metavar="RESULT")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())), end="")
        return 0
    record = run(args)
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(table(record), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

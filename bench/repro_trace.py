"""Where do two GPU processes first write different bits? One process of the generate path and the LoRA step, every
module's output checksummed as it is made, so that two processes' traces name the first module that differs.

Question: a generate job and a lora_train job run twice on one GPU with the same inputs wrote different bytes;
which operation is the first to differ, with the determinism settings off (torch's defaults) and on
(fourloops.determinism)?

    FOURLOOPS_DETERMINISM=off python3 bench/repro_trace.py --model sizing/models/sizing/omnigen2 --out trace-off-1.json
    FOURLOOPS_DETERMINISM=off python3 bench/repro_trace.py ... --out trace-off-2.json
    python3 bench/repro_trace.py --compare trace-off-1.json trace-off-2.json

Each process loads the sizing OmniGen2 (real shape, random weights) through fourloops.generate.load_backend, makes
one view through Generator.generate_batch (the job's own path: seeded reference encode, the prompt encoded alone),
then takes LoRA optimizer steps through fourloops.lora's own loss on the same transformer (bf16, rank 8). A checksum
is exact: the tensor's bits as integers, summed plain and position-weighted (integer sums have no rounding).
Runs on a GPU machine (bench/gpu_run.sh repro).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def checksum(t) -> str:
    import torch

    x = t.detach()
    if x.is_complex():
        x = torch.view_as_real(x)
    x = x.contiguous().reshape(-1)
    if x.numel() == 0:
        return "empty"
    width = x.element_size()
    bits = x.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]).to(torch.int64)
    weights = torch.arange(bits.numel(), device=bits.device, dtype=torch.int64) % 65521 + 1
    return f"{tuple(t.shape)}:{t.dtype}:{int(bits.sum())}:{int((bits * weights).sum())}"


def _outputs(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _outputs(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _outputs(o)
    elif hasattr(obj, "to_tuple"):
        yield from _outputs(obj.to_tuple())


class Trace:
    def __init__(self):
        self.rows: list[tuple[str, str]] = []
        self.handles = []

    def watch(self, root, prefix: str):
        for name, module in root.named_modules():
            label = f"{prefix}.{name}" if name else prefix

            def hook(_m, _inp, out, label=label):
                for i, t in enumerate(_outputs(out)):
                    self.rows.append((f"{label}#{i}", checksum(t)))

            self.handles.append(module.register_forward_hook(hook))

    def stop(self):
        for h in self.handles:
            h.remove()
        self.handles = []


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def lora_transformer(gen, device: str):
    """The loaded generator's transformer as a LoRA job trains it: frozen, a rank-8 adapter on the attention
    projections in fp32 (its B given values, so that gradients reach A), train mode, gradient checkpointing on a GPU.
    Returns (transformer, trainable parameters, OmniGen2's rotary frequencies)."""
    import torch
    from omnigen2.models.transformers.repo import OmniGen2RotaryPosEmbed
    from peft import LoraConfig

    transformer = gen.pipe.transformer
    transformer.requires_grad_(False)
    transformer.add_adapter(LoraConfig(r=8, lora_alpha=8, target_modules=["to_q", "to_k", "to_v", "to_out.0"],
                                       init_lora_weights=True))
    trainable = [p for p in transformer.parameters() if p.requires_grad]
    for p in trainable:
        p.data = p.data.float()
    for p in trainable:  # a LoRA's B starts at zero: give it values so that its gradients reach the A matrices
        torch.nn.init.normal_(p, std=0.01, generator=None)
    transformer.train()
    if device.startswith("cuda"):
        transformer.enable_gradient_checkpointing()
    freqs = OmniGen2RotaryPosEmbed.get_freqs_cis(transformer.config.axes_dim_rope, transformer.config.axes_lens,
                                                 theta=10000)
    return transformer, trainable, freqs


def run(args) -> dict:
    import numpy as np
    import torch
    from PIL import Image

    from fourloops import determinism

    state = determinism.apply(args.seed)
    from fourloops.generate import load_backend

    settings = {"num_inference_steps": args.steps, "guidance": 4.0, "width": args.size, "height": args.size,
                "negative_prompt": ""}
    t0 = time.perf_counter()
    gen = load_backend("omnigen2", args.model, None, args.precision, args.device, settings)
    load_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    refs = [Image.fromarray(rng.integers(0, 256, (args.size, args.size, 3), dtype=np.uint8)) for _ in range(args.refs)]
    trace = Trace()
    for name in ("transformer", "vae", "mllm"):
        trace.watch(getattr(gen.pipe, name), name)
    t0 = time.perf_counter()
    image = gen.generate_batch([(refs, "The same person seen from 45 degrees.", 7)], job_seed=args.seed)[0]
    _sync(args.device)
    view_s = time.perf_counter() - t0
    trace.stop()
    generate_rows = trace.rows
    out = {"state": state, "load_seconds": load_s, "view_seconds": view_s,
           "image": checksum(torch.from_numpy(np.asarray(image).copy())), "generate": generate_rows}

    # the LoRA step on the same transformer: lora.flow_loss, bf16 frozen weights, rank 8, checkpointing
    from fourloops import lora

    transformer, trainable, freqs = lora_transformer(gen, args.device)
    g = torch.Generator().manual_seed(args.seed)
    lat = args.size // 8
    x0 = torch.randn((1, 16, lat, lat), generator=g).to(args.device)
    src = torch.randn((1, 16, lat, lat), generator=g).to(args.device)
    embeds = torch.randn((1, 24, transformer.config.text_feat_dim), generator=g).to(args.device)
    mask = torch.ones((1, 24), dtype=torch.long).to(args.device)
    batch = lora.Batch(x0, src, embeds, mask)
    compute = torch.bfloat16 if args.precision == "bf16" else torch.float32
    trace = Trace()
    trace.watch(transformer, "lora.transformer")
    grads, step_s = [], []
    for step in range(args.lora_steps):
        t = torch.rand((1,), generator=g).to(args.device)
        noise = torch.randn(x0.shape, generator=g).to(args.device)
        t1 = time.perf_counter()
        loss = lora.flow_loss(transformer, "omnigen2", batch, t, noise, compute, freqs)
        loss.backward()
        _sync(args.device)
        step_s.append(time.perf_counter() - t1)
        names = [n for n, p in transformer.named_parameters() if p.requires_grad]
        grads.extend((f"step{step}.grad.{n}", checksum(p.grad)) for n, p in zip(names, trainable) if p.grad is not None)
        grads.append((f"step{step}.loss", checksum(loss.detach())))
        for p in trainable:
            p.grad = None
    trace.stop()
    out |= {"lora_forward": trace.rows, "lora_grads": grads, "lora_step_seconds": step_s,
            "state_end": determinism.state()}
    return out


def compare(a: dict, b: dict) -> dict:
    report = {"image_equal": a["image"] == b["image"], "modes": [a["state"].get("mode"), b["state"].get("mode")]}
    for part in ("generate", "lora_forward", "lora_grads"):
        ra, rb = a[part], b[part]
        first = next((i for i, (x, y) in enumerate(zip(ra, rb)) if x != y), None)
        differing = sorted({x[0].split("#")[0] for x, y in zip(ra, rb) if x != y})
        report[part] = {"entries": [len(ra), len(rb)], "equal": ra == rb,
                        "first_difference": None if first is None else {"index": first, "a": ra[first], "b": rb[first]},
                        "modules_differing": len(differing), "some_differing": differing[:15]}
    report["seconds"] = {"view": [a["view_seconds"], b["view_seconds"]],
                         "lora_steps": [a["lora_step_seconds"], b["lora_step_seconds"]]}
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="sizing/models/sizing/omnigen2")
    ap.add_argument("--out")
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--refs", type=int, default=1)
    ap.add_argument("--lora-steps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20260830)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--compare", nargs=2, metavar="TRACE")
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        print(json.dumps(compare(a, b), indent=1))
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = run(args)
    Path(args.out).write_text(json.dumps(result))
    print(f"{args.out}: mode {result['state'].get('mode')}, view {result['view_seconds']:.2f} s, "
          f"{len(result['generate'])} generate rows, {len(result['lora_grads'])} grad rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())

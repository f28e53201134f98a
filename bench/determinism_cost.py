"""Which determinism setting costs the LoRA step its seconds? One process times LoRA steps with the settings as the
process starts them, then with torch's deterministic algorithms switched the other way, each at one sample a forward
and at a micro-batch; the GPU kernels of one step of each are listed by their device time.

Question: the LoRA step took about 1.4x the seconds with fourloops.determinism on; is it torch's deterministic
algorithms (which choose other attention and reduction kernels), the pinned Triton RMSNorm, or cuBLAS's workspace
setting, and does batching the step change what determinism costs?

    FOURLOOPS_DETERMINISM=on  python3 bench/determinism_cost.py --model sizing/models/sizing/omnigen2 --out on.json
    FOURLOOPS_DETERMINISM=off python3 bench/determinism_cost.py --model sizing/models/sizing/omnigen2 --out off.json
    python3 bench/determinism_cost.py --table on.json off.json

`on` starts with every setting (strict deterministic algorithms, the pinned RMSNorm, CUBLAS_WORKSPACE_CONFIG), then
turns the deterministic algorithms off: the second row is the pin and the workspace alone. `off` starts with none,
then turns the deterministic algorithms on: its second row is those algorithms alone. A step is `--accumulation`
samples in micro-batches of each of `--micros` (one and 8) through fourloops.lora.flow_losses (the lora_train job's loss),
each followed by its backward; the optimizer's step, the same under every setting, is left out. Steps after the
first of each setting are timed; the model is the sizing OmniGen2 (real shape, random weights), rank 8, bf16 frozen,
gradient checkpointing, 512 px, as the job trains it. Runs on a GPU machine (bench/gpu_run.sh batching).

Besides the jobs' own attention kernels (`attention`: `default`), `--attention` times the step with other attention
variants under the settings the process started with (see `attention`: the math backend; flash attention where the
mask admits every key), each row with its gradients' digests: one digest over a row's steps is the same bits every
step.

`--generate` asks the same of the generate path: views at one a call and at `--batch` a call with the settings on,
for each variant in `--generate-attention` (`default`: as the jobs run; `fused`: attention with no gradient
to take run with torch's check off, so that it keeps cuDNN's fused kernel; `none`: the settings off), each
call's seconds and its images' sha256; two processes' rows show whether a variant writes the same bytes every time,
which a job's settings would need before they took it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _kernels(prof, top: int, device_cpu: bool = False) -> dict:
    rows = []
    for e in prof.key_averages():
        device_us = getattr(e, "self_device_time_total", None)
        if device_us is None:
            device_us = getattr(e, "self_cuda_time_total", 0)
        if not device_us and device_cpu:
            device_us = e.self_cpu_time_total
        if device_us:
            rows.append((e.key, device_us, e.count))
    rows.sort(key=lambda r: -r[1])
    total = sum(r[1] for r in rows)
    return {"device_seconds": round(total / 1e6, 4),
            "top": [{"kernel": k[:160], "seconds": round(us / 1e6, 4), "share": round(us / total, 4), "calls": n}
                    for k, us, n in rows[:top]]}


def run(args) -> dict:
    import torch

    from fourloops import determinism, lora
    from fourloops.generate import load_backend
    from repro_trace import lora_transformer

    state = determinism.apply(args.seed)
    settings = {"num_inference_steps": 1, "guidance": 4.0, "width": args.size, "height": args.size,
                "negative_prompt": ""}
    dev, cuda = args.device, args.device.startswith("cuda")
    if not cuda:  # OmniGen2's package as the sizing set imports it where there is no GPU (no Triton kernels)
        from fourloops import sizing

        sizing.import_omnigen2()
    gen = load_backend("omnigen2", args.model, None, "bf16" if cuda else "fp32", dev, settings)
    transformer, trainable, freqs = lora_transformer(gen, dev)
    g = torch.Generator().manual_seed(args.seed)
    lat = args.size // 8
    width = transformer.config.text_feat_dim
    lengths = [args.prompt_lengths[i % len(args.prompt_lengths)] for i in range(args.accumulation)]
    samples = [lora.Batch(torch.randn((1, 16, lat, lat), generator=g).to(dev),
                          torch.randn((1, 16, lat, lat), generator=g).to(dev),
                          torch.randn((1, n, width), generator=g).to(dev),
                          torch.ones((1, n), dtype=torch.long).to(dev)) for n in lengths]
    ts = [torch.rand((1,), generator=g).to(dev) for _ in samples]
    noises = [torch.randn(s.x0.shape, generator=g).to(dev) for s in samples]
    compute = torch.bfloat16 if cuda else torch.float32

    def sync():
        if cuda:
            torch.cuda.synchronize()

    digests: list[str] = []  # each step's gradients, hashed after its clock stopped

    def step(micro: int) -> float:
        sync()
        t0 = time.perf_counter()
        for first in range(0, len(samples), micro):
            part = slice(first, first + micro)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
                losses = lora.flow_losses(transformer, "omnigen2", samples[part], ts[part], noises[part],
                                          compute, freqs)
            (torch.stack(losses).sum() / len(samples)).backward()
        sync()
        seconds = time.perf_counter() - t0
        digests.append(_digest(p.grad for p in trainable))
        for p in trainable:
            p.grad = None
        return seconds

    from torch.profiler import ProfilerActivity, profile

    started = bool(torch.are_deterministic_algorithms_enabled())
    attention(torch)
    rows = []
    plan = [(algorithms, "default", micro) for algorithms in (started, not started) for micro in args.micros]
    plan += [(started, variant, max(args.micros)) for variant in args.attention]
    for algorithms, variant, micro in plan:
        torch.use_deterministic_algorithms(algorithms)
        ATTENTION["variant"] = variant
        del digests[:]
        row = {"mode": state["mode"], "deterministic_algorithms": algorithms, "attention": variant,
               "pinned": list(determinism.state()["pinned_autotuners"]),
               "cublas_workspace": os.environ.get(determinism.CUBLAS_VAR), "micro_batch": micro}
        try:
            first = step(micro)
            timed = [step(micro) for _ in range(args.steps)]
            with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
                step(micro)
        except Exception as exc:  # a variant the machine cannot run (a kernel, a package): its row says why
            if variant == "default":
                raise
            for p in trainable:
                p.grad = None
            rows.append({**row, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"})
            print(f"mode {state['mode']} algorithms {algorithms} attention {variant} micro {micro}: "
                  f"{rows[-1]['error']}", flush=True)
            continue
        rows.append({**row, "first_step_seconds": round(first, 4), "step_seconds": [round(x, 4) for x in timed],
                     "median_step_seconds": round(statistics.median(timed), 4),
                     "grad_sha256": sorted(set(digests)), "kernels": _kernels(prof, args.top, not cuda)})
        print(f"mode {state['mode']} algorithms {algorithms} attention {variant} micro {micro}: first {first:.2f} s, "
              f"steps {[round(x, 3) for x in timed]}, {len(set(digests))} distinct gradients", flush=True)
    ATTENTION["variant"] = "default"
    return {"state": state, "accumulation": args.accumulation, "size": args.size, "prompt_lengths": lengths,
            "rows": rows, "gpu": torch.cuda.get_device_name(0) if cuda else None, "torch": torch.__version__}


ATTENTION = {"variant": "default"}  # how torch.nn.functional.scaled_dot_product_attention runs while a row is timed
VARIANTS = ("default", "fused", "math", "flash-unmasked", "flash-prefix", "torch", "none", "cudnn-frontend")


def _digest(tensors) -> str:
    import hashlib

    h = hashlib.sha256()
    for t in tensors:
        h.update(b"-" if t is None else t.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def attention(torch) -> None:
    """Route every scaled_dot_product_attention call (OmniGen2's processor looks it up at call time) through
    ATTENTION["variant"]:
      default         as the jobs run it: with the settings on, fourloops.determinism.attention_kernels (which
                      loading OmniGen2 installs) takes `fused`, `flash-unmasked` and `flash-prefix` below; with them
                      off, torch's own choice;
      torch           torch's own choice for every call, the jobs' kernels bypassed: under strict settings cuDNN's
                      fused kernels are ruled out, leaving a masked call the memory-efficient kernels, whose
                      deterministic backward is slow;
      fused           a call with no gradient to take runs with torch's check off, so that it keeps cuDNN's fused
                      forward; a call that builds a graph is unchanged;
      math            torch's math backend (matrix products and a softmax: deterministic with cuBLAS's workspace);
      flash-unmasked  a boolean mask that admits every key is dropped (the same attention), which lets torch pick
                      flash attention, whose backward runs its deterministic mode under strict settings;
      flash-prefix    a boolean key mask that admits a prefix of each sample's keys (OmniGen2's padded prompts:
                      `fourloops.determinism.prefix_split`) runs as one unmasked call a sample over its admitted
                      keys (the same attention),
                      so that a padded micro-batch may take flash attention too;
      none            (the generate path only) the whole call with torch's deterministic algorithms and cuDNN's
                      deterministic mode off: what the kernel settings cost a view, and its peak, in one process;
      cudnn-frontend  a call that takes a gradient runs through NVIDIA's cuDNN frontend (the nvidia-cudnn-frontend
                      wheel's `cudnn.sdpa.fwd.torch_op.sdpa`), whose backward asks cuDNN for its deterministic
                      algorithm while torch's deterministic algorithms are on: cuDNN's fused attention, which torch
                      itself rules out under them; its masks as `flash-prefix` and `flash-unmasked`; a call with no
                      gradient as `default`.
    Whether a variant writes the same bits every time is what the rows' gradient digests and two processes show."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from fourloops.determinism import checks_off, prefix_split, takes_gradient, without_full_mask

    original = F.scaled_dot_product_attention
    if getattr(original, "_fourloops_bench", False):
        return

    def sdpa(*args, **kwargs):
        variant = ATTENTION["variant"]
        if variant == "cudnn-frontend" and takes_gradient(torch, args, kwargs):
            split = prefix_split(torch, cudnn_frontend_sdpa, args, kwargs)
            if split is not None:
                return split
            args, kwargs = without_full_mask(torch, args, kwargs)
            return cudnn_frontend_sdpa(*args, **kwargs)
        if variant == "torch":
            return getattr(original, "__wrapped__", original)(*args, **kwargs)
        if variant == "fused":
            if takes_gradient(torch, args, kwargs):
                return original(*args, **kwargs)
            with checks_off(torch):
                return original(*args, **kwargs)
        if variant == "math":
            with sdpa_kernel(SDPBackend.MATH):
                return original(*args, **kwargs)
        if variant == "flash-prefix":
            split = prefix_split(torch, original, args, kwargs)
            if split is not None:
                return split
        if variant in ("flash-unmasked", "flash-prefix"):
            args, kwargs = without_full_mask(torch, args, kwargs)
            return original(*args, **kwargs)
        return original(*args, **kwargs)

    sdpa._fourloops_bench = True
    F.scaled_dot_product_attention = sdpa


def cudnn_frontend_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                        enable_gqa=False):
    """scaled_dot_product_attention's call through the cuDNN frontend's differentiable op (BHSD; fewer key heads than
    query heads are its grouped-query attention). A mask, dropout or a key head count that does not divide the
    query's are not taken: the row records the error."""
    if attn_mask is not None or dropout_p:
        raise ValueError("cudnn-frontend: takes no mask and no dropout (a prefix mask is split first)")
    if query.shape[1] % key.shape[1]:
        raise ValueError(f"cudnn-frontend: {query.shape[1]} query heads over {key.shape[1]} key heads")
    import torch
    from cudnn.sdpa.fwd.torch_op import sdpa

    device = query.device.type
    if torch.is_autocast_enabled(device):  # as autocast casts torch's own attention's inputs (rotary ones are fp32)
        dtype = torch.get_autocast_dtype(device)
        query, key, value = (t.to(dtype) for t in (query, key, value))
    out, _ = sdpa(query, key, value, scale=scale, is_causal=is_causal, return_lse=True)
    return out


def run_generate(args) -> dict:
    """Views at one a call and at `--batch` a call, with each attention variant in `--generate-attention` (the first
    call of each a warm-up): seconds a view and each image's sha256, so that two processes show whether a variant
    gives the same bytes every time."""
    import hashlib

    import numpy as np
    import torch
    from PIL import Image

    from fourloops import determinism
    from fourloops.generate import load_backend

    state = determinism.apply(args.seed)
    attention(torch)
    settings = {"num_inference_steps": args.generate_steps, "guidance": 4.0, "width": args.size, "height": args.size,
                "negative_prompt": ""}
    cuda = args.device.startswith("cuda")
    if not cuda:
        from fourloops import sizing

        sizing.import_omnigen2()
    gen = load_backend("omnigen2", args.model, None, "bf16" if cuda else "fp32", args.device, settings)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    rng = np.random.default_rng(0)
    refs = [Image.fromarray(rng.integers(0, 256, (args.size, args.size, 3), dtype=np.uint8))]
    rows = []
    prompts = [f"The same person seen from {az} degrees." for az in (0, 45, 90, 135, 180, 225, 270, 315)]
    strict, cudnn_deterministic = torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic
    for variant in args.generate_attention:
        ATTENTION["variant"] = "default" if variant == "none" else variant
        torch.use_deterministic_algorithms(strict and variant != "none")
        torch.backends.cudnn.deterministic = cudnn_deterministic and variant != "none"
        for batch, calls in ((1, args.views + 1), (args.batch, 2)):  # the first call of each a warm-up
            for i in range(calls):
                items = [(refs, prompts[(i + j) % len(prompts)], 7 + i * batch + j) for j in range(batch)]
                sync()
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                t0 = time.perf_counter()
                images = gen.generate_batch(items, job_seed=args.seed)
                sync()
                seconds = time.perf_counter() - t0
                rows.append({"attention": variant, "batch": batch, "call": i, "seconds": round(seconds, 4),
                             "seconds_a_view": round(seconds / batch, 4),
                             "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 4) if cuda else None,
                             "sha256": [hashlib.sha256(np.asarray(im).tobytes()).hexdigest()[:16] for im in images]})
                print(rows[-1], flush=True)
    ATTENTION["variant"] = "default"
    torch.use_deterministic_algorithms(strict)
    torch.backends.cudnn.deterministic = cudnn_deterministic
    return {"state": state, "steps": args.generate_steps, "size": args.size, "generate": rows,
            "gpu": torch.cuda.get_device_name(0) if cuda else None, "torch": torch.__version__}


def against_none(rows: list[dict]) -> list[tuple[str, float, dict]]:
    """(the settings in words, the step's median over the all-off row's at its micro-batch, the row) for every row,
    by micro-batch, then off before on, then without the deterministic algorithms before with them, then torch's own
    attention before the variants (bench/determinism_cost.py's `attention`; a record without the field: torch's)."""
    def variant(r):
        return r.get("attention", "default")

    base = {r["micro_batch"]: r["median_step_seconds"] for r in rows
            if r["mode"] == "off" and not r["deterministic_algorithms"] and variant(r) == "default"}
    out = []
    for r in sorted(rows, key=lambda r: (r["micro_batch"], r["mode"], r["deterministic_algorithms"],
                                         variant(r) != "default", variant(r))):
        what = ("pin + cuBLAS workspace" if r["mode"] == "on" else "none") + (
            " + deterministic algorithms" if r["deterministic_algorithms"] else "") + (
            f" + attention {variant(r)}" if variant(r) != "default" else "")
        ratio = (r["median_step_seconds"] / base[r["micro_batch"]] if r["micro_batch"] in base and "error" not in r
                 else float("nan"))
        out.append((what, ratio, r))
    return out


def table(paths: list[str]) -> str:
    """The LoRA rows of every given result, each step's median against the all-off row at the same micro-batch
    (with each row's distinct gradient digests: 1 is the same bits every step), then the generate results' table."""
    results = [json.loads(Path(p).read_text()) for p in paths]
    rows = [r for res in results for r in res.get("rows") or []]
    out = []
    if rows:
        out += ["| settings | micro-batch | step s (median) | against all off | distinct gradients | top kernel "
                "(share of device time) |", "|---|---|---|---|---|---|"]
        for what, ratio, r in against_none(rows):
            if "error" in r:
                out.append(f"| {what} | {r['micro_batch']} | - | - | - | did not run: {r['error'][:100]} |")
                continue
            top = r["kernels"]["top"][0] if r["kernels"]["top"] else {"kernel": "-", "share": 0}
            digests = len(r["grad_sha256"]) if "grad_sha256" in r else "-"
            out.append(f"| {what} | {r['micro_batch']} | {r['median_step_seconds']:.3f} | {ratio:.3f} | {digests} | "
                       f"`{top['kernel'][:70]}` ({top['share']:.0%}) |")
    generate = [(i + 1, res) for i, res in enumerate(r for r in results if r.get("generate"))]
    if generate:
        out += ["" if out else None, generate_table(generate)]
    return "\n".join(x for x in out if x is not None)


def generate_table(processes: list[tuple[int, dict]]) -> str:
    """Per attention variant and views a call: seconds a view after the warm-up call (each process), against the
    strict row's; the call's peak; whether every process wrote the same images (their sha256 over the same calls)."""
    cells: dict = {}
    for n, res in processes:
        for r in res["generate"]:
            cells.setdefault((r["attention"], r["batch"]), {}).setdefault(n, []).append(r)
    strict = {}
    for (variant, batch), by in cells.items():
        timed = [r["seconds_a_view"] for rs in by.values() for r in rs if r["call"] > 0]
        if variant == "default" and timed:
            strict[batch] = statistics.median(timed)
    out = ["| attention | views a call | s a view (median, after the warm-up) | against strict | peak GiB | "
           "processes | same images in every process |", "|---|---|---|---|---|---|---|"]
    for (variant, batch), by in sorted(cells.items(), key=lambda kv: (kv[0][1], VARIANTS.index(kv[0][0]))):
        timed = [r["seconds_a_view"] for rs in by.values() for r in rs if r["call"] > 0]
        median = statistics.median(timed) if timed else float("nan")
        peaks = [r["peak_gib"] for rs in by.values() for r in rs if r.get("peak_gib") is not None]
        images = {n: [tuple(r["sha256"]) for r in sorted(rs, key=lambda r: r["call"])] for n, rs in by.items()}
        same = "yes" if len(images) > 1 and len({tuple(v) for v in images.values()}) == 1 else (
            "no" if len(images) > 1 else "one process")
        ratio = median / strict[batch] if batch in strict else float("nan")
        out.append(f"| {variant} | {batch} | {median:.3f} | {ratio:.3f} | {max(peaks) if peaks else float('nan'):.2f} | "
                   f"{len(by)} | {same} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="sizing/models/sizing/omnigen2")
    ap.add_argument("--out")
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--accumulation", type=int, default=8, help="samples a step (the effective batch)")
    ap.add_argument("--micros", type=int, nargs="+", default=[1, 8],
                    help="the micro-batches timed (samples a forward); the attention variants at the largest")
    ap.add_argument("--steps", type=int, default=3, help="timed steps after the first, per setting")
    ap.add_argument("--top", type=int, default=12, help="kernels listed per setting")
    ap.add_argument("--seed", type=int, default=20260830)
    ap.add_argument("--device", default="cuda", help="cuda; cpu checks the bench itself on a tiny model")
    ap.add_argument("--attention", nargs="*", default=["torch"], choices=VARIANTS,
                    help="attention variants timed in the LoRA step besides torch's own choice, under the settings "
                         "the process started with")
    ap.add_argument("--prompt-lengths", type=int, nargs="+", default=[24],
                    help="the samples' prompt tokens, in turn (more than one length pads a micro-batch's prompts, as "
                         "the LoRA's records of different azimuths do)")
    ap.add_argument("--generate", action="store_true", help="time views with each of --generate-attention")
    ap.add_argument("--generate-attention", nargs="+", default=["default", "fused"], choices=VARIANTS)
    ap.add_argument("--generate-steps", type=int, default=28)
    ap.add_argument("--views", type=int, default=2, help="timed one-view calls per variant, after a warm-up")
    ap.add_argument("--batch", type=int, default=8, help="views a call in the batched rows (one timed call)")
    ap.add_argument("--table", nargs="+", metavar="RESULT")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = run_generate(args) if args.generate else run(args)
    Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

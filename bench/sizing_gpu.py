"""The sizing probes on one GPU, no network: build the sizing models once, then probe each configuration in its
own process (one precision per process; an OOM or a crash of one is recorded, not fatal).

    PYTHONPATH=src:/path/to/OmniGen2 python bench/sizing_gpu.py --work /data/sizing --out bench/results/raw-h200

Writes --out/<component>-<config>.json (the probe record, or {"error": ...} with the process's last lines) and
--out/builds.json. Models go to --work/models/<component> (built only when absent: rerunning reuses them).
Default configurations: omnigen2 at bf16 and nf4, 512 px, 28 steps, references 1, 2, 3 (--batch 8 also times calls
of 8 views); the detector at 576;
LoRA steps (fourloops.lora.train) at bf16 256/512, bf16 with the encoder resident at 512, the seeds' fp32 + encoder;
the scorer (Qwen3-VL-8B + a random adapter, fourloops.sizing) at nf4. --qwen-image-edit adds
qwen_image_edit_plus at nf4 and bf16 last (57 GB on disk: with --free-disk the other models are deleted first).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def say(*a) -> None:
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def configurations(args) -> list[dict]:
    """(name, component, settings) of every probe; settings are the config's with the sizing model paths."""
    import yaml

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    gen = dict(cfg["generator"])
    gen.update(steps=args.steps, size=args.size, device=args.device, revision=None, batch=args.batch)
    models = Path(args.work) / "models"
    out = []
    for precision in args.omnigen2_precisions:
        out.append({"name": f"generator-omnigen2-{precision}" + ("" if args.size == 512 else f"-{args.size}"), "component": "generator", "build": "omnigen2",
                    "settings": {**gen, "backend": "omnigen2", "model": str(models / "omnigen2"), "precision": precision}})
    det = dict(cfg["keypoints"], device=args.device, resolution=args.detector_resolution,
               weights=str(models / "detector" / "rfdetr-keypoint.pth"), images_per_call=args.detector_batches)
    if not args.no_detector:
        name = f"detector-{args.detector_resolution}" + ("" if args.detector_batches == [1] else
                                                         "-b" + "-".join(map(str, args.detector_batches)))
        out.append({"name": name, "component": "detector", "build": "detector", "settings": det})
    grades = yaml.safe_load((REPO / "config" / "schema.d" / "grades.yaml").read_text())["properties"]
    for precision in args.scorer_precisions:
        out.append({"name": f"scorer-qwen3_vl_8b-{precision}", "component": "scorer", "build": "scorer", "settings": {
            "base": str(models / "scorer" / "base"), "base_revision": None, "adapter": str(models / "scorer" / "adapter"),
            "adapter_revision": None, "precision": precision, "device": args.device, "decoding": "greedy",
            "temperature": 0.7, "max_new_tokens": args.scorer_max_new_tokens,
            "score_range": grades["score_range"]["default"], "image_size": args.size}})
    lora = yaml.safe_load((REPO / "config" / "schema.d" / "lora.yaml").read_text())["properties"]
    train = {k: lora[k]["default"] for k in ("rank", "alpha", "dropout", "target_modules", "lr", "weight_decay",
                                             "max_grad_norm", "seed")}
    for frozen, te, res, *rank in args.lora_steps:
        name = f"lora_step-omnigen2-{frozen}-{te}-{res}" + (f"-r{rank[0]}" if rank else "")
        out.append({"name": name, "component": "lora_step", "build": "omnigen2",
                    "settings": {**train, **({"rank": int(rank[0]), "alpha": float(rank[0])} if rank else {}),
                                 "backend": "omnigen2", "model": str(models / "omnigen2"),
                                 "model_set": "sizing", "steps": args.items,
                                 "accumulation": args.lora_micro_batch, "micro_batch": args.lora_micro_batch,
                                 "resolution": int(res), "frozen_dtype": frozen, "text_encoder": te,
                                 "device": args.device}})
    if args.qwen_image_edit:
        for precision in ("nf4", "bf16"):
            out.append({"name": f"generator-qwen_image_edit_plus-{precision}", "component": "generator",
                        "build": "qwen_image_edit_plus", "settings": {
                            **gen, "backend": "qwen_image_edit_plus", "model": str(models / "qwen_image_edit_plus"),
                            "precision": precision}})
    return out


def prompts() -> list[str]:
    import yaml

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    restyle = yaml.safe_load((REPO / "config" / "schema.d" / "restyle.yaml").read_text())
    styles = (restyle.get("properties", {}).get("styles", {}).get("default") or {})
    from fourloops.sizing import corpus

    return corpus({**cfg, "restyle": {"styles": styles}})


class RssPeaks:
    """This process's resident memory sampled every 50 ms from /proc/self/status: the peak of the whole (VmRSS), of
    its anonymous part (RssAnon: what must fit in RAM) and of its file-backed part (RssFile: safetensors' mapped
    pages, which the kernel can drop and read again)."""

    FIELDS = ("VmRSS", "RssAnon", "RssFile")

    def __init__(self) -> None:
        import threading

        self.peak = {f: 0 for f in self.FIELDS}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in self.peak:
                self.peak[name] = max(self.peak[name], int(rest.split()[0]))

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self._read()

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self._read()
        return {f"peak_{f.lower()}_mib": round(kib / 1024, 1) for f, kib in self.peak.items()}


def child(args) -> int:
    """One configuration in this process: its probe record to --record."""
    # what a Snakemake job's provenance wall times (fourloops.jobs): from before its heavy imports (torch, the
    # stage's model code) to its record built; not the interpreter's start, nor the teardown after the record
    t0 = time.perf_counter()
    rss = RssPeaks() if Path("/proc/self/status").exists() else None
    from fourloops import determinism

    determinism.before_cuda()  # probe() applies the jobs' determinism settings, fp32 at IEEE precision among them
    import torch  # noqa: F401 - the child's heavy import, inside its wall
    from fourloops.stages.probe import probe

    c = json.loads(args.child)
    from fourloops import gpumem, provenance

    cap = gpumem.apply_cap()  # FOURLOOPS_VRAM_CAP_GIB, as a job applies it (None when unset)
    refs = args.references if c["component"] == "generator" else (1,)
    extra = {} if c["component"] != "scorer" else {"prompt": prompts()[-1]}  # a restyle instruction to grade
    rec = probe(c["component"], c["settings"], machine_name=args.machine_name, model_set="sizing",
                references=refs, items=args.items, invocation=" ".join([sys.executable, *sys.argv]),
                guard_machine=None, **extra)
    rec["bench_configuration"] = c["name"]
    rec["peak_rss_mib"] = round(provenance.peak_rss_mib(), 1)  # this process's (the load's) peak resident memory
    if rss is not None:
        rec["rss_sampled"] = rss.stop()  # anonymous against file-backed: the RAM wall's question
    if cap:
        rec["vram_cap"] = cap
    rec["child_wall_seconds"] = round(time.perf_counter() - t0, 3)
    Path(args.record).write_text(json.dumps(rec, indent=1, default=str))
    return 0


def build_child(args) -> int:
    """One sizing build in this process (its CUDA memory ends with it): the build record to --record."""
    from fourloops import sizing

    rec = sizing.build(args.build_child, Path(args.work) / "models" / args.build_child, args.device, texts=prompts())
    Path(args.record).write_text(json.dumps(rec, indent=1, default=str))
    return 0


def free_gib(path: Path) -> float:
    return shutil.disk_usage(path).free / 2**30


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True, help="where the sizing models are built (needs ~35 GB; +57 GB for Qwen)")
    ap.add_argument("--out", required=True, help="folder for the raw probe records")
    ap.add_argument("--device", default="cuda", help="where the models are built and probed")
    ap.add_argument("--machine-name", default="h200", help="the records' machine_name")
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=28)
    ap.add_argument("--references", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--items", type=int, default=2, help="timed items per configuration (the first is the warm-up)")
    ap.add_argument("--omnigen2-precisions", nargs="*", default=["bf16", "nf4"])
    ap.add_argument("--scorer-precisions", nargs="*", default=["nf4"])
    ap.add_argument("--scorer-max-new-tokens", type=int, default=512,
                    help="random weights rarely stop early: every answer decodes this many tokens")
    ap.add_argument("--detector-resolution", type=int, default=576)
    ap.add_argument("--detector-batches", type=int, nargs="+", default=[1], help="images per detector call, one "
                    "configuration each")
    ap.add_argument("--no-detector", action="store_true", help="leave the detector out")
    ap.add_argument("--lora-steps", nargs="*", type=lambda v: v.split(":"),
                    default=[c.split(":") for c in ("bf16:precomputed:256", "bf16:precomputed:512",
                                                    "bf16:resident:512", "fp32:resident:512")],
                    help="LoRA step probes as frozen_dtype:text_encoder:resolution[:rank]")
    ap.add_argument("--batch", type=int, default=1, help="views a generator call, timed beside one a call "
                    "(fourloops.stages.probe.probed_batches)")
    ap.add_argument("--lora-micro-batch", type=int, default=1, help="samples a LoRA forward, timed beside one")
    ap.add_argument("--qwen-image-edit", action="store_true", help="also probe qwen_image_edit_plus (nf4, bf16), last")
    ap.add_argument("--free-disk", action="store_true", help="with --qwen-image-edit: delete the other models first")
    ap.add_argument("--only", nargs="*", help="configuration names to run (default: all)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per configuration process")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--record", help=argparse.SUPPRESS)
    ap.add_argument("--build-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if args.build_child:
        return build_child(args)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = Path(args.work) / "models"
    models.mkdir(parents=True, exist_ok=True)
    todo = [c for c in configurations(args) if not args.only or c["name"] in args.only]
    say(f"{len(todo)} configurations: {', '.join(c['name'] for c in todo)}")
    builds_path = out / "builds.json"
    builds = json.loads(builds_path.read_text()) if builds_path.exists() else {}
    for c in todo:
        component = c["build"]
        target = models / component
        if component == "qwen_image_edit_plus" and not target.exists() and args.free_disk:
            for other in ("omnigen2", "scorer", "detector"):
                if (models / other).exists():
                    say(f"--free-disk: deleting {models / other}")
                    shutil.rmtree(models / other)
        if not target.exists():
            say(f"building {component} on {args.device} into {target} (free disk {free_gib(models):.1f} GiB)")
            built = out / f"build-{component}.json"
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--work", args.work, "--out",
                                   args.out, "--device", args.device, "--build-child", component, "--record",
                                   str(built)], capture_output=True, text=True, timeout=args.timeout)
            if done.returncode == 0 and built.exists():  # its configurations fail on the missing model otherwise
                rec = builds[component] = json.loads(built.read_text())
                built.unlink()
                say(f"built {component}: {sum(rec['parameters'].values()) / 1e9:.3f} B params, "
                    f"{rec['bytes_on_disk'] / 2**30:.2f} GiB on disk, {rec['seconds']} s")
            else:
                tail = (done.stdout + done.stderr)[-3000:]
                builds[component] = {"error": tail, "returncode": done.returncode}
                say(f"BUILD FAILED {component} (rc {done.returncode}): {tail.strip().splitlines()[-1:]}")
            builds_path.write_text(json.dumps(builds, indent=1, default=str))
        record = out / f"{c['name']}.json"
        say(f"probing {c['name']} ...")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--work", args.work, "--out", args.out,
               "--machine-name", args.machine_name, "--items", str(args.items),
               "--references", *map(str, args.references), "--child", json.dumps(c), "--record", str(record)]
        t0 = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                                  env={**os.environ, "FOURLOOPS_REPO": str(REPO)})
            rc, tail = done.returncode, (done.stdout + done.stderr)[-4000:]
        except subprocess.TimeoutExpired as exc:
            rc, tail = "timeout", f"killed after {args.timeout} s: {(exc.stderr or b'')[-3000:]!r}"
        wall = round(time.perf_counter() - t0, 1)
        if rc != 0 or not record.exists():
            record.write_text(json.dumps({"bench_configuration": c["name"], "component": c["component"],
                                          "model_set": "sizing", "settings": c["settings"], "returncode": rc,
                                          "error": tail, "wall_seconds": wall}, indent=1, default=str))
            say(f"FAILED {c['name']} (rc {rc}, {wall} s): {tail.strip().splitlines()[-1] if tail.strip() else ''}")
            continue
        rec = json.loads(record.read_text())
        # the probe process's own wall, start to exit (interpreter, imports, load, items, teardown); the forecast
        # reads child_wall_seconds, the span a job's provenance wall covers, where the record has it
        rec["process_wall_seconds"] = wall
        record.write_text(json.dumps(rec, indent=1, default=str))
        for conf in rec["configurations"]:
            label = {k: conf[k] for k in ("references", "question", "images_per_call") if k in conf}
            say(f"  {c['name']} {label}: peak {conf['peak_vram_gib']} GiB (NVML {conf['nvml_process_gib']}), "
                f"{conf['seconds_per_item']} s/item{'  ERROR ' + conf['error'] if conf['error'] else ''}")
        say(f"done {c['name']}: load {rec['load_seconds']} s, weights {rec['weights_gib']} GiB, wall {wall} s")
    say(f"records in {out}; report: python bench/sizing_report.py {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

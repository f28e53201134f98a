"""Measured beats estimated: one load per configured model on the machine this runs on, then timed passes per
configuration; its peak VRAM and seconds replace the models.yaml estimate in later wall checks
(fourloops.asks.Measurements reads results/probe/<machine>/<component>.json).

`probe(component, settings, ...)` is plain Python (no snakemake object): scripts/probe.py calls it for the rule,
bench/sizing_gpu.py calls it per configuration. Per configuration it records the peak VRAM as the torch allocator
saw it (max_memory_allocated, and max_memory_reserved) and as NVML saw the process (its own entry in
nvmlDeviceGetComputeRunningProcesses, or else the device's used memory minus the baseline before the load),
the load seconds, and the seconds per item (the first item apart, as the warm-up):
  generator  per view, for each reference count (1, 2, 3), at the configured size and steps
  detector   per image at the configured resolution
  scorer     per answer, the EditScore SC question (2 images) and PQ question (1 image), prefill (encode) and
             decoding apart, with the tokens of each
  lora_step  per optimizer step, through fourloops.lora.train itself (the lora_train job's code) on synthetic
             records and embeddings of the real shapes, at the settings' resolution, frozen dtype and text encoder
  text_encoder  per instruction, through the lora_embeddings job's own loader and encoder (the generator's text
             encoder alone on the card)
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from typing import Callable

from fourloops.batching import AUTO, MOST, PROBE_AUTO_MOST
from fourloops.io import write_json

GIB = 2**30
DEFAULT_PROMPT = "The same person in the same pose, seen from a camera orbited to 45 degrees around them."
METHOD = ("peak_vram_gib: torch.cuda.max_memory_allocated over the configuration's passes, weights resident "
          "(reset after the load); nvml_process_gib: this process's NVML entry after the passes (the CUDA "
          "context and the allocator's cache included), or the device's used memory minus the baseline read "
          "before the load where NVML lists no process (containers); seconds: wall clock with "
          "torch.cuda.synchronize, the first item of each configuration apart as the warm-up")


class ProbeError(ValueError):
    pass


# ---------------------------------------------------------------------------------------- memory
def _cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def _index(device: str) -> int:
    return int(str(device).split(":")[1]) if ":" in str(device) else 0


def nvml_reading(index: int = 0) -> dict | None:
    """This process's memory on card `index` by NVML, and the card's used memory (GiB); None without NVML
    (read by fourloops.guard, the one NVML reader)."""
    from fourloops.guard import read_nvml

    card = next((c for c in read_nvml() or [] if c.index == index), None)
    if card is None:
        return None
    mine = next((h.used_gib for h in card.holders if h.pid == os.getpid() and h.used_gib), None)
    return {"device_used_gib": round(card.used_gib, 4), "process_gib": None if mine is None else round(mine, 4)}


class _Memory:
    """Torch allocator and NVML figures of one device, per configuration."""

    def __init__(self, device: str):
        self.device = device
        self.cuda = _cuda(device)
        self.baseline = nvml_reading(_index(device)) if self.cuda else None

    def _torch(self):
        import torch

        return torch if self.cuda and torch.cuda.is_available() and torch.cuda.is_initialized() else None

    def reset(self) -> None:
        if (torch := self._torch()) is not None:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    def sync(self) -> None:
        if (torch := self._torch()) is not None:
            torch.cuda.synchronize()

    def allocated_gib(self) -> float | None:
        torch = self._torch()
        return None if torch is None else round(torch.cuda.memory_allocated() / GIB, 4)

    def peaks(self) -> dict:
        torch = self._torch()
        if torch is None:
            return {"peak_vram_gib": None, "peak_reserved_gib": None, "nvml_process_gib": None, "nvml_source": None}
        out = {"peak_vram_gib": round(torch.cuda.max_memory_allocated() / GIB, 4),
               "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / GIB, 4)}
        now = nvml_reading(_index(self.device))
        if now is None:
            out.update(nvml_process_gib=None, nvml_source="no NVML (pynvml missing or no driver)")
        elif now["process_gib"] is not None:
            out.update(nvml_process_gib=now["process_gib"], nvml_source="nvmlDeviceGetComputeRunningProcesses, this pid")
        elif self.baseline is not None:
            out.update(nvml_process_gib=round(now["device_used_gib"] - self.baseline["device_used_gib"], 4),
                       nvml_source="device used minus the baseline before the load (NVML lists no process here)")
        else:
            out.update(nvml_process_gib=None, nvml_source="NVML lists no process and no baseline was read")
        return out


def _timed(memory: _Memory, fn: Callable[[], object]) -> tuple[float, object]:
    memory.sync()
    t0 = time.perf_counter()
    result = fn()
    memory.sync()
    return time.perf_counter() - t0, result


def _oom_types() -> tuple:
    import torch

    return (torch.cuda.OutOfMemoryError,) if hasattr(torch.cuda, "OutOfMemoryError") else (RuntimeError,)


def _run_configuration(memory: _Memory, config: dict, items: int, one: Callable[[int], dict | None]) -> dict:
    """`items` timed calls of `one(i)` (its dict joins the item's row); an OOM is recorded, not raised. A batched
    configuration starts from an emptied pool, as a job at that batch does: blocks the one-item calls before it left
    cached need not fit a batch's tensors, and kept, they can raise what NVML sees of the process above a job's (on an
    H100, under the default allocator, the sizing OmniGen2's 8-view calls after its one-view ones reserved 24.8 GiB
    for an 18.8 GiB torch peak; a generate job at 8 views a call, alone, 21.3 GiB for 20.2)."""
    import torch

    if int(config.get("batch", 1)) > 1 and memory.cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    memory.reset()
    rows, error = [], None
    try:
        for i in range(items):
            seconds, extra = _timed(memory, lambda: one(i))
            rows.append({"seconds": round(seconds, 4), **(extra or {})})
    except _oom_types() as exc:
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    steady = rows[1:] or rows[:1]
    out = {**config, **memory.peaks(), "items": rows, "error": error,
           "first_item_seconds": rows[0]["seconds"] if rows else None,
           "seconds_per_item": round(sum(r["seconds"] for r in steady) / len(steady), 4) if steady else None,
           "seconds_per_item_from": (f"mean of items 2..{len(rows)} (item 1 is the warm-up)" if len(rows) > 1
                                     else "one item, warm-up included" if rows else "no item ran")}
    return out


def probed_batches(batch, most: int) -> list[int]:
    """The batches a component's probe times: one item a call, and the batch (a number > 1: the probe rule's job
    gets the one its walls chose, fourloops.declarations.probe; `auto`, from a bench: batching.PROBE_AUTO_MOST),
    capped at the most a call takes. The walls' forecast reads a job's batch from these
    (fourloops.asks.Measurements.timing)."""
    want = PROBE_AUTO_MOST if batch == AUTO else int(batch)
    return sorted({1, max(1, min(want, int(most)))})


def per_item(config: dict, batch: int) -> dict:
    """A configuration whose items were calls of `batch` items each, as seconds a single item: the steady mean over
    the batch; the first item's seconds hold the whole first call's excess over a steady call (the once-per-job
    warm-up, which a batch does not divide). Each call's own seconds stay in `items`."""
    if batch <= 1 or config.get("seconds_per_item") is None:
        return config
    per_call = float(config["seconds_per_item"])
    per = per_call / batch
    first = config.get("first_item_seconds")
    return {**config, "seconds_per_item": round(per, 4), "seconds_per_call": round(per_call, 4),
            "first_item_seconds": round(per + float(first) - per_call, 4) if first is not None else None,
            "seconds_per_item_from": f"{config['seconds_per_item_from']}, a call of {batch} items, over {batch}"}


# ------------------------------------------------------------------------------------ components
def _images(n: int, size: int, seed: int):
    """n distinct noise images (a cache keyed on pixels cannot make a later item cheaper)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8), "RGB") for _ in range(n)]


def _probe_generator(s: dict, memory: _Memory, references, items: int, prompt: str) -> tuple[float, dict, list]:
    from fourloops.generate import load_backend

    size = int(s["size"])
    t_load, model = _timed(memory, lambda: load_backend(
        s["backend"], s["model"], s.get("revision"), s["precision"], s["device"],
        {"num_inference_steps": int(s["steps"]), "guidance": float(s["guidance"]), "width": size, "height": size,
         "negative_prompt": s.get("negative_prompt")}))
    weights = memory.allocated_gib()
    configs = []
    # every one-view configuration first: what NVML sees of the process after a batched call holds its larger pool
    for b in probed_batches(s.get("batch", 1), model.max_batch()):
        for n in references:
            refs = _images(int(n), size, seed=int(n))
            configs.append(per_item(_run_configuration(
                memory, {"references": int(n), "batch": b, "resolution": size, "steps": int(s["steps"])}, items,
                lambda i, b=b: (model.generate_batch([(refs, prompt, i * b + k) for k in range(b)], job_seed=i),
                                None)[1]), b))
    info = model.describe()
    info["prompt_tokens"] = _prompt_tokens(model, prompt)
    del model
    return t_load, {"weights_gib": weights, "model": info}, configs


def _prompt_tokens(model, prompt: str) -> int | None:
    pipe = getattr(model, "pipe", None)
    tok = getattr(pipe, "tokenizer", None) or getattr(getattr(pipe, "processor", None), "tokenizer", None)
    return None if tok is None else len(tok(prompt)["input_ids"])


def _probe_detector(s: dict, memory: _Memory, references, items: int, prompt: str) -> tuple[float, dict, list]:
    from fourloops.keypoints import load_detector

    # settings' images_per_call (default [1], what the keypoints jobs run): one configuration per batch size
    batches = s.get("images_per_call", [1])
    if not isinstance(batches, list | tuple) or not batches or any(isinstance(b, bool) or not isinstance(b, int)
                                                                   or b < 1 for b in batches):
        raise ProbeError(f"images_per_call = {batches!r}; allowed: a list of batch sizes >= 1, e.g. [1, 8]")
    res = int(s["resolution"])
    t_load, model = _timed(memory, lambda: load_detector(s["weights"], device=s["device"], resolution=res,
                                                         num_windows=int(s["num_windows"])))
    weights = memory.allocated_gib()
    batches = sorted(set(batches) | set(probed_batches(s.get("batch", 1), MOST)))
    images = _images(max(1, items) * max(batches), res, seed=0)
    configs = [per_item(_run_configuration(memory, {"images_per_call": b, "batch": b, "resolution": res}, items,
                                           lambda i, b=b: (model.detect_many(images[i * b:(i + 1) * b], batch_size=b),
                                                           None)[1]), b)
               for b in batches]
    return t_load, {"weights_gib": weights, "model": model.describe()}, configs


def _probe_scorer(s: dict, memory: _Memory, references, items: int, prompt: str) -> tuple[float, dict, list]:
    from fourloops import scorer as sc

    spec = sc.ScorerSpec(s["base"], s.get("base_revision"), s["adapter"], s.get("adapter_revision"), s["precision"],
                         s["device"], s.get("decoding", "greedy"), float(s.get("temperature", 0.7)),
                         int(s.get("max_new_tokens", 512)))
    t_load, model = _timed(memory, lambda: sc.load_scorer(spec))
    weights = memory.allocated_gib()
    try:
        from fourloops.grading import prompts

        sc_prompt, pq_prompt = prompts(int(s.get("score_range", 25)))
        sc_prompt, source = sc_prompt.replace("<instruction>", prompt), "EditScore's SC / PQ prompts"
    except ImportError as exc:  # the editscore package is not here: the instruction alone, and the record says so
        sc_prompt, pq_prompt, source = prompt, prompt, f"the instruction only (editscore not importable: {exc})"
    size = int(s.get("image_size", 512))
    # one question a call first (the walls read its peak), then the configured batch of questions a call (the
    # grades job's answer_many; greedy only: a sampled answer is seeded by its own call)
    batches = probed_batches(s.get("batch", 1), MOST) if spec.decoding == "greedy" else [1]
    configs = []
    for b in batches:
        for question, n, text in (("SC", 2, sc_prompt), ("PQ", 1, pq_prompt)):
            imgs = _images(n, size, seed=n)

            def one(i, imgs=imgs, text=text, b=b):
                answers = ([model.answer(imgs, text, seed=i)] if b == 1
                           else model.answer_many([(imgs, text, i * b + k) for k in range(b)]))
                encode, decode = sum(a.encode_seconds for a in answers), sum(a.decode_seconds for a in answers)
                generated = max(a.generated_tokens for a in answers)
                return {"encode_seconds": round(encode, 4), "decode_seconds": round(decode, 4),
                        "prompt_tokens": answers[0].prompt_tokens, "generated_tokens": generated,
                        "decode_seconds_per_token": round(decode / max(1, generated - 1), 5)}

            row = _run_configuration(memory, {"question": question, "images": n, "resolution": size,
                                              "max_new_tokens": spec.max_new_tokens, "batch": b}, items, one)
            steady = row["items"][1:] or row["items"][:1]
            for k in ("encode_seconds", "decode_seconds", "decode_seconds_per_token"):
                row[f"{k}_mean"] = round(sum(r[k] for r in steady) / len(steady), 5) if steady else None
            configs.append(per_item(row, b))
    # the instruction the SC question quoted: the walls count a job's own (fourloops.asks.scorer_ask)
    return t_load, {"weights_gib": weights, "model": model.describe(), "prompts": source, "instruction": prompt}, configs


def _probe_text_encoder(s: dict, memory: _Memory, references, items: int, prompt: str) -> tuple[float, dict, list]:
    """The lora_embeddings job's code: the generator's text encoder alone (fourloops.lora_embeddings.load_encoder),
    then one instruction per item through its encode_prompt (fourloops.lora_embeddings.encode)."""
    import torch

    from fourloops import lora_embeddings as le

    backend, device, max_len = s["backend"], s["device"], int(s["max_sequence_length"])
    t_load, (pipe, loaded, path, _) = _timed(memory, lambda: le.load_encoder(
        backend, s["model"], s.get("revision"), s["text_encoder_dtype"], device))
    weights = memory.allocated_gib()
    # Qwen-Image-Edit's encoder also sees the record's source view, resized by the pipeline to its condition area
    # (only the aspect ratio counts): one square noise image stands in for a render
    source = _images(1, 512, seed=0)[0] if backend == "qwen_image_edit_plus" else None

    def one(i):
        with torch.inference_mode():
            embeds, _ = le.encode(pipe, backend, prompt, source, device, max_len)
        return {"tokens": int(embeds.shape[1])}

    configs = [_run_configuration(memory, {"prompts": 1, "max_sequence_length": max_len}, items, one)]
    del pipe
    return t_load, {"weights_gib": weights, "model": {"backend": backend, "path": str(path),
                                                      "components_loaded": loaded}}, configs


def _probe_lora_step(s: dict, memory: _Memory, references, items: int, prompt: str) -> tuple[float, dict, list]:
    """`items` optimizer steps of `fourloops.lora.train` (settings: the lora_train job's `train` params + device).

    Records and embeddings are made here: noise images at the resolution and random embeddings of the text
    encoder's width (the training job never loads the encoder; memory and time do not depend on the values).
    One configuration per probed micro-batch (`probed_batches` of the settings' micro_batch), each item one
    optimizer step of one micro-batch, its seconds a sample's."""
    from dataclasses import fields

    from fourloops import lora

    res = int(s["resolution"])
    names = {f.name for f in fields(lora.TrainSpec)}
    configs, load_s, about = [], None, {}
    for b in probed_batches(s.get("micro_batch", 1), int(s.get("accumulation", 1))):
        # each item an optimizer step of one micro-batch of b samples
        spec = lora.TrainSpec.of(**{**{k: v for k, v in s.items() if k in names}, "steps": int(items),
                                    "accumulation": b, "micro_batch": b, "checkpoint_every": 10**9,
                                    "revision": s.get("revision")})
        loaded, info, config = _lora_configuration(spec, res, memory)
        configs.append(per_item(config | {"batch": b}, b))
        load_s, about = (loaded, info) if load_s is None else (load_s, about)
    return load_s, about, configs


def _lora_configuration(spec, res: int, memory: _Memory) -> tuple[float, dict, dict]:
    import json
    import tempfile
    from pathlib import Path

    import numpy as np
    import pandas as pd
    import torch
    from safetensors.torch import save_file

    from fourloops import lora, lora_records
    from fourloops.hub import resolve_model
    from fourloops.lora_embeddings import EMBEDDINGS_META_KEY

    path, _ = resolve_model(spec.model, spec.revision)
    cfg = json.loads((path / "transformer" / "config.json").read_text())
    width = int(cfg.get("text_feat_dim") or cfg.get("joint_attention_dim"))
    dtype = torch.bfloat16 if str(spec.device).startswith("cuda") else torch.float32
    with tempfile.TemporaryDirectory(prefix="fourloops-lora-probe-") as tmp:
        work = Path(tmp)
        image_of = {}
        for az, im in zip((0, 90, 180, 270), _images(4, res, seed=0)):
            image_of[az] = str(work / f"{az:03d}.png")
            im.save(image_of[az])
        records = lora_records.make_records(lora_records.azimuth_pairs([0, 90, 180, 270], 4, 0), "{azimuth}", image_of)
        lora_records.write_records(str(work / "records.jsonl"), records)
        tokens = 32  # about a ladder instruction's length
        gen = torch.Generator().manual_seed(0)
        tensors = {}
        for r in records:
            tensors[f"{r['id']}.embeds"] = torch.randn(tokens, width, generator=gen).to(dtype)
            tensors[f"{r['id']}.mask"] = torch.ones(tokens, dtype=torch.bool)
        save_file(tensors, str(work / "embeddings.safetensors"),
                  metadata={EMBEDDINGS_META_KEY: json.dumps({"backend": spec.backend, "synthetic": True})})
        memory.reset()
        error, prov = None, {}
        t0 = time.perf_counter()
        try:
            prov = lora.train(spec, str(work / "records.jsonl"), str(work / "embeddings.safetensors"),
                              str(work / "lora.safetensors"), str(work / "loss.csv"), str(work / "loss.png"),
                              str(work / "checkpoints"))
            steps = [float(x) for x in pd.read_csv(work / "loss.csv")["seconds"]]
        except _oom_types() as exc:
            error, steps = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}", []
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        memory.sync()
    steady = steps[1:] or steps[:1]
    config = {"resolution": res, "frozen_dtype": spec.frozen_dtype, "text_encoder": spec.text_encoder, "rank": spec.rank,
              **memory.peaks(), "items": [{"seconds": round(x, 4)} for x in steps], "error": error,
              "first_item_seconds": steps[0] if steps else None,
              "seconds_per_item": round(float(np.mean(steady)), 4) if steady else None,
              "seconds_per_item_from": (f"mean of optimizer steps 2..{len(steps)} (step 1 is the warm-up)"
                                        if len(steps) > 1 else "one step, warm-up included" if steps else "no step ran")}
    load_s = float(prov.get("load_seconds") or (time.perf_counter() - t0))
    about = {"weights_gib": None, "model": {k: prov.get(k) for k in ("components_loaded", "text_encoder_loaded",
                                                                      "optimizer", "gradient_checkpointing", "autocast",
                                                                      "census", "model_path")}}
    return load_s, about, config


def _gpu(component: str):
    from fourloops.stage import gpu, gpus

    try:
        return gpu(component)
    except LookupError:
        raise ProbeError(f"no probe for component {component!r} yet; allowed: one of {list(gpus())} (a stage "
                         "declares its own with `Stage(gpus=(Gpu(name=..., probe=...),))`)") from None


def probe_key(component: str, settings: dict) -> str:
    return _gpu(component).key(settings)


def probe(component: str, settings: dict, *, machine_name: str, model_set: str, out: str | None = None,
          references=(1, 2, 3), items: int = 2, prompt: str = DEFAULT_PROMPT, invocation: str | None = None,
          guard_machine: str | None = None) -> dict:
    """Load the `component` of `settings` once and time `items` passes per configuration; returns the record
    (written to `out` when given). `guard_machine`: refuse a card others hold beyond that machine's limit."""
    from fourloops import determinism, provenance

    from fourloops.stage import load

    # timed with the jobs' own kernel settings, whoever calls (the probe rule, bench/sizing_gpu.py): the fused
    # kernels the settings rule out are faster, and a forecast from them would be short
    determinism.apply(None)
    declared = _gpu(component)
    if isinstance(items, bool) or int(items) < 1:
        raise ProbeError(f"items = {items!r}; allowed: an int >= 1")
    refs = [int(r) for r in references]
    if component == "generator" and (not refs or any(r < 1 for r in refs)):
        raise ProbeError(f"references = {references!r}; allowed: reference counts >= 1, e.g. [1, 2, 3]")
    device = settings["device"]
    if guard_machine is not None:
        from fourloops.card import check_card

        check_card(device, guard_machine)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    memory = _Memory(device)
    caches_before = provenance.kernel_caches_kib()
    load_s, about, configs = load(declared.probe)(settings, memory, refs, int(items), prompt)
    caches_after = provenance.kernel_caches_kib()
    # the record's own apparatus, which the job a probe times does not make: timed, so that its forecast leaves it out
    t_apparatus = time.perf_counter()
    gpu = provenance.gpu_info()
    apparatus = {"machine": provenance.machine(), "gpu": gpu, "packages": provenance.package_versions(),
                 "torch_cuda": _torch_cuda(), "code": provenance.code_version(os.environ.get("FOURLOOPS_REPO"))}
    ok = [c for c in configs if not c["error"]]
    complete = len(ok) == len(configs)
    # the walls read a one-item call's peak and raise it per further item (fourloops.asks.batch_raise): the batched
    # configurations' peaks stay in their rows, the measurements that term is judged on
    single = [c for c in ok if int(c.get("batch", 1)) == 1]
    singles_ran = all(not c["error"] for c in configs if int(c.get("batch", 1)) == 1)  # a batch that failed (OOM)
    peaks = [c["peak_vram_gib"] for c in single if c["peak_vram_gib"] is not None]  # leaves the one-item peak
    sizing_record = _sizing_record(settings.get(declared.model_at))
    apparatus_s = time.perf_counter() - t_apparatus
    record = {
        "machine_name": machine_name,
        "component": component,
        "model_set": model_set,
        "key": declared.key(settings),
        "device": device,
        "precision": declared.precision(settings),
        "resolution": declared.resolution(settings),
        "started": started,
        "load_seconds": round(load_s, 3),
        # what the wall check reads: the largest peak over the one-item configurations (None when one of them
        # failed: a partial probe never stands in for the job's peak; a batched call that did not fit is an error
        # of its own row, and the largest batch that fits is the walls' to say)
        "peak_vram_gib": (max(peaks) if peaks else None) if singles_ran else None,
        "peak_nvml_process_gib": max((c["nvml_process_gib"] for c in single if c["nvml_process_gib"] is not None),
                                     default=None),
        "weights_gib": about.pop("weights_gib"),
        "pass_seconds": ok[0]["seconds_per_item"] if ok else None,
        "complete": complete,
        "errors": [f"{_label(c)}: {c['error']}" for c in configs if c["error"]],
        "configurations": configs,
        "gpu_name": ((gpu or {}).get("gpus") or [{}])[0].get("name"),
        "driver": (gpu or {}).get("driver"),
        "nvml_baseline": memory.baseline,
        "cuda_allocator": provenance.cuda_allocator(),
        # whether this process compiled kernels into the on-disk caches (its first items then held a cost a later
        # job does not pay): what fourloops.asks reads the warm-up from
        "kernel_caches": {"before_kib": caches_before, "after_kib": caches_after,
                          "grew": any(caches_after[k] > caches_before.get(k, 0.0) for k in caches_after)},
        **about,
        "sizing_model": sizing_record,
        "determinism": determinism.state(),
        "apparatus_seconds": round(apparatus_s, 3),
        "apparatus": {
            **apparatus,
            "invocation": provenance.redact(invocation if invocation is not None
                                            else os.environ.get("FOURLOOPS_INVOCATION", "")),
            "settings": provenance.redact_obj(dict(settings)),
            "items_per_configuration": int(items),
            "prompt": prompt,
            "method": METHOD,
        },
    }
    if out:
        write_json(out, record)
    return record


def _label(c: dict) -> str:
    return ", ".join(f"{k} {c[k]}" for k in ("references", "question", "images_per_call", "batch") if k in c)


def _torch_cuda() -> dict:
    import torch

    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def _sizing_record(where: str | None) -> dict | None:
    """The sizing set's build record beside the model at `where` (random weights: the record says so), else None."""
    from pathlib import Path

    from fourloops.io import read_json

    if not where:
        return None
    p = Path(os.path.expanduser(str(where)))
    for candidate in (p / "sizing.json", p.parent / "sizing.json"):
        if candidate.is_file():
            rec = read_json(candidate)
            return {k: rec.get(k) for k in ("model_set", "component", "classes", "parameters", "bytes_on_disk",
                                            "tokenizer", "adapter_assumed", "architectures")}
    return None


def probe_stage(out: str, machine_name: str, component: str, settings: dict, model_set: str,
                machine: str = "desk", batch: int = 1) -> dict:
    """The probe rule's job: the configured model of `component` on this machine (scripts/probe.py), timed with the
    jobs' own kernel settings (fourloops.determinism). `batch`: the job's batch resource, the largest batch its
    walls admit (fourloops.declarations.probe), which stands for the settings' `auto` or number."""
    if "batch" in settings:
        settings = {**settings, "batch": max(1, int(batch))}
    record = probe(component, settings, machine_name=machine_name, model_set=model_set, out=out,
                   guard_machine=machine)
    return {"probe": {k: record[k] for k in ("key", "load_seconds", "pass_seconds", "peak_vram_gib", "complete")},
            "precision": record["precision"]}

"""EditScore grades of each restyled view against its render (pod; its own job and process, never the generator's)."""

from __future__ import annotations

import math
import time


FIGURES = ("prompt_following", "consistency", "perceptual_quality", "overall")
COLUMNS = (
    "style", "azimuth", "render", "image", *FIGURES, "parse_status", "reason", "sc_reasoning", "pq_reasoning", "raw",
    "attempts", "score_range", "num_pass", "retries", "seed", "decoding", "precision", "encode_seconds",
    "decode_seconds", "prompt_tokens", "generated_tokens", "scorer", "adapter", "model_set",
)


def grades_stage(renders: list[str], restyled: list[str], manifest: str, csv_out: str, summary_out: str, style: str,
                 instruction: str, azimuths: list[int], scorer: dict, score_range: int, num_pass: int, retries: int,
                 seed: int, model_set: str, machine: str = "desk", batch: int = 1) -> dict:
    """One scorer load grades every restyled view of `style`: a row per view, NaN with the reason when unparsed.
    `batch`: views a scorer call asks a question of (the job's resolved `grades.batch`); the views go in chunks of
    that many, each chunk's retries asked of its unparsed views only (fourloops.grading.grade_views)."""
    from fourloops import determinism

    determinism.apply(seed)
    import pandas as pd
    from PIL import Image

    from fourloops import grading
    from fourloops import scorer as sc
    from fourloops.card import check_card
    from fourloops.io import atomic_path, read_json, write_json

    if not (len(renders) == len(restyled) == len(azimuths)):
        raise ValueError(f"{len(renders)} renders, {len(restyled)} restyled views, {len(azimuths)} azimuths")
    made = read_json(manifest)
    if made.get("instruction") != instruction:  # grade the instruction the views were made with, or nothing
        raise ValueError(f"{manifest} was made with instruction {made.get('instruction')!r}, the config gives "
                         f"{instruction!r}: restyle {style} again first")
    spec = sc.ScorerSpec(scorer["base"], scorer["base_revision"], scorer["adapter"], scorer["adapter_revision"],
                         scorer["precision"], scorer["device"], scorer["decoding"], float(scorer["temperature"]),
                         int(scorer["max_new_tokens"]))
    batch = int(batch)
    if batch < 1:
        raise ValueError(f"grades.batch = {batch}: not a batch; allowed: a whole number >= 1")
    if batch > 1 and spec.decoding != "greedy":  # a sampled answer is seeded by its own call
        raise ValueError(f"grades.batch = {batch} with grades.decoding = {spec.decoding!r}: not allowed; allowed: "
                         "grades.batch 1 (or auto) with sample decoding, or greedy decoding")
    check_card(spec.device, machine)
    t_load = time.perf_counter()
    model = sc.load_scorer(spec)
    load_seconds = time.perf_counter() - t_load
    rows, view_seconds = [], []
    views = list(zip(azimuths, renders, restyled))
    for start in range(0, len(views), batch):
        t_chunk = time.perf_counter()
        chunk = views[start:start + batch]
        pairs = []
        for _, ref, new in chunk:
            with Image.open(ref) as a, Image.open(new) as b:
                pairs.append((a.convert("RGB"), b.convert("RGB")))
        # each view its own seed range: seed + view x passes x attempts (the grading adds pass and attempt)
        seeds = [int(seed) + i * int(num_pass) * (int(retries) + 1) for i in range(start, start + len(chunk))]
        graded = grading.grade_views(model, pairs, instruction, int(score_range), int(num_pass), seeds,
                                     int(retries), batch)
        spent = time.perf_counter() - t_chunk
        view_seconds.extend([round(spent / len(chunk), 4)] * len(chunk))  # a chunk's seconds, shared by its views
        for (az, ref, new), view_seed, g in zip(chunk, seeds, graded):
            rows.append({
                "style": style, "azimuth": int(az), "render": ref, "image": new,
                **{f: getattr(g, f) for f in FIGURES},
                "parse_status": g.parse_status, "reason": g.reason, "sc_reasoning": g.sc_reasoning,
                "pq_reasoning": g.pq_reasoning, "raw": g.raw, "attempts": g.attempts, "score_range": int(score_range),
                "num_pass": int(num_pass), "retries": int(retries), "seed": view_seed, "decoding": spec.decoding,
                "precision": spec.precision, "encode_seconds": round(g.encode_seconds, 4),
                "decode_seconds": round(g.decode_seconds, 4), "prompt_tokens": g.prompt_tokens,
                "generated_tokens": g.generated_tokens, "scorer": spec.base, "adapter": spec.adapter,
                "model_set": model_set,
            })
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    with atomic_path(csv_out) as tmp:
        table.to_csv(tmp, index=False, na_rep="NaN", float_format="%.6g")
    summary = summarise(table, style, model_set)
    write_json(summary_out, summary)
    return {"models": [model.describe()], "precision": spec.precision, "seed": int(seed), "batch": batch,
            "model_loads": 1, "grades": {f: summary["figures"][f]["mean"] for f in FIGURES},
            "unparsed_views": summary["unparsed_views"],
            # where the job's seconds went (a forecast's parts: the scorer's load, then each view's questions, the
            # first with its warm-up; at a batch above one, each view's share of its chunk's)
            "timing": {"load_seconds": round(load_seconds, 4), "view_seconds": view_seconds}}


def summarise(table, style: str, model_set: str) -> dict:
    """Mean of each figure over the views that parsed, how many did not, and why (never a number for none)."""
    figures = {}
    for f in FIGURES:
        values = [float(v) for v in table[f] if not math.isnan(float(v))]
        figures[f] = {"mean": sum(values) / len(values) if values else None, "views": len(values),
                      "nan": int(len(table) - len(values)),
                      "why_no_mean": "" if values else "no view's answers parsed (see reasons)"}
    failed = table[table["parse_status"] != "ok"]
    return {
        "style": style, "model_set": model_set, "views": int(len(table)), "unparsed_views": int(len(failed)),
        "figures": figures,
        "reasons": [{"azimuth": int(r.azimuth), "parse_status": r.parse_status, "reason": r.reason}
                    for r in failed.itertuples()],
        "encode_seconds": float(table["encode_seconds"].sum()), "decode_seconds": float(table["decode_seconds"].sum()),
        "scale": "0-10 (EditScore: score / (score_range / 10))",
    }

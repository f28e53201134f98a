"""The grades stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.grades is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops import model_sets
from fourloops.stage import AskContext, Build, Gpu, Knob, Stage


def ask(ctx: AskContext, wildcards: dict, params: dict):
    """The job's ask at the batch its `grades.batch` asks for on the job's machine (fourloops.batching): as many
    views a scorer call as the job has and the card holds; one under sample decoding, where each answer is seeded
    by its own call (the config refuses a number above one there)."""
    from fourloops import asks, batching

    job = params["job"]
    scorer = job.get("scorer") or {}
    value = batching.setting(scorer.get("batch", 1), "grades.batch")
    sampled = value == batching.AUTO and scorer.get("decoding") == "sample"
    value = 1 if sampled else value
    n = max(1, len(job.get("azimuths") or ()))
    if job["model_set"] == "smoke":  # the tiny scorer on the CPU: no card to fill
        found = batching.choose(lambda b: asks.stage_ask(ctx.facts, "smoke_grades"), value, most=n, limit_gib=None,
                                key="grades.batch")
    else:
        found = batching.choose(
            lambda b: asks.scorer_ask(ctx.facts, scorer, n_views=n, num_pass=int(job["num_pass"]), batch=b,
                                      measured=ctx.measured, machine=ctx.machine, instruction=job.get("instruction")),
            value, most=n, limit_gib=batching.card_gib(ctx.machine, ctx.provided_vram_mb), key="grades.batch")
    if sampled:
        from dataclasses import replace

        found = replace(found, vram=asks.Figure(found.vram.value, f"{found.vram.source} [grades.batch = auto: 1 "
                                                                  "(sample decoding seeds each answer by its call)]"))
    return found


def scorer_needs(s: dict, rule: str) -> list:
    """The device; bitsandbytes for nf4; the base and the adapter, each a local directory or a hub id pinned at a
    commit in the HF cache."""
    from fourloops.preflight import Need, weights_need

    out = [Need("device", s["device"], rule=rule)]
    if s["precision"] == "nf4":
        out.append(Need("package", "bitsandbytes", rule=rule))
        if not str(s["device"]).startswith("cuda"):  # the config check allows it; the machine cannot
            out.append(Need("device", "cuda", rule=rule))
    out.append(weights_need(s["base"], s["base_revision"], "grades.scorer", "grades.scorer_revision", rule))
    out.append(weights_need(s["adapter"], s["adapter_revision"], "grades.adapter", "grades.adapter_revision", rule,
                            kind="adapter_dir"))
    return out


def needs(params: dict) -> list:
    return scorer_needs(params["job"]["scorer"], "grades")


def measures(record: dict) -> str | None:
    from fourloops.asks import scorer_key

    scorer = ((record.get("params") or {}).get("job") or {}).get("scorer")
    if isinstance(scorer, dict) and "precision" in scorer and record.get("model_set") != "smoke":
        return scorer_key(scorer)
    return None


def _scorer_key(settings: dict) -> str:
    from fourloops.asks import scorer_key

    return scorer_key(settings)


def _scorer_ask(facts: dict, settings: dict, batch: int = 1):
    from fourloops.asks import scorer_ask

    return scorer_ask(facts, settings, batch=batch, measured=None)


def _scorer_most(settings: dict) -> int:
    """Questions a scorer call takes: one under sample decoding (each answer is seeded by its own call)."""
    from fourloops.batching import MOST

    return 1 if settings.get("decoding") == "sample" else MOST


# The scorer, declared once: the probe rule, the sizing set and the levers read it (fourloops.stage.Gpu).
SCORER = Gpu(
    name="scorer", key=_scorer_key, probe="fourloops.stages.probe:_probe_scorer", settings=model_sets.scorer,
    ask=_scorer_ask, needs=scorer_needs, batch_most=_scorer_most,
    knobs=(Knob((), "precision", ("grades", "precision"), "precision"), Knob((), "batch", ("grades", "batch"), "batch")),
    builds=(Build("scorer", "qwen3_vl_8b"),), model_at="base", resolution=lambda s: int(s.get("image_size", 512)),
    smoke_inputs=lambda config: model_sets.built_models(config, "scorer"))

STAGE = Stage(name="grades", code="fourloops.stages.grades",
              rules=("grades",), profile="pod", ask=ask, needs=needs, measures=measures,
              keep_last_good=True, knobs=SCORER.knobs_at(("job", "scorer")), gpus=(SCORER,),
              batch_changes_bytes=True)  # a padded row's logits differ in their last bits from a one-question call's

"""The grades stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.grades is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops import model_sets
from fourloops.stage import AskContext, Build, Gpu, Knob, Stage


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from fourloops import asks

    job = params["job"]
    if job["model_set"] == "smoke":  # the tiny scorer on the CPU
        return asks.stage_ask(ctx.facts, "smoke_grades")
    return asks.scorer_ask(ctx.facts, job["scorer"], n_views=len(job["azimuths"]), num_pass=int(job["num_pass"]),
                           measured=ctx.measured, machine=ctx.machine, instruction=job.get("instruction"))


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


def _scorer_ask(facts: dict, settings: dict):
    from fourloops.asks import scorer_ask

    return scorer_ask(facts, settings, measured=None)


# The scorer, declared once: the probe rule, the sizing set and the levers read it (fourloops.stage.Gpu).
SCORER = Gpu(
    name="scorer", key=_scorer_key, probe="fourloops.stages.probe:_probe_scorer", settings=model_sets.scorer,
    ask=_scorer_ask, needs=scorer_needs, knobs=(Knob((), "precision", ("grades", "precision"), "precision"),),
    builds=(Build("scorer", "qwen3_vl_8b"),), model_at="base", resolution=lambda s: int(s.get("image_size", 512)),
    smoke_inputs=lambda config: model_sets.built_models(config, "scorer"))

STAGE = Stage(name="grades", code="fourloops.stages.grades",
              rules=("grades",), profile="pod", ask=ask, needs=needs, measures=measures,
              keep_last_good=True, knobs=SCORER.knobs_at(("job", "scorer")), gpus=(SCORER,))

"""The sizing stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.sizing is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import AskContext, Stage, builds


def ask(ctx: AskContext, wildcards: dict, params: dict):
    """Every component of the model on the build device at its dtype on disk, then one shard at a time on the host."""
    from fourloops import asks

    declared = builds()[wildcards["component"]]
    name, dtype = declared.model, declared.dtype
    model = ctx.facts["models"][name]
    gib = sum(asks.component_gib(ctx.facts, model, c, dtype) for c in model["components"])
    host = float(ctx.facts["stages"]["generate_host_gib"])
    source = f"estimate: {name} random weights at {dtype} {gib:.2f} GiB"
    on_card = str(params["device"]).startswith("cuda")
    # on the card, what the driver sees of a build over its weights (models.yaml process_overhead.build: the whole-DAG
    # H200 runs of 2026-12-02 saw 16.20 GiB for omnigen2's 14.54 GiB of weights: the context, transients, the slack)
    vram = asks.with_context(ctx.facts, asks.Figure(gib, source), "build", weights_gib=gib) if on_card else asks.Figure(0.0, source + " (cpu)")
    return asks.Ask(
        vram=vram,
        ram=asks.Figure((0.0 if on_card else gib) + min(gib, 10.0) + host,
                        f"estimate: {'the weights + ' if not on_card else ''}one save shard (<= 10 GiB) + host {host:g}"),
        seconds=asks.Figure(60.0 + gib * 4.0, "estimate: 60 s + 4 s/GiB to make and save (not measured)"),
        devices=("cuda",) if on_card else (), model=name)


def needs(params: dict) -> list:
    from fourloops.preflight import Need

    return [Need("device", params["device"], rule="sizing_model")]


STAGE = Stage(name="sizing", code="fourloops.stages.sizing",
              rules=("sizing_model",), profile="desk", ask=ask, needs=needs)

"""The hef_latency stage's declaration (fourloops.stage.Stage): what its jobs ask of a machine and need on
it, where they run; fourloops.stages.hef_latency is the code they run."""

from __future__ import annotations

LINEAGE = False  # where and whether a job runs, never what it writes: not in any job's lineage

from fourloops.stage import AskContext, Stage


def ask(ctx: AskContext, wildcards: dict, params: dict):
    from dataclasses import replace

    from fourloops import asks

    return replace(asks.stage_ask(ctx.facts, "hef_latency"), devices=("hailo_usb",))


def needs(params: dict) -> list:
    from fourloops.preflight import Need

    return [Need("executable", "hailortcli", rule="hef_run2"), Need("device", "hailo_usb", rule="hef_run2")]


STAGE = Stage(name="hef_latency", code="fourloops.stages.hef_latency",
              rules=("hef_run2",), profile="desk", ask=ask, needs=needs)

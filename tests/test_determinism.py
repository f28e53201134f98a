"""Same inputs, same code, same machine kind: same bytes. Every GPU stage's job applies fourloops.determinism in its
own process (read back from the process into its record, not taken from a list), and the GPU pair's account
regenerates from its committed records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, pinned

from fourloops import determinism


def _gpu_rules(tmp_path) -> set[str]:
    """The rules whose jobs ask a card in a real run of the ladder, the restyle, drift and grades (fourloops plan:
    their stage's ask, on the desk), whatever the stages declare elsewhere."""
    plan = subprocess.run([str(Path(sys.executable).with_name("fourloops")), "plan", "-s", str(REPO / "Snakefile"),
                           "--json", "--configfile", pinned(tmp_path), "--", "results/ladder.csv",
                           "results/drift/watercolor.csv", "results/grades/watercolor.csv"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    # the plan's JSON says each job's ask whether or not this machine holds the real weights (it holds none)
    jobs = json.loads(plan.stdout)["jobs"]
    assert jobs, plan.stderr[-3000:]
    return {j["rule"] for j in jobs if j["vram_gib"] > 0}


def test_every_gpu_stage_applies_the_settings_in_its_own_job_process(smoke_run, restyled_graded, tmp_path):
    rules = _gpu_rules(tmp_path)
    assert {"generate", "restyle", "keypoints_generated", "grades", "lora_train", "lora_embeddings"} <= rules
    records = {}
    for root in (smoke_run["workdir"], restyled_graded["work"]):
        for path in sorted((root / "results" / "provenance").rglob("*.json")):
            data = json.loads(path.read_text())
            records.setdefault(data["rule"], data)
    for rule in sorted(rules):
        assert rule in records, f"no smoke job of GPU rule {rule} to read"
        state = records[rule]["determinism"]
        ok, why = determinism.reproducible(state)
        assert ok, f"rule {rule}: {why}: {state}"
        # read from the process: torch's own switches, cuBLAS's variable, the job's seed
        assert state["deterministic_algorithms"] and not state["deterministic_warn_only"], rule
        assert state["cudnn_deterministic"] and not state["cudnn_benchmark"], rule
        assert state["fill_uninitialized_memory"] is False, rule  # torch's NaN fill of every empty tensor: off
        assert state[determinism.CUBLAS_VAR] == determinism.CUBLAS_VALUE, rule
        assert state["versions"]["torch"] and "cudnn" in state["versions"], rule
        seed = records[rule].get("seed")
        assert state["seed"] == (seed if seed is not None else determinism.NO_SEED), rule
    # a job that computes nothing with torch records that it applied nothing
    assert records["fit"]["determinism"]["applied"] is False


def test_the_settings_are_refused_by_name_when_the_switch_holds_another_value(monkeypatch):
    monkeypatch.setenv(determinism.SWITCH, "maybe")
    with pytest.raises(determinism.DeterminismError, match=r"FOURLOOPS_DETERMINISM='maybe': not a mode; allowed: "
                                                           r"one of \['on', 'off'\]"):
        determinism.mode()
    # a labelled draw's seed is the same in every process and differs by label
    assert determinism.derived_seed(7, "reference", "x") == determinism.derived_seed(7, "reference", "x")
    assert determinism.derived_seed(7, "reference", "x") != determinism.derived_seed(7, "reference", "y")


def test_the_gpu_pairs_account_regenerates_from_its_records():
    """bench/results/repro-*/summary.md is what bench/repro_table.py makes from the records beside it: the two GPU
    runs' outputs all equal (the bytes, or the content once the measurement fields are out), the trace's first
    difference with the settings off and none with them on."""
    sys.path.insert(0, str(REPO / "bench"))
    import repro_table

    records = sorted((REPO / "bench" / "results").glob("repro-*"))
    assert any(repro_table.trace(r) for r in records)  # at least one run traced the path with the settings off and on
    for record in records:
        assert (record / "summary.md").read_text() == repro_table.report(record), record
        pair = repro_table.pair(record)
        assert not pair["missing"] and all(r.verdict == "equal" for r in pair["rows"]), record
        lora = record / "determinism" / "attention.json"  # where the run timed the LoRA step's kernels
        if lora.is_file():
            strict = [r for r in json.loads(lora.read_text())["rows"] if r["deterministic_algorithms"]]
            assert strict and all(len(r["grad_sha256"]) == 1 for r in strict), record
        trace = repro_table.trace(record)  # where the run traced the path (GPU_RUN_TRACE=0 skips it)
        if trace:
            assert trace["on"]["image_equal"] and trace["on"]["lora_grads"]["equal"]
            assert not trace["off"]["image_equal"]


def test_the_batching_account_regenerates_from_its_records():
    """bench/results/batching-*/summary.md is what bench/batching_table.py makes from the records beside it; where a
    second lease of the same machine kind ran the one-a-call side, every image and tensor it made is the same."""
    sys.path.insert(0, str(REPO / "bench"))
    import batching_table

    records = sorted((REPO / "bench" / "results").glob("batching-*"))
    assert records
    for record in records:
        assert (record / "summary.md").read_text() == batching_table.report(record), record
        if (record / "compare-leases.txt").is_file():
            rows, _ = batching_table._verdicts(record / "compare-leases.txt")
            made = {a: v for a, (v, _) in rows.items() if a.endswith((".png", ".safetensors", ".loss.csv"))}
            assert made and set(made.values()) == {"equal"}, made


def test_the_forward_meter_counts_each_shape_once_and_times_the_rest_keeping_the_forwards_signature():
    """bench/forward_flops.py's meter around a module's forward: a Linear of 64 -> 32 on 4 rows is 2 x 4 x 64 x 32
    FLOPs (a multiply and an add per weight per row); the first call of a shape is counted and not timed, later
    ones timed; another shape is counted apart; the forward's own signature stays visible (OmniGen2's pipeline
    passes reference latents only to a forward whose signature names them); close() puts the forward back."""
    import inspect

    import torch

    sys.path.insert(0, str(REPO / "bench"))
    import forward_flops

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(64, 32, bias=False)

        def forward(self, hidden_states, ref_image_hidden_states=None):
            return self.proj(hidden_states)

    net = Net()
    meter = forward_flops.ForwardMeter(net, cuda=False)
    assert "ref_image_hidden_states" in inspect.signature(net.forward).parameters
    x = torch.ones(4, 64)
    for _ in range(3):
        net(x, ref_image_hidden_states=[[torch.ones(2)] * 3] * 4)
    net(torch.ones(2, 64))  # a new shape: counted, not timed
    (row,) = meter.take()
    assert row["flops"] == 2 * 4 * 64 * 32 and row["forwards"] == 2 and row["samples"] == 4
    assert row["references"] == 3 and row["seconds"] > 0
    assert meter.flops[forward_flops.signature(((torch.ones(2, 64),), {}))] == 2 * 2 * 64 * 32
    assert meter.take() == []
    meter.close()
    assert "forward" not in net.__dict__ and inspect.signature(net.forward).parameters.keys() == {
        "hidden_states", "ref_image_hidden_states"}


def test_omnigen2_attention_takes_the_cheaper_kernels_only_where_the_bits_stay(monkeypatch):
    """Loading OmniGen2 routes scaled_dot_product_attention (fourloops.loading._pin_omnigen2_kernels): a call with no
    gradient runs with torch's check off; a call taking a gradient loses a boolean mask that admits every key, runs a
    mask admitting a prefix of each sample's keys as one unmasked call a sample over those keys, and keeps any other
    mask; each is named in the job's record. With the settings off, torch's own choice stays."""
    import torch
    import torch.nn.functional as F

    from fourloops import loading

    seen = []

    def spy(q, k, v, attn_mask=None, *rest, **kwargs):
        seen.append((torch.are_deterministic_algorithms_enabled(), attn_mask))
        keys.append(k.shape[2])
        return torch.zeros_like(q)

    keys = []

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    monkeypatch.setattr(determinism, "_exempt", [])
    monkeypatch.setenv(determinism.SWITCH, "off")
    loading._pin_omnigen2_kernels()
    assert F.scaled_dot_product_attention is spy and determinism.state()["exempt_calls"] == []

    monkeypatch.setenv(determinism.SWITCH, "on")
    loading._pin_omnigen2_kernels()
    loading._pin_omnigen2_kernels()  # once is enough: the second changes nothing
    assert F.scaled_dot_product_attention is not spy and F.scaled_dot_product_attention.__wrapped__ is spy
    recorded = determinism.state()["exempt_calls"]
    assert len(recorded) == 3 and all(e.startswith("omnigen2 scaled_dot_product_attention, ") for e in recorded)
    q = torch.zeros(1, 2, 4, 8)
    every, some = torch.ones(1, 1, 1, 4, dtype=torch.bool), torch.tensor([[[[True, True, True, False]]]])
    strict = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with torch.no_grad():
            F.scaled_dot_product_attention(q, q, q, attn_mask=every)
        assert seen[-1] == (False, every) and torch.are_deterministic_algorithms_enabled()
        g = q.clone().requires_grad_()
        F.scaled_dot_product_attention(g, q, q, attn_mask=every)
        assert seen[-1] == (True, None)
        F.scaled_dot_product_attention(g, q, q, every)
        assert seen[-1] == (True, None)
        F.scaled_dot_product_attention(g, q, q, some)  # a padded prompt: its first 3 keys, unmasked
        assert seen[-1] == (True, None) and keys[-1] == 3
        holes = torch.tensor([[[[True, False, True, True]]]])
        F.scaled_dot_product_attention(g, q, q, holes)  # not a prefix: torch's masked call
        assert seen[-1][0] and seen[-1][1] is holes and keys[-1] == 4
        additive = torch.zeros(1, 1, 1, 4)
        F.scaled_dot_product_attention(g, q, q, attn_mask=additive)
        assert seen[-1][1] is additive
    finally:
        torch.use_deterministic_algorithms(strict)


def test_the_attention_variants_account_regenerates_and_backs_the_kernels_the_jobs_take():
    """bench/results/determinism-*/determinism/*table.md are what bench/determinism_cost.py --table prints from the
    records beside them; and the records back fourloops.determinism.attention_kernels: with no gradient, cuDNN's fused
    forward wrote the same images in both processes, at one view a call and at 8; through a mask of every key,
    flash's backward gave one gradient digest over every step."""
    sys.path.insert(0, str(REPO / "bench"))
    import determinism_cost

    records = sorted((REPO / "bench" / "results").glob("determinism-*"))
    assert records
    for record in records:
        d = record / "determinism"
        lora = [str(d / "on.json"), str(d / "off.json")]
        views = [str(d / "generate-1.json"), str(d / "generate-2.json")]
        assert (d / "table.md").read_text().strip() == determinism_cost.table(lora), record
        assert (d / "generate-table.md").read_text().strip() == determinism_cost.table(views), record
        by_process = [json.loads(Path(p).read_text())["generate"] for p in views]
        fused = [[(r["batch"], r["call"], tuple(r["sha256"])) for r in rows if r["attention"] == "fused"]
                 for rows in by_process]
        assert fused[0] and fused[0] == fused[1] and {b for b, _, _ in fused[0]} == {1, 8}, record
        flash = [r for r in json.loads((d / "on.json").read_text())["rows"] if r["attention"] == "flash-unmasked"]
        assert flash and all(len(r["grad_sha256"]) == 1 and r["deterministic_algorithms"] for r in flash), record


def test_the_prefix_split_is_the_masked_attention():
    """fourloops.determinism.prefix_split (the jobs' attention on a padded micro-batch): its key mask as one unmasked
    call a sample over its admitted keys gives the masked call's attention, values and gradients; a mask of another
    form is left to torch."""
    import torch
    import torch.nn.functional as F

    sdpa = F.scaled_dot_product_attention
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(3, 2, 7, 8, generator=g).requires_grad_() for _ in range(3))
    mask = (torch.arange(7)[None, :] < torch.tensor([5, 3, 7])[:, None]).view(3, 1, 1, 7)
    split = determinism.prefix_split(torch, sdpa, (q, k, v), {"attn_mask": mask, "scale": 0.3})
    masked = sdpa(q, k, v, attn_mask=mask, scale=0.3)
    assert torch.allclose(split, masked, atol=1e-6)
    weights = torch.randn(masked.shape, generator=g)
    grads = [torch.autograd.grad((out * weights).sum(), (q, k, v)) for out in (split, masked)]
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(*grads))
    holes = mask.clone()
    holes[0, 0, 0, 1] = False
    assert determinism.prefix_split(torch, sdpa, (q, k, v, holes), {}) is None
    every = torch.ones(3, 1, 1, 7, dtype=torch.bool)
    assert determinism.prefix_split(torch, sdpa, (q, k, v), {"attn_mask": every}) is None
    none = every.clone()
    none[1] = False  # a sample admitting no key: left to torch
    assert determinism.prefix_split(torch, sdpa, (q, k, v), {"attn_mask": none}) is None
    assert determinism.prefix_split(torch, sdpa, (), {"query": q, "key": k, "value": v, "attn_mask": mask}) is None


def test_the_cost_pass_takes_the_median_over_its_interleaved_rounds(tmp_path):
    """bench/repro_table.costs: each job's off and on seconds are the medians over the pass's rounds (cost-off/,
    cost-on/, then cost-off-2/, cost-on-2/, ...), the whole job's and its own parts'."""
    sys.path.insert(0, str(REPO / "bench"))
    import repro_table

    def record(folder, mode, wall, views):
        path = tmp_path / folder / "provenance" / "generate" / "A.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"determinism": {"mode": mode}, "wall_seconds": wall,
                                    "timing": {"view_seconds": views}}))

    for folder, mode, wall, views in [("cost-off", "off", 50.0, [4.0, 4.0]), ("cost-on", "on", 60.0, [5.0, 5.0]),
                                      ("cost-off-2", "off", 40.0, [3.0, 3.0]), ("cost-on-2", "on", 42.0, [3.5, 3.5]),
                                      ("cost-off-3", "off", 45.0, [3.5, 3.5]), ("cost-on-3", "on", 46.0, [4.0, 4.0])]:
        record(folder, mode, wall, views)
    (row,) = repro_table.costs(tmp_path)
    assert row["job"] == "provenance/generate/A" and row["rounds"] == 3 and row["modes"] == ("off", "on")
    assert (row["off"], row["on"], row["off_parts"], row["on_parts"]) == (45.0, 46.0, 7.0, 8.0)


def test_the_cudnn_frontend_variant_takes_the_calls_with_a_gradient_and_a_machine_without_it_gets_a_row_saying_so(
        tmp_path, monkeypatch):
    """bench/determinism_cost.py's `cudnn-frontend`: a call that takes a gradient goes to the cuDNN frontend's op
    (its mask of every key dropped, a prefix mask split a sample a call), a call with none keeps the jobs' kernels;
    a variant that cannot run on the machine is a row with its error, which the table prints as such."""
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(REPO / "bench"))
    import determinism_cost

    monkeypatch.setattr(F, "scaled_dot_product_attention", F.scaled_dot_product_attention)  # restored after
    seen = []

    def frontend(q, k, v, attn_mask=None, *rest, **kw):
        seen.append((tuple(q.shape), tuple(k.shape), attn_mask))
        return torch.zeros_like(q)

    real = determinism_cost.cudnn_frontend_sdpa
    monkeypatch.setattr(determinism_cost, "cudnn_frontend_sdpa", frontend)
    determinism_cost.attention(torch)
    monkeypatch.setitem(determinism_cost.ATTENTION, "variant", "cudnn-frontend")
    q = torch.randn(2, 3, 4, 8, requires_grad=True)
    k, v = torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    every = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    F.scaled_dot_product_attention(q, k, v, attn_mask=every)
    assert seen == [((2, 3, 4, 8), (2, 3, 6, 8), None)]
    prefix = torch.arange(6)[None, None, None, :] < torch.tensor([6, 4])[:, None, None, None]
    F.scaled_dot_product_attention(q, k, v, prefix)
    assert seen[1:] == [((1, 3, 4, 8), (1, 3, 6, 8), None), ((1, 3, 4, 8), (1, 3, 4, 8), None)]
    with torch.no_grad():
        F.scaled_dot_product_attention(q, k, v)
    assert len(seen) == 3  # no gradient: not the frontend's
    with pytest.raises(ValueError, match="takes no mask"):
        real(q, k, v, every)

    base = {"mode": "off", "deterministic_algorithms": False, "attention": "default", "micro_batch": 8,
            "median_step_seconds": 1.0, "grad_sha256": ["a", "b"], "kernels": {"top": []}}
    failed = {"mode": "on", "deterministic_algorithms": True, "attention": "cudnn-frontend", "micro_batch": 8,
              "error": "ModuleNotFoundError: No module named 'cudnn'"}
    (tmp_path / "r.json").write_text(json.dumps({"rows": [base, failed]}))
    text = determinism_cost.table([str(tmp_path / "r.json")])
    assert ("| pin + cuBLAS workspace + deterministic algorithms + attention cudnn-frontend | 8 | - | - | - | "
            "did not run: ModuleNotFoundError: No module named 'cudnn' |") in text

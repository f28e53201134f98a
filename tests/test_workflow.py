"""The whole workflow on the smoke model set, through Snakemake's CLI, as a user runs it."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import COMMIT, FAKE_SECRETS, REPO, SNAKEMAKE, job_process, pinned, run_snakemake, snakemake_env
from test_lifeline import MARKER, processes_with  # processes of a run found by a marker, never by name

N_AZ = 8
CONDITIONS = ("A", "B", "C", "D")  # D: A with the camera LoRA


def read_table(workdir: Path) -> list[dict]:
    with open(workdir / "results" / "ladder.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def planned_jobs(proc: subprocess.CompletedProcess) -> set[tuple[str, str]]:
    """(rule, wildcards) of every job a dry-run lists."""
    jobs = set()
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", proc.stdout + "\n" + proc.stderr):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not m:
            continue
        wc = re.search(r"^\s+wildcards: (.*)$", block, re.M)
        jobs.add((m.group(1), wc.group(1).strip() if wc else ""))
    return jobs


# --------------------------------------------------------------------------- the smoke ladder itself
def test_smoke_ladder_table_has_every_row_and_the_fit_floor_holds(smoke_run):
    workdir = smoke_run["workdir"]
    rows = read_table(workdir)
    by_cond = {}
    for row in rows:
        by_cond.setdefault(row["condition"], []).append(row)
    for cond in CONDITIONS:
        assert sorted(int(r["azimuth_requested"]) for r in by_cond[cond]) == list(range(0, 360, 45))
    assert len(by_cond["floor"]) == N_AZ
    assert len(by_cond["floor_gt"]) == N_AZ
    assert len(rows) == N_AZ * len(CONDITIONS) + 2 * N_AZ
    for row in by_cond["floor_gt"]:
        assert row["abs_error_deg"] != "", row
        assert float(row["abs_error_deg"]) <= 2.0, row
    assert {r["model_set"] for r in rows} == {"smoke"}
    for row in rows:
        assert (workdir / row["image"]).is_file(), row["image"]
        assert (workdir / row["keypoints"]).is_file(), row["keypoints"]
        assert -180 < float(row["error_deg"] or 0) <= 180
    for row in by_cond["A"]:
        assert float(row["generate_seconds_per_view"]) > 0
        assert row["peak_vram_gib"] == ""  # CPU
    assert (workdir / "results" / "ladder.png").stat().st_size > 10_000
    # every smoke artifact is marked as smoke (the gate refuses it by that mark)
    records = list((workdir / "results" / "provenance").rglob("*.json"))
    assert len(records) == 22
    for rec in records:
        assert json.loads(rec.read_text())["model_set"] == "smoke", rec


def test_the_smoke_profile_puts_every_output_under_smoke(tmp_path):
    """Without --directory, the smoke profile's working directory is ./smoke: nothing lands in ./results."""
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"), "-n",
           "results/ladder.csv"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=snakemake_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Working directory: {tmp_path / 'smoke'}" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_each_condition_loads_its_generator_once_for_all_azimuths(smoke_run):
    for cond in CONDITIONS:
        manifest = json.loads((smoke_run["workdir"] / "results" / "generate" / cond / "views.json").read_text())
        assert manifest["model_loads"] == 1
        assert sorted(int(a) for a in manifest["views"]) == list(range(0, 360, 45))
        assert manifest["model_set"] == "smoke"


def test_second_run_has_nothing_to_do(built_copy):
    proc = run_snakemake(built_copy, "-n", "results/ladder.csv")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_every_job_leaves_provenance_without_secrets(smoke_run):
    workdir = smoke_run["workdir"]
    records = list((workdir / "results" / "provenance").rglob("*.json"))
    # one per job: 2 smoke builds, render, 4 generate, 5 keypoints, 6 fit, ladder, 3 LoRA (records, embeddings, train)
    assert len(records) == 22
    gen = json.loads((workdir / "results" / "provenance" / "generate" / "A.json").read_text())
    for key in ("rule", "wildcards", "params", "inputs", "outputs", "code", "python", "packages", "machine",
                "wall_seconds", "peak_rss_mib", "peak_vram_gib", "peak_reserved_gib", "nvml_peak_gib", "resources",
                "invocation", "models", "seed", "precision", "model_set"):
        assert key in gen, key
    assert gen["model_set"] == "smoke"
    # what the walls asked beside what the process held (a CPU job: no figure is invented)
    assert gen["resources"]["profile"] == "pod" and gen["resources"]["vram_mb"] == 0
    assert gen["peak_reserved_gib"] is None and gen["nvml_peak_gib"] is None
    assert all(len(i["sha256"]) == 64 for i in gen["inputs"])
    assert {"commit", "dirty"} <= set(gen["code"])
    assert gen["models"][0]["revision"]
    # a job on a model says where its seconds went: the model's load, then each view, image or prompt
    timing = gen["timing"]
    assert timing["load_seconds"] > 0 and len(timing["view_seconds"]) == len(gen["params"]["job"]["azimuths"])
    kp = json.loads((workdir / "results" / "provenance" / "keypoints" / "render.json").read_text())
    assert kp["timing"]["load_seconds"] > 0 and len(kp["timing"]["image_seconds"]) == len(kp["params"]["azimuths"])
    emb = json.loads((workdir / "results" / "provenance" / "lora_embeddings" / "embeddings.json").read_text())
    assert emb["timing"]["load_seconds"] > 0 and len(emb["timing"]["prompt_seconds"]) == emb["embeddings"]["records"]
    # no secret anywhere: results, logs, benchmarks, .snakemake metadata
    for path in workdir.rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            data = path.read_bytes()
            for name, value in FAKE_SECRETS.items():
                assert value.encode() not in data, f"{name} leaked into {path}"


# --------------------------------------------------------------------------- staleness
def test_changing_one_prompt_marks_only_that_condition_stale(built_copy):
    override = built_copy / "override.yaml"
    conditions = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["conditions"]
    conditions["B"]["prompt"] = "Turn the camera to {azimuth} degrees; keep the person unchanged."
    override.write_text(yaml.safe_dump({"conditions": conditions}))
    proc = run_snakemake(built_copy, "-n", f"--configfile={override}", "results/ladder.csv")
    jobs = planned_jobs(proc)
    assert jobs == {
        ("generate", "condition=B"),
        ("keypoints_generated", "kpset=B"),
        ("fit", "source=B"),
        ("ladder", ""),
    }, proc.stdout


# --------------------------------------------------------------------------- the real run refuses clearly
def test_real_run_without_cuda_or_weights_stops_before_any_job(tmp_path):
    work = tmp_path / "real"
    work.mkdir()
    env = snakemake_env(HF_HOME=str(tmp_path / "empty-hf-home"))
    # pinned (an unpinned revision is named before the cache is looked in: tests/test_plan.py, test_pod_executor.py)
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--configfile", pinned(tmp_path), "--",
           "results/ladder.csv"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    for words in ("device cuda", f"model OmniGen2/OmniGen2 at revision {COMMIT}", "is not in the Hugging Face cache",
                  f"HF_HOME={tmp_path / 'empty-hf-home'}", "weights /", "profiles/smoke", "nothing was started"):
        assert words in out, (words, out[-3000:])
    assert not (work / "results").exists()
    assert not (work / "models").exists()


# --------------------------------------------------------------------------- a killed generate job
def _changed_prompt_config(workdir: Path, condition: str) -> Path:
    conditions = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["conditions"]
    conditions[condition]["prompt"] = "Orbit the camera to {azimuth} degrees around the same person."
    override = workdir / "override.yaml"
    override.write_text(yaml.safe_dump({"conditions": conditions}))
    return override


def _start_ladder(workdir: Path, override: Path, env: dict | None = None) -> subprocess.Popen:
    cmd = [
        SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"),
        "--directory", str(workdir), f"--configfile={override}", "results/ladder.csv",
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env or snakemake_env(), start_new_session=True)


def _wait_for_first_staged_view(gen_dir: Path, timeout: float = 120.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for staging in gen_dir.glob(".views-partial-*"):
            if any(staging.glob("*.png")):
                return staging
        time.sleep(0.02)
    raise AssertionError(f"no staged view appeared under {gen_dir} in {timeout} s")


def _snapshot(workdir: Path, condition: str) -> dict:
    gen_dir = workdir / "results" / "generate" / condition
    files = sorted(gen_dir.glob("az*.png")) + [gen_dir / "views.json",
                                               workdir / "results" / "provenance" / "generate" / f"{condition}.json"]
    return {str(f.relative_to(workdir)): f.read_bytes() for f in files}


def _assert_last_good_kept(workdir: Path, condition: str, override: Path, before: dict):
    """The killed generation left nothing of its own that looks complete: the previous generation is back,
    byte for byte with its own record, and Snakemake still knows it is stale for the new prompt."""
    assert _snapshot(workdir, condition) == before, "the last good views were not kept byte for byte"
    proc = run_snakemake(workdir, "-n", f"--configfile={override}", "results/ladder.csv")
    jobs = planned_jobs(proc)
    assert ("generate", f"condition={condition}") in jobs
    assert ("keypoints_generated", f"kpset={condition}") in jobs


@pytest.mark.parametrize("victim", ["job", "whole_run"])
def test_killed_generate_keeps_the_last_good_views(built_copy, victim):
    """`job`: the generate job SIGKILLed mid-rerun; Snakemake, alive, puts the last good generation back (and
    with the config it was made with, it counts as built). `whole_run`: Snakemake SIGKILLed mid-generate; its
    job follows it within seconds (fourloops.lifeline: no orphan, nothing complete-looking written after the
    kill), and the next parse settles the stash the killed run left. In the `job` case a rerun then replaces it
    (asserted once).
    (The keep half of this was also tests/test_keep.py's end-to-end test with --forcerun, and the lifeline
    half tests/test_lifeline.py's: the same job killed the same way, asserted once here.)"""
    import uuid

    from fourloops import keep, lifeline

    gen_dir = built_copy / "results" / "generate" / "B"
    before = _snapshot(built_copy, "B")
    override = _changed_prompt_config(built_copy, "B")  # B's generate job is stale: the run regenerates it
    marker = uuid.uuid4().hex
    proc = _start_ladder(built_copy, override, env=snakemake_env(**{MARKER: marker}))
    try:
        staging = _wait_for_first_staged_view(gen_dir)
        assert not (gen_dir / "views.json").exists()  # Snakemake deleted the previous generation before the job
        job_pid = int(staging.name.rsplit("-", 1)[1])
        if victim == "job":
            os.kill(job_pid, signal.SIGKILL)
            log, _ = proc.communicate(timeout=120)
            assert proc.returncode == 1, log[-3000:]
            assert "kept the last good results/generate/B/views.json" in log, log[-3000:]
        else:
            # Snakemake 9.27 runs `bash -c "set -euo pipefail; python ..."` and bash execs python: the job's
            # parent is Snakemake itself, and the run is these two processes.
            assert lifeline.parent_of(job_pid) == proc.pid
            assert sorted(processes_with(marker)) == sorted([proc.pid, job_pid])
            proc.kill()  # Snakemake alone; the job is left to its lifeline
            proc.wait(timeout=60)
            killed_at = time.time()
            deadline = time.monotonic() + 5
            while processes_with(marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not processes_with(marker), \
                f"processes of the run still alive 5 s after SIGKILL: {processes_with(marker)}"
            time.sleep(1.0)
            complete_looking = [p for p in gen_dir.iterdir() if not p.name.startswith(".")]
            assert complete_looking == [], f"complete-looking outputs after the kill: {complete_looking}"
            late = [p for p in (built_copy / "results").rglob("*") if p.is_file() and not p.name.startswith(".")
                    and not any(part.startswith(".") for part in p.relative_to(built_copy).parts)
                    and p.stat().st_mtime > killed_at]
            assert late == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
    if victim == "whole_run":
        # The next parse, here a dry-run, settles the stash the killed run left before the output check reads the
        # records: the kept generation, made with this config, is the built one at once. A SIGKILLed Snakemake
        # also leaves its directory lock, which the dry-run reports ("Directory cannot be locked"); `--unlock`.
        dry = run_snakemake(built_copy, "-n", "results/ladder.csv")
        out = dry.stdout + dry.stderr
        assert "must run again" not in out and "Nothing to be done" in out, out[-3000:]
        run_snakemake(built_copy, "--unlock")
    _assert_last_good_kept(built_copy, "B", override, before)
    assert not (built_copy / keep.STASH).exists()
    if victim == "whole_run":
        return  # a rerun replacing the kept views is asserted once, in the `job` case below
    # with the config it was made with, the kept generation (its Snakemake record too) is the built one
    dry = run_snakemake(built_copy, "-n", "results/ladder.csv")
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    # and a rerun completes, replacing them
    run_snakemake(built_copy, f"--configfile={override}", "results/ladder.csv")
    assert (gen_dir / "views.json").exists() and _snapshot(built_copy, "B") != before
    assert not list(gen_dir.glob(".views-partial-*"))
    assert not (built_copy / keep.STASH).exists()


def test_lint_leaves_only_the_documented_finding(tmp_path):
    """`snakemake --lint`: the one remaining finding (no conda/container per rule) is explained in the README."""
    proc = run_snakemake(tmp_path, "--lint", check=False)
    findings = set(re.findall(r"^\s+\* (.+?):?$", proc.stdout + proc.stderr, re.M))
    assert findings == {"Specify a conda environment or container for each rule."}, findings
    assert "Specify a conda environment or container for each rule" in (REPO / "README.md").read_text()


def test_probe_measures_each_configured_model_on_this_machine(restyled_graded, tmp_path):
    """`snakemake probe`: one pass per configured model, load time and peak VRAM with the apparatus. On a copy of
    the session's graded workdir (conftest.restyled_graded), whose smoke scorer is built: the probe's jobs, not a
    second build of that model (its build job is the sub-DAG's)."""
    import shutil

    built_copy = tmp_path / "work"
    shutil.copytree(restyled_graded["work"], built_copy, symlinks=True)
    run_snakemake(built_copy, "probe")
    for component in ("generator", "detector", "text_encoder"):
        record = json.loads((built_copy / "results" / "probe" / "desk" / f"{component}.json").read_text())
        assert record["component"] == component and record["model_set"] == "smoke"
        assert record["load_seconds"] > 0 and record["pass_seconds"] > 0
        assert record["peak_vram_gib"] is None  # CPU: no VRAM figure is invented
        assert record["apparatus"]["machine"]["cpus"] and record["apparatus"]["packages"]["torch"]
    proc = run_snakemake(built_copy, "-n", "results/ladder.csv")
    assert "Nothing to be done" in proc.stdout + proc.stderr


# ------------------------------------------------- outputs checked against their records before the DAG
def test_a_truncated_render_is_named_and_rebuilt_with_everything_downstream(built_copy):
    png = built_copy / "results" / "render" / "az000.png"
    png.write_bytes(png.read_bytes()[:100])
    proc = run_snakemake(built_copy, "-n", "results/ladder.csv")
    out = proc.stdout + proc.stderr
    assert "render must run again (results/provenance/render/render.json)" in out, out[-3000:]
    assert "az000.png truncated: 100 of" in out
    rules = {r for r, _ in planned_jobs(proc)}
    assert rules == {"render", "generate", "keypoints", "keypoints_generated", "fit", "ladder"}, rules


def test_an_edited_intermediate_is_rebuilt_and_the_run_ends_clean(built_copy):
    from fourloops import verify

    points = built_copy / "results" / "keypoints" / "render" / "az000.json"
    good = points.read_bytes()
    points.write_bytes(good.replace(b"0", b"1", 1))  # same size, other bytes: looks up to date to Snakemake
    proc = run_snakemake(built_copy, "results/ladder.csv")
    assert "keypoints[kpset=render] must run again" in proc.stdout + proc.stderr
    assert points.read_bytes() == good  # the detector is deterministic: the rebuild restores the bytes
    assert verify.check(built_copy) == []
    assert "Nothing to be done" in run_snakemake(built_copy, "-n", "results/ladder.csv").stdout


def test_views_lost_to_a_killed_regenerate_are_rebuilt_not_ignored(built_copy):
    """After a SIGKILLed `--forcerun generate`, only the staging folder is left; the ladder lists views that
    are gone. Snakemake alone says "Nothing to be done"; the record check reruns B and what reads it."""
    gen_dir = built_copy / "results" / "generate" / "B"
    staging = gen_dir / ".views-partial-12345"
    staging.mkdir()
    for f in gen_dir.glob("az*.png"):
        f.rename(staging / f.name)
    (gen_dir / "views.json").unlink()
    proc = run_snakemake(built_copy, "-n", "results/ladder.csv")
    got = planned_jobs(proc)
    assert {r for r, _ in got} == {"generate", "keypoints_generated", "fit", "ladder"}, got
    assert ("generate", "condition=B") in got and not any(w in ("condition=A", "condition=C") for _, w in got)


def test_a_job_killed_during_forcerun_leaves_a_hole_the_next_run_fills(built_copy):
    """SIGKILL keypoints_generated[B] under --forcerun: Snakemake has deleted its 8 files and its record, and
    alone it then answers "Nothing to be done". fit[B]'s record says it read those files: B is rebuilt."""
    from fourloops import verify

    points = sorted((built_copy / "results" / "keypoints" / "B").glob("az*.json"))
    before = {f: f.read_bytes() for f in points}
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--profile", str(REPO / "profiles" / "smoke"),
           "--directory", str(built_copy), "--forcerun", "keypoints_generated", "--",
           "results/provenance/keypoints/B.json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=snakemake_env(), start_new_session=True)
    try:
        os.kill(job_process(proc, "keypoints.py"), signal.SIGKILL)
        log, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0, log[-3000:]
    assert not any(f.exists() for f in points) and not (built_copy / "results/provenance/keypoints/B.json").exists()
    dry = run_snakemake(built_copy, "-n", "results/ladder.csv")
    out = dry.stdout + dry.stderr
    assert "fit[source=B] must run again (results/provenance/fit/B.json): results/keypoints/B/az000.json input gone" \
        in out, out[-3000:]
    assert {("keypoints_generated", "kpset=B"), ("fit", "source=B"), ("ladder", "")} <= planned_jobs(dry)
    run_snakemake(built_copy, "results/ladder.csv")
    assert {f: f.read_bytes() for f in points} == before    # the detector is deterministic: the same bytes
    assert verify.check(built_copy) == []
    assert "Nothing to be done" in run_snakemake(built_copy, "-n", "results/ladder.csv").stdout


def test_deleted_records_leave_every_output_unverified_and_a_truncated_file_is_rebuilt(built_copy):
    """`rm -rf results/provenance` must not switch the output check off: every output the target uses is
    unverified, so its job runs again, and a file truncated after that is rebuilt, not read by fit."""
    import shutil

    from fourloops import verify

    # the floor's fit: render -> keypoints on the renders -> fit, the shortest chain through a detector
    points = built_copy / "results" / "keypoints" / "render" / "az090.json"
    good = points.read_bytes()
    shutil.rmtree(built_copy / "results" / "provenance")
    os.truncate(points, 10)
    dry = run_snakemake(built_copy, "-n", "results/fit/floor.json")
    out = dry.stdout + dry.stderr
    assert "keypoints[kpset=render] must run again (results/provenance/keypoints/render.json): " \
           "results/keypoints/render/az000.json unverified: its record results/provenance/keypoints/render.json " \
           "is missing" in out, out[-3000:]
    assert {r for r, _ in planned_jobs(dry)} >= {"render", "keypoints", "fit"}
    proc = run_snakemake(built_copy, "results/fit/floor.json")
    assert "Traceback" not in proc.stdout + proc.stderr
    assert points.read_bytes() == good
    assert verify.check(built_copy, ["results/fit/floor.json"]) == []
    assert "Nothing to be done" in run_snakemake(built_copy, "-n", "results/fit/floor.json").stdout


def test_staleness_follows_bytes_a_touch_or_checkout_marks_nothing_and_an_edit_its_jobs(built_copy, tmp_path):
    """The workflow's files copied with new mtimes (a checkout of the same bytes), then a script touched: every
    job stays fresh (rerun-triggers in the profiles leave out Snakemake's script-mtime `code` trigger). A real
    edit to scripts/fit.py marks exactly the fit jobs and what reads them, through their lineage digests."""
    import shutil

    wf = tmp_path / "checkout"
    wf.mkdir()
    for name in ("Snakefile", "rules", "scripts", "config", "profiles", "report", "envs"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, wf / name, copy_function=shutil.copy)  # shutil.copy: new mtimes, same bytes
        else:
            shutil.copy(src, wf / name)

    def dry():
        cmd = [SNAKEMAKE, "-s", str(wf / "Snakefile"), "--profile", str(wf / "profiles" / "smoke"),
               "--directory", str(built_copy), "-n", "results/ladder.csv"]
        return subprocess.run(cmd, capture_output=True, text=True, env=snakemake_env(), timeout=600, cwd=built_copy)

    newest_output = max(f.stat().st_mtime for f in (built_copy / "results").rglob("*") if f.is_file())
    assert (wf / "scripts" / "generate.py").stat().st_mtime > newest_output
    proc = dry()
    assert "Nothing to be done" in proc.stdout, proc.stdout[-3000:]
    os.utime(wf / "scripts" / "generate.py", (time.time() + 60, time.time() + 60))
    proc = dry()
    assert "Nothing to be done" in proc.stdout, proc.stdout[-3000:]
    with open(wf / "scripts" / "fit.py", "a") as f:
        f.write("# an edit\n")
    jobs = planned_jobs(dry())
    assert {r for r, _ in jobs} == {"fit", "ladder"}, jobs
    assert len([j for j in jobs if j[0] == "fit"]) == 6


# ----------------------------------------------------------------------- clear words, nothing written
TARGETS_NO_RULE_MAKES = {
    "results/render/azXYZ.png": "allowed: one of az000.png, az045.png, az090.png, az135.png, az180.png, az225.png",
    # the whole name, not what differs from its sibling (az0|17 against az0|00: '17', allowed 00, 45, 90)
    "results/render/az017.png": "'az017.png' is not one rule render makes in results/render/; allowed: one of az000.png",
    # a name the config expands beside a wildcard (results/generate/{condition}/az{az}.png): not "no rule's shape"
    "results/generate/A/az360.png": "'az360.png' is not one rule generate makes in results/generate/A/; allowed: one "
                                    "of az000.png, az045.png",
    "results/generate/Q/views.json": "condition = 'Q' is not allowed for rule generate",
    "results/fit/nope.json": "allowed: one of A, B, C, D, floor, floor_gt",
    "results/nosuch.csv": "no file is there; allowed: a rule (all, compare, ladder, ",  # no rule output has its shape
}


def test_a_target_no_rule_makes_is_explained_with_what_is_allowed(tmp_path):
    """Every such target of one run is named, each with what is allowed (one Snakemake run for the shapes:
    a name the config expands, a wildcard of the rules' constraints, one of the sources, no rule's shape), and so is
    a --forcerun or --omit-from name that is no rule."""
    proc = run_snakemake(tmp_path, "-n", "--forcerun", "genrate", "--omit-from", "fitt", "--", *TARGETS_NO_RULE_MAKES,
                         check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out[-2000:]
    for target, words in TARGETS_NO_RULE_MAKES.items():
        assert f"target {target}: no rule makes it" in out and words in out, (target, out[-2000:])
    # a rule option's misspelt name: Snakemake said "No rule to produce genrate", or (--omit-from) nothing at all
    for option, name in (("--forcerun", "genrate"), ("--omit-from", "fitt")):
        assert f"{option} {name}: no rule of that name, and no file a rule makes; allowed: a rule (all, " in out, out[-2000:]
    assert not (tmp_path / "results").exists()


# One parse by Snakemake's API, then fourloops' own target checks on names Snakemake takes as it takes them: a
# relative file target is os.path.relpath'd (workflow.execute's `files`), so ./results/ladder.csv, results//ladder.csv
# and ../<workdir>/results/ladder.csv are results/ladder.csv to it
_TARGET_CHECKS = '''
import json, sys
from pathlib import Path
from types import SimpleNamespace
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from fourloops import targets
from fourloops.smk import workflow_of
repo, workdir, *names = sys.argv[1:]
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(resource_settings=ResourceSettings(), config_settings=ConfigSettings(),
                      snakefile=Path(repo) / "Snakefile", workdir=Path(workdir))._workflow
    view = workflow_of(wf)
    options = SimpleNamespace(forcerun=set(names), until=set(names), omit_from=set(names))
    print(json.dumps({"targets": [targets.unknown_target(wf, view.jobs.producers, n) for n in names],
                      "options": targets.unknown_rule_options(wf, view.jobs.producers, options)}))
'''


def test_a_target_snakemake_takes_as_a_rules_file_is_not_refused(tmp_path):
    """unknown_target asked the rules about the name as typed: ./results/ladder.csv (a shell's completion) or
    results//ladder.csv, which Snakemake makes as results/ladder.csv, was refused with 'no rule makes it, and no file
    is there'; --forcerun, --until and --omit-from took ../<workdir>/results/ladder.csv as no file a rule makes."""
    names = ["./results/ladder.csv", "results//ladder.csv", f"../{tmp_path.name}/results/ladder.csv",
             "./results/render/az000.png"]
    proc = subprocess.run([sys.executable, "-c", _TARGET_CHECKS, str(REPO), str(tmp_path),
                           *names], capture_output=True, text=True, env=snakemake_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out == {"targets": [None] * len(names), "options": []}, out


def test_weights_that_exist_but_are_no_checkpoint_stop_a_real_run_before_any_job(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    work = tmp_path / "real"
    work.mkdir()
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "-c1",
           "--config", "model_set=real", "machine=pod", f"keypoints={{weights: {passwd}}}", "--", "results/keypoints/render/az000.json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=snakemake_env(), cwd=work, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and f"weights {passwd} (rule keypoints): is not a torch checkpoint" in out, out[-3000:]
    assert not (work / "results").exists() and not (work / ".fourloops-model-set").exists()

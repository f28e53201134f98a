"""What a pod run is billed: the pod's life in the stand-in (scaled time, billed from creation), the bill's
attribution and forecast (fourloops.podbill), and a run on the stand-in whose idle seconds are read from the
stand-in's own clock and bill."""

from __future__ import annotations

import os
import re
import time

import pytest
import yaml

from conftest import FAKE_SECRETS, REPO
from fourloops import podbill, runpod

LIFE = podbill.load_life()


def test_pod_life_figures_are_the_committed_ones_with_their_sources():
    raw = yaml.safe_load((REPO / "config" / "pod_life.yaml").read_text())
    assert LIFE.image_gb == raw["image_gb"]["value"] == 10.6 and LIFE.rsync_mb_s == 14.0 and LIFE.ssh_stale_s == 90.0
    assert LIFE.pull_s == pytest.approx(raw["image_gb"]["value"] * 1000 / raw["pull_mb_s"]["value"])
    for key in podbill.FIGURES:  # every figure says where it comes from; a figure no source gives says so
        assert LIFE.sources[key].strip()
    assert LIFE.sources["pull_mb_s"].startswith("SETTING") and LIFE.sources["hf_mb_s"].startswith("SETTING")


LIFE_TEXT = (REPO / "config" / "pod_life.yaml").read_text()


@pytest.mark.parametrize("old,new,expect", [
    ("  value: 14.0", "  value: 0", "line 30: rsync_mb_s.value = 0: not allowed; allowed: a finite number > 0"),
    ("rsync_mb_s:\n", "rsync_mb_sx:\n", "<top level>: the key 'rsync_mb_s' is missing"),
    ("  value: 10.6", "  value: 1e1", "line 9: image_gb.value = '1e1': '1e1' is text in YAML: write 1.0e+1"),
    ("  value: 10.6", "  value: [10.6", "line 10, column 9: expected ',' or ']'"),
    # a figure given twice: PyYAML kept the last, silently (the plan then billed a 990 s pull)
    ("teardown_s:\n", "image_gb:\n  value: 99.0\n  source: again\nteardown_s:\n",
     "key 'image_gb' appears twice in one mapping (first on line 8)"),
    ("image_gb:\n  value: 10.6\n", "image_gb: 10.6\nxx:\n  value: 10.6\n", "image_gb = 10.6: not allowed; allowed: a mapping"),
], ids=["rate-zero", "missing", "number-as-text", "syntax", "twice", "bare-number"])
def test_a_bad_pod_life_figure_is_refused_naming_file_line_key_and_value(tmp_path, old, new, expect):
    assert old in LIFE_TEXT
    bad = tmp_path / "life.yaml"
    bad.write_text(LIFE_TEXT.replace(old, new, 1))
    with pytest.raises(podbill.PodLifeError) as err:
        podbill.load_life(bad)
    assert str(bad) in str(err.value) and expect in str(err.value), str(err.value)


def test_every_billed_second_gets_one_cause_and_a_gap_is_waiting():
    got = podbill.attribute([("pull", 0, 10), ("setup", 10, 40), ("download", 10, 60), ("job", 60, 100),
                             ("transfer", 95, 105), ("job", 130, 150)], 0, 160)
    idle = got["idle_s"]
    assert got["gpu_s"] == 60 and got["billed_s"] == 160
    # setup covers 10-40; the download shows only where it alone holds the pod; a transfer under a job is hidden
    assert idle["pull"] == 10 and idle["setup"] == 30 and idle["download"] == 20 and idle["transfer"] == 5
    assert idle["waiting"] == 25 + 10  # 105-130 between jobs, 150-160 after the last
    assert got["gpu_s"] + sum(idle.values()) == pytest.approx(got["billed_s"])


def test_an_executor_call_no_work_covers_is_billed_as_calls_and_one_under_work_is_the_works():
    """The executor's own calls (Pod.called) are in the timeline as `calls`: a second of an ssh under the setup or
    a job is that work's; a probe between them, the executor's."""
    got = podbill.attribute([("ready", 0, 10), ("calls", 9, 12), ("calls", 12, 13), ("setup", 13, 20),
                             ("calls", 12.5, 20.5), ("job", 22, 30), ("calls", 21.5, 30.5)], 0, 31)
    idle = got["idle_s"]
    # 10-12 the probe, 12-13 mkdir, 20-20.5 the setup's ssh closing, 21.5-22 the job's ssh logging in,
    # 30-30.5 closing; 20.5-21.5 and 30.5-31 no call: waiting
    assert idle["calls"] == pytest.approx(2 + 1 + 0.5 + 0.5 + 0.5)
    assert idle["ready"] == 10 and idle["setup"] == 7 and got["gpu_s"] == 8
    assert idle["waiting"] == pytest.approx(1.5)
    assert got["gpu_s"] + sum(idle.values()) == pytest.approx(got["billed_s"])


def test_the_forecast_counts_the_executors_calls_per_pod_and_per_job_and_a_running_download_hides_them():
    """Two pod jobs on one pod, calls at set seconds: per pod the poll and probe that get in, the workspace probe,
    mkdir, the repo's rsync and the setup's ssh, plus half a poll cycle; per job its inputs' and outputs' rsync and
    its ssh; the first job of a model one ssh more (its download's lock). Counted by hand here."""
    import dataclasses

    life = dataclasses.replace(LIFE, ssh_call_s=0.2, rsync_call_s=0.3, rest_call_s=0.05)
    jobs = [podbill.PodJob("a", 100), podbill.PodJob("b", 50)]
    got = podbill.forecast(jobs, life, {}, repo_mb=0, hourly_usd=0, fetch_at="container", poll_s=4.0)
    half_poll = (4.0 + 0.05 + 0.2) / 2
    per_pod = 0.05 + 4 * 0.2 + 0.3
    per_job = 0.3 + 0.2 + 0.3
    assert got["idle_s"]["calls"] == pytest.approx(half_poll + per_pod + 2 * per_job, abs=0.1)
    assert got["calls"] == {"ssh": 4 + 2, "rsync": 1 + 4, "rest": 1}
    # with a model whose download outlasts the setup, the calls before its first job wait under the download
    # (the same seconds, billed as `download`), and that job's lock wait is one ssh more
    slow = podbill.forecast([podbill.PodJob("a", 100, "gen")], life, {"gen": 30.0}, repo_mb=0, hourly_usd=0,
                            fetch_at="container", poll_s=4.0)
    assert slow["calls"] == {"ssh": 4 + 1 + 1, "rsync": 1 + 2, "rest": 1}
    assert slow["idle_s"]["calls"] == pytest.approx(0.3, abs=0.1)  # only the outputs' rsync shows
    fast = podbill.forecast([podbill.PodJob("a", 100, "gen")], life, {"gen": 30.0}, repo_mb=0, hourly_usd=0,
                            fetch_at="container", poll_s=4.0, overlap_download=False)
    # the same pod life: what the calls add to the bill does not depend on the download hiding them
    assert slow["idle_s"]["download"] + slow["idle_s"]["calls"] == pytest.approx(
        life.download_s(30.0) - life.ssh_stale_s - life.setup_s + 0.3, abs=0.2)
    assert fast["idle_s"]["calls"] == pytest.approx(half_poll + per_pod + per_job, abs=0.1)


def test_forecast_hides_the_download_behind_the_setup_only_where_it_fits():
    life = LIFE
    jobs = [podbill.PodJob("gen", 1000, "gen", in_mb=14, out_mb=28), podbill.PodJob("score", 200, "score")]
    weights = {"gen": 15.0, "score": 20.0}  # GB: 300 s and 400 s at 50 MB/s
    over = podbill.forecast(jobs, life, weights, repo_mb=0, hourly_usd=1.0, fetch_at="sync")
    early = podbill.forecast(jobs, life, weights, repo_mb=0, hourly_usd=1.0, fetch_at="container")
    serial = podbill.forecast(jobs, life, weights, repo_mb=0, hourly_usd=1.0, overlap_download=False)
    dl = {m: life.download_s(gb) for m, gb in weights.items()}
    assert serial["idle_s"]["download"] == pytest.approx(dl["gen"] + dl["score"], abs=0.1)
    # beside the setup: the first job waits for its weights past the setup and its upload; the scorer's
    # download runs under the generator's job
    assert over["idle_s"]["download"] == pytest.approx(dl["gen"] - life.setup_s - 1.0, abs=0.1)
    # from the container's start: the stale-ssh window's 90 s of the download are under the ready window
    assert early["idle_s"]["download"] == pytest.approx(dl["gen"] - life.ssh_stale_s - life.setup_s - 1.0, abs=0.1)
    # ... and so are the executor's calls before the setup (half a 5 s poll cycle, the poll, 4 ssh, the repo's
    # rsync), which after the sync (`over`) are billed in a row with one ssh more, the download's start
    before_setup = (5.0 + life.rest_call_s + life.ssh_call_s) / 2 + life.rest_call_s + 4 * life.ssh_call_s + life.rsync_call_s
    assert over["billed_s"] - early["billed_s"] == pytest.approx(life.ssh_stale_s + before_setup + life.ssh_call_s, abs=0.2)
    assert early["floor_container_s"] == pytest.approx(
        life.pull_s + life.runtime_null_s + max(dl["gen"], life.ssh_stale_s + life.setup_s) + 1200 + life.teardown_s, abs=0.1)
    assert over["billed_s"] == pytest.approx(over["gpu_s"] + sum(over["idle_s"].values()), abs=0.2)
    assert over["floor_s"] == pytest.approx(life.pull_s + max(life.setup_s, dl["gen"]) + 1200 + life.teardown_s, abs=0.1)
    assert over["cost_usd"] == pytest.approx(over["billed_s"] / 3600, abs=1e-3)


def test_the_dfc_venv_a_container_job_needs_is_billed_once_per_pod_from_the_wheels_real_size(tmp_path):
    """hef_compile on a pod: before its command the executor builds the DFC's venv (dfcvenv.DfcVenv.ensure):
    4 ssh (marker check, mkdir + sha256sum, the build, marker write), 1 rsync per uploaded folder, the upload at
    rsync_mb_s and the build (dfc_venv_build_s, a SETTING); a second container job on the pod, one ssh (the
    marker's check). The figures are read from config/pod_life.yaml here, the wheel's size from the file."""
    from fourloops import plan as planmod

    raw = {k: v["value"] for k, v in yaml.safe_load((REPO / "config" / "pod_life.yaml").read_text()).items()}
    wheel = tmp_path / "hailo_dataflow_compiler-5.0.0-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"\0" * 7_000_000)  # 7 MB
    house = tmp_path / "house"
    house.mkdir()
    (house / "a-1-py3-none-any.whl").write_bytes(b"\0" * 2_000_000)
    (house / "b-1-py3-none-any.whl").write_bytes(b"\0" * 1_500_000)
    (house / "notes.txt").write_bytes(b"\0" * 9_000_000)  # not a wheel: the executor sends only *.whl
    hef = {"dfc_wheel": str(wheel), "dfc_wheelhouse": None}

    def bill(container: bool, hef_=hef, n=1) -> dict:
        rows = [planmod.PlannedJob(
            rule="hef_compile", output=f"results/hef/m{i}.hef", wildcards={}, reason="", why="", profile=(
                "container" if container else "pod"), machine="container on pod", verdict="fits", refused_walls=[],
            vram_gib=0.0, vram_source="", seconds=600.0, seconds_source="", cost_usd=0.0, in_mb=1.0, out_mb=1.0,
            rented=True) for i in range(n)]
        return planmod.pod_bill(rows, LIFE, {}, REPO, 1.0, hef=hef_)

    plain, one = bill(False), bill(True)
    build_s = raw["dfc_venv_build_s"]
    expect = 4 * raw["ssh_call_s"] + 1 * raw["rsync_call_s"] + 7.0 / raw["rsync_mb_s"] + build_s
    assert build_s > 0 and LIFE.sources["dfc_venv_build_s"].startswith("SETTING")
    assert plain["dfc_venv"] is None
    assert one["dfc_venv"]["seconds"] == pytest.approx(expect, abs=0.1)
    assert one["dfc_venv"]["upload_mb"] == pytest.approx(7.0) and one["dfc_venv"]["upload_s"] == pytest.approx(0.5)
    # nothing runs beside it: the bill grows by it, under the executor's calls, and counts its calls
    assert one["billed_s"] - plain["billed_s"] == pytest.approx(expect, abs=0.2)
    assert one["idle_s"]["calls"] - plain["idle_s"]["calls"] == pytest.approx(expect, abs=0.2)
    assert (one["calls"]["ssh"] - plain["calls"]["ssh"], one["calls"]["rsync"] - plain["calls"]["rsync"]) == (4, 1)
    # once per pod: a second container job on it checks the marker (one ssh) and reuses the venv
    two, plain2 = bill(True, n=2), bill(False, n=2)
    assert two["billed_s"] - plain2["billed_s"] == pytest.approx(expect + raw["ssh_call_s"], abs=0.2)
    # a wheelhouse: its *.whl go up too, in a second rsync
    with_house = bill(True, {"dfc_wheel": str(wheel), "dfc_wheelhouse": str(house)})
    assert with_house["dfc_venv"]["seconds"] == pytest.approx(
        4 * raw["ssh_call_s"] + 2 * raw["rsync_call_s"] + (7.0 + 2.0 + 1.5) / raw["rsync_mb_s"] + build_s, abs=0.1)
    # a wheel not there when the plan is made: the upload is unknown, said so, not invented
    gone = bill(True, {"dfc_wheel": str(tmp_path / "absent.whl"), "dfc_wheelhouse": None})
    assert not gone["dfc_venv"]["upload_known"] and gone["dfc_venv"]["upload_mb"] is None
    assert gone["dfc_venv"]["seconds"] == pytest.approx(4 * raw["ssh_call_s"] + raw["rsync_call_s"] + build_s, abs=0.1)
    # the printed plan names it with its parts
    text = planmod.format_plan({"machine": "desk", "executor": "runpod", "jobs": [], "pod_bill": one, "refusals": "",
                                "totals": {}} | {"jobs": [{"rule": "hef_compile", "output": "x", "profile": "container",
                                                           "machine": "container on pod", "verdict": "fits",
                                                           "seconds": 600.0, "cost_usd": 0.2, "why": ""}]})
    line = next(x for x in text.splitlines() if "DFC venv" in x)
    assert f"{expect:.0f} s = build {build_s:.0f} s" in line and "upload 0.5 s (7.0 MB" in line, line
    text = planmod.format_plan({"machine": "desk", "executor": "runpod", "pod_bill": gone, "refusals": "", "totals": {},
                                "jobs": [{"rule": "hef_compile", "output": "x", "profile": "container",
                                          "machine": "container on pod", "verdict": "fits", "seconds": 600.0,
                                          "cost_usd": 0.2, "why": ""}]})
    assert "upload unknown (hef.dfc_wheel" in text and "absent.whl" in text, text


def test_the_standin_pod_bills_from_creation_through_the_pull_and_the_null_runtime(tmp_path):
    from runpod_standin import StandIn

    scale = 0.005  # 106 s of pull in 0.53 s
    standin = StandIn(None, tmp_path, FAKE_SECRETS["RUNPOD_API_KEY"], life=LIFE, time_scale=scale)
    try:
        client = runpod.Client(FAKE_SECRETS["RUNPOD_API_KEY"], standin.url)
        created = client.create_pod({"name": "fourloops-life-1", "image": "x@sha256:" + "0" * 64,
                                     "gpu": {"id": "NVIDIA A40", "count": 1}, "cloud": "SECURE"})
        p = standin.pods[created["id"]]
        seen = []
        while standin.sim_s(p) < LIFE.pull_s + LIFE.runtime_null_s + 30:
            info = client.get_pod(p["id"])
            seen.append((standin.sim_s(p), info["status"], info["runtime"] is None))
            time.sleep(0.02)
        pulling = [s for s in seen if s[0] < LIFE.pull_s - 5]
        null = [s for s in seen if LIFE.pull_s + 5 < s[0] < LIFE.pull_s + LIFE.runtime_null_s - 5]
        up = [s for s in seen if s[0] > LIFE.pull_s + LIFE.runtime_null_s + 5]
        assert pulling and all(st == "PROVISIONING" for _, st, _ in pulling)
        assert null and all(st == "RUNNING" and rt_null for _, st, rt_null in null)  # RUNNING, nothing runs
        assert up and all(st == "RUNNING" and not rt_null for _, st, rt_null in up)
        billed_while_pulling = standin.billed_s(p)
        assert billed_while_pulling >= LIFE.pull_s + LIFE.runtime_null_s  # billed from creation, pull included
        client.terminate(p["id"])
        at_stop = standin.billed_s(p)
        time.sleep(0.2)  # 40 simulated seconds later the bill has not moved
        assert standin.billed_s(p) == pytest.approx(at_stop)
        assert standin.cost(p) == pytest.approx(at_stop / 3600 * p["price"])
        assert not standin.violations, standin.violations
    finally:
        standin.close()


def test_a_pod_run_on_the_standin_attributes_its_idle_and_keeps_it_under_twice_the_floor(built_copy, tmp_path,
                                                                                           loopback_sshd, tmp_path_factory):
    """The executor against a stand-in playing config/pod_life.yaml at 1/50 time: the weights download starts
    from the pod's start command while ssh does not answer yet, a job waits for it, the run prints its bill
    beside the forecast with every idle second's cause, and the idle seconds the stand-in billed (its clock,
    not wall time) stay under twice the unavoidable ones."""
    from runpod_standin import StandIn
    from test_pod_executor import VENV_PY, _cmd, _env, _strip_generate
    import subprocess

    # 1/50 time; bench/standin_bill.py reruns this test at other scales (the executor's real polls and handshakes
    # last 1/scale times longer on the stand-in's clock)
    scale = float(os.environ.get("FOURLOOPS_BENCH_STANDIN_SCALE", "0.02"))
    standin = StandIn(loopback_sshd, tmp_path_factory.mktemp("pods"), FAKE_SECRETS["RUNPOD_API_KEY"],
                      life=LIFE, time_scale=scale)
    try:
        work = built_copy
        _strip_generate(work)
        podwork = "{repo}/tests/podwork.py"
        # the fetch starts with the container, before the workflow's files are there: podwork from this checkout
        extra = ["--runpod-setup-command", f"{VENV_PY} tests/podwork.py setup",
                 "--runpod-fetch-command", f"{VENV_PY} {REPO / 'tests' / 'podwork.py'} fetch OmniGen2/OmniGen2",
                 "--runpod-fetch-at", "container", "--runpod-image-start", str(standin.image_start),
                 "--runpod-remote-python", f"{VENV_PY} {podwork} job -- {VENV_PY}"]
        cmd = [c for c in _cmd(work, standin, "results/generate/A/views.json", extra=extra)]
        # the later --runpod-remote-python / --runpod-setup-command win over _cmd's own
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp_path), cwd=work, timeout=400)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-6000:]
        print("\n" + "\n".join(l for l in out.splitlines()
                                if "runpod: " in l and ("bill" in l or "idle" in l or "executor calls" in l)))
        assert re.search(r"runpod: pod bill: [\d.]+ s billed, [\d.]+ s GPU-busy", out), out[-3000:]
        assert re.search(r"idle by cause: pull [\d.]+, ready [\d.]+, setup [\d.]+, download [\d.]+, transfer [\d.]+, "
                         r"calls [\d.]+, waiting [\d.]+, teardown [\d.]+", out)
        assert re.search(r"forecast \(fourloops plan --machine pod\): [\d.]+ s billed", out)
        assert re.search(r"billed \$\d+\.\d{4} against forecast \$\d+\.\d{4}", out)
        [p] = standin.pods.values()
        events = standin.events(p)
        setup = next(e for e in events if e[0] == "setup")
        download = next(e for e in events if e[0] == "download")
        jobs = [e for e in events if e[0] == "job"]
        assert "HF_TOKEN" not in p["body"]["args"] and p["body"]["env"]["HF_TOKEN"] == FAKE_SECRETS["HF_TOKEN"]
        # the download started with the container, inside the ready window (ssh not answering yet)
        assert LIFE.pull_s < download[1] < LIFE.pull_s + LIFE.ready_s < setup[1], events
        assert jobs and all(j[1] >= download[2] - 1 for j in jobs), events  # a job waited for its weights
        billed = standin.billed_s(p)
        played = podbill.attribute(events, 0.0, billed)
        busy = played["gpu_s"]
        idle = billed - busy
        floor_idle = LIFE.pull_s + max(LIFE.setup_s, download[2] - download[1]) + LIFE.teardown_s
        print(f"\nstand-in at 1/{1 / scale:.0f}: billed {billed:.0f} s, job {busy:.0f} s, idle {idle:.0f} s, "
              f"unavoidable {floor_idle:.0f} s")
        print("stand-in idle by cause: " + ", ".join(f"{c} {s:.1f}" for c, s in played["idle_s"].items()))
        assert idle < 2 * (floor_idle + LIFE.ready_s), (idle, floor_idle, events)
        assert standin.listed() == [] and not standin.violations, standin.violations
        # the executor made the calls the forecast counts for one pod job waiting for its model's download
        made = re.search(r"executor calls from ready to terminate: (.*?); before ready", out).group(1)
        counted = podbill.forecast([podbill.PodJob("generate", 1.0, "gen")], LIFE, {"gen": 1.0}, repo_mb=0,
                                   hourly_usd=0, fetch_at="container")["calls"]
        assert {k: int(n) for k, n in re.findall(r"(\w+) (\d+) \(median", made)} == counted, made
    finally:
        standin.close()


def test_the_standin_pods_rsync_moves_at_the_runbooks_bandwidth(loopback_sshd, tmp_path):
    """14 MB up to a stand-in pod costs a simulated second (the runbook's ~14 MB/s), read off the stand-in."""
    import os
    import subprocess

    from runpod_standin import StandIn, pod_let_in

    import dataclasses

    scale = 1.0  # real time: the bandwidth's second is above the loopback's own (a fast start, no pull)
    life = dataclasses.replace(LIFE, pull_mb_s=1e9, runtime_null_s=0.0, ssh_stale_s=0.0)
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    standin = StandIn(loopback_sshd, tmp_path / "pods", FAKE_SECRETS["RUNPOD_API_KEY"], life=life, time_scale=scale)
    try:
        p, pod, transport = pod_let_in(standin, FAKE_SECRETS["RUNPOD_API_KEY"], "fourloops-rsync-1", key,
                                       tmp_path / "known_hosts")
        src = tmp_path / "up"
        src.mkdir()
        (src / "blob.bin").write_bytes(os.urandom(14_000_000))
        up = transport.rsync(pod, ["blob.bin"], str(src) + "/", f"{pod.user}@{pod.host}:{p['workspace']}/")
        assert up.returncode == 0, up.stderr
        assert (p["workspace"] / "blob.bin").stat().st_size == 14_000_000
        [moved] = [e for e in standin.events(p) if e[0] == "transfer"]
        assert 14_000_000 / 1e6 / life.rsync_mb_s == 1.0
        assert 1.0 <= moved[2] - moved[1] < 1.5, moved  # the bandwidth's second, not the loopback's speed
    finally:
        standin.close()


def test_the_fetch_locks_hold_a_job_until_its_own_model_is_in_and_not_past_it(tmp_path):
    """The pod's start command (fetch_script): the downloads run one after another in the background, each
    holding its own lock; a job's `flock -s` on its model's lock waits for that download only and reads its
    exit status; the image's own start holds no lock."""
    import subprocess

    from snakemake_executor_plugin_runpod.executor import fetch_script

    env = {"PATH": "/usr/bin:/bin", "FOURLOOPS_WORKSPACE": str(tmp_path)}
    root = tmp_path / "fourloops"
    start = subprocess.Popen(["bash", "-c", fetch_script(["sleep 1; exit 3", "sleep 4"], "sleep 30")], env=env)
    try:
        time.sleep(0.5)

        def wait(n, block=True):
            return subprocess.run(["flock", "-s", *([] if block else ["-n"]), str(root / f"fetch-{n}.lock"), "cat",
                                   str(root / f"fetch-{n}.rc")], capture_output=True, text=True, timeout=10)

        assert wait(0, block=False).returncode == 1  # held: a job would wait
        t0 = time.monotonic()
        first = wait(0)
        assert first.stdout.strip() == "3" and time.monotonic() - t0 > 0.2  # waited its download out, saw its exit
        assert wait(1, block=False).returncode == 1  # the second model is still coming
        assert wait(1).stdout.strip() == "0"
        assert start.poll() is None  # the image's start still runs, without the locks
        assert (root / "joblogs" / "fetch.log").exists()
    finally:
        start.kill()


def test_a_start_command_that_never_runs_the_images_start_leaves_the_runtime_null(tmp_path):
    """RFD 1140 in the stand-in: a pod whose start command does not hand over to the image's own start stays
    RUNNING with a null runtime; one that does gets its runtime when its container starts."""
    from runpod_standin import StandIn

    scale = 0.005
    standin = StandIn(None, tmp_path, FAKE_SECRETS["RUNPOD_API_KEY"], life=LIFE, time_scale=scale)
    try:
        client = runpod.Client(FAKE_SECRETS["RUNPOD_API_KEY"], standin.url)
        body = {"image": "x@sha256:" + "0" * 64, "gpu": {"id": "NVIDIA A40", "count": 1}, "cloud": "SECURE"}
        alone = client.create_pod({**body, "name": "fourloops-args-1", "args": "sleep 30"})
        handed = client.create_pod({**body, "name": "fourloops-args-2",
                                    "args": f"bash -c 'true; exec {standin.image_start}'"})
        p = standin.pods[handed["id"]]
        while standin.sim_s(p) < LIFE.pull_s + LIFE.runtime_null_s + 40:
            time.sleep(0.05)
        assert client.get_pod(alone["id"])["runtime"] is None
        assert client.get_pod(handed["id"])["runtime"] is not None
        assert standin.sim_s(p, p["runtime_since"]) == pytest.approx(LIFE.pull_s + LIFE.runtime_null_s, abs=25)
        assert not standin.violations, standin.violations
    finally:
        standin.close()


def test_the_download_order_puts_first_the_model_a_job_can_use_first():
    """The scorer's grades wait on the generator's restyle: the generator's weights download first even when
    the plan lists the grades first (downloads are serial: the other way round the restyle waits for both)."""
    jobs = [("grades.csv", "pod", "score", ["restyle.png"]), ("views.json", "desk", "", []),
            ("restyle.png", "pod", "gen", ["views.json"]), ("az000.png", "pod", "gen", ["views.json"])]
    assert podbill.fetch_order(jobs) == ["gen", "score"]
    assert podbill.fetch_order([("a", "pod", "score", []), ("b", "pod", "gen", [])]) == ["score", "gen"]  # plan order


def test_a_free_pod_goes_to_the_waiting_job_whose_weights_come_first():
    """Pool of one: of the jobs waiting, the pod goes to the lowest rank (the executor's: its model's place in the
    download order), whatever order they asked in; equal ranks go in the order they asked."""
    import threading

    from snakemake_executor_plugin_runpod.pool import Pod, PodPool
    import datetime as dt

    pool = PodPool(1, start=lambda n: Pod(f"p{n}", f"p{n}", dt.datetime.now(dt.timezone.utc)), stop=lambda p: None,
                   work_left=lambda: True, idle_teardown_s=600, close_wait_s=1, log=lambda m: None)
    holder = pool.acquire(0)
    got: list[str] = []

    def job(name, rank):
        pod = pool.acquire(rank)
        got.append(name)
        pool.release(pod)

    threads = []
    for name, rank in (("scorer", 1), ("generator-1", 0), ("generator-2", 0)):
        threads.append(threading.Thread(target=job, args=(name, rank)))
        threads[-1].start()
        time.sleep(0.2)  # they ask in this order
    pool.release(holder)
    for t in threads:
        t.join(10)
    assert got == ["generator-1", "generator-2", "scorer"]
    assert len(pool.pods) == 1  # one pod for all of them


def test_the_full_ladders_bill_before_and_after_batching_regenerates_from_its_h100_probes():
    """bench/results/pod_bill-batching-h100-2026-12-08-{before,after}.txt, run again by the command on their first
    line: each pod job's forecast seconds and source, the pod's GPU seconds, and the shipped executor's bill."""
    import shlex
    import subprocess
    import sys

    def figures(text):
        jobs = [line for line in text.splitlines() if re.match(r"  (generate|grades|lora_train|restyle) ", line)]
        gpu = re.search(r"pod GPU seconds (\d+)", text).group(1)
        shipped = re.search(r"^shipped executor +\d+ +(\d+) +(\d+) .*?(\$\d+\.\d\d)", text, re.M).groups()
        return jobs, gpu, shipped

    got = {}
    for side in ("before", "after"):
        record = (REPO / "bench" / "results" / f"pod_bill-batching-h100-2026-12-08-{side}.txt").read_text()
        command = shlex.split(record.splitlines()[0].removeprefix("command: ").split("   (commit")[0])
        assert command[:2] == [".venv/bin/python", "bench/pod_bill.py"], command
        run = subprocess.run([sys.executable, *command[1:]], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        (jobs, gpu, (billed, busy, cost)), (want_jobs, want_gpu, (want_billed, want_busy, want_cost)) = (
            figures(run.stdout), figures(record))
        assert jobs == want_jobs and gpu == want_gpu and busy == want_busy and cost == want_cost, side
        assert abs(int(billed) / int(want_billed) - 1) < 0.01, (side, billed, want_billed)  # the repo's MB moves it
        got[side] = int(gpu)
    assert (got["before"], got["after"]) == (1043, 651)  # the figures the README and docs/walls.md quote


def test_the_bills_probe_records_come_one_a_component(tmp_path):
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    import pod_bill

    probes = REPO / "bench" / "results" / "batching-h100-2026-12-07" / "probes"
    scorer = REPO / "bench" / "results" / "gpu-run-h100-2026-12-06-run46" / "sizing" / "results" / "probe" / "h200"
    found = pod_bill.probe_records([probes, scorer / "scorer.json"])
    assert sorted(found) == ["generator-omnigen2-bf16.json", "lora_step-omnigen2-bf16-precomputed-512.json",
                             "scorer.json"]
    with pytest.raises(SystemExit, match="two probe records named scorer.json"):
        pod_bill.probe_records([scorer, scorer / "scorer.json"])
    with pytest.raises(SystemExit, match=f"--probes {tmp_path / 'none'}: no such file"):
        pod_bill.probe_records([tmp_path / "none"])

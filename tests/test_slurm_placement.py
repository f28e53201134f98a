"""Partition choice and the plugin's resources, without a cluster (tests/test_slurm.py runs a real one)."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from conftest import REPO, snakemake_env
from fourloops import machines, refusal, slurm, walls
from fourloops.asks import Ask

TABLE = machines.load(REPO / "config" / "machines.yaml")


def job(name, vram_gib=0.0, ram_gib=1.0, devices=()):
    return walls.PendingJob(rule=name, output=f"results/{name}", profile="desk",
                            ask=Ask.of(vram_gib, ram_gib, devices=devices))


def test_each_job_goes_to_the_smallest_partition_that_fits_or_stays_for_a_desk_device():
    placed = slurm.place([job("cpu_job"), job("gen", 15.0, devices=("cuda",)), job("big", 30.0, devices=("cuda",)),
                          job("usb", 0.0, devices=("hailo_usb",))], TABLE, "cluster")
    assert placed.where == {"results/cpu_job": "partition cpu", "results/gen": "partition rtx4090",
                            "results/big": "partition a100", "results/usb": "here (desk)"}
    assert placed.local_rules == {"usb"} and placed.verdict.ok


def test_a_job_no_partition_fits_is_refused_with_the_closest_partitions_rows():
    placed = slurm.place([job("huge", 120.0, devices=("cuda",))], TABLE, "cluster")
    assert placed.where["results/huge"] == "refused" and not placed.verdict.ok
    text = refusal.cluster_report(placed, TABLE)
    assert "video memory" in text and "120.00 GiB" in text and "80.00 GiB" in text, text


def test_the_card_is_asked_the_way_the_cluster_understands_never_gpu_and_gres_together():
    ask = Ask.of(15.0, 8.0, devices=("cuda",))
    for how, expect in (("gpu", {"gpu": 1, "gpu_model": "rtx4090"}), ("gres", {"gres": "gpu:rtx4090:1"})):
        table = copy.deepcopy(TABLE)
        table["cluster"]["slurm"]["gpu_request"] = how
        c = machines.cluster(table, "cluster")
        part = next(p for p in c.partitions if p.name == "rtx4090")
        got = slurm.request(ask, part, c)
        assert got == {"slurm_partition": "rtx4090", **expect}, got
        assert not {"gpu", "gres"} <= set(got)
    cpu = next(p for p in machines.cluster(TABLE, "cluster").partitions if p.name == "cpu")
    assert slurm.request(Ask.of(0.0, 2.0), cpu, machines.cluster(TABLE, "cluster")) == {"slurm_partition": "cpu"}


def renamed(tmp_path, submit_host="workstation"):
    """config/machines.yaml with its desk renamed, as its header invites, and the cluster's submit_host set."""
    text = (REPO / "config" / "machines.yaml").read_text().replace("\ndesk:\n", "\nworkstation:\n")
    text = text.replace("  submit_host: desk ", f"  submit_host: {submit_host} ")
    path = tmp_path / "machines.yaml"
    path.write_text(text)
    return path


def test_a_renamed_desk_runs_the_clusters_local_rules_and_a_runpod_runs_rest_where_submit_host_says(tmp_path):
    """The machine a cluster's local rules run on was the literal name "desk" (and the schema required a `desk`):
    a renamed one refused every machines file, and past the schema every SLURM run ("machine = 'desk' is not in
    config/machines.yaml"). It is the cluster's submit_host."""
    from types import SimpleNamespace

    from fourloops.placement import Placement

    table = machines.load(renamed(tmp_path))
    placed = slurm.place([job("cpu_job"), job("usb", 0.0, devices=("hailo_usb",))], table, "cluster")
    assert placed.where == {"results/cpu_job": "partition cpu", "results/usb": "here (workstation)"}
    assert placed.verdict.ok and placed.here.devices == ("cuda", "hailo_usb")
    # a RunPod run whose config machine is the cluster runs what it does not rent out on the submit host
    view = SimpleNamespace(machines=table, target=None, config={"machine": "cluster"}, executor=lambda: "runpod")
    assert Placement.here(view) == "workstation"


@pytest.mark.parametrize("value", ["nowhere", "cluster", "container"])
def test_a_submit_host_that_is_no_single_machine_of_the_file_is_refused_naming_key_value_and_allowed(tmp_path, value):
    path = renamed(tmp_path, value)
    with pytest.raises(machines.MachinesError) as err:
        machines.load(path)
    assert (f"{path}: cluster.submit_host = {value!r}: not a machine of this file; allowed: one of "
            "['workstation', 'pod', 'h200', 'h200_pair']") in str(err.value), str(err.value)


def test_the_slurm_executor_without_a_cluster_in_the_machines_file_names_what_is_missing(tmp_path):
    """No SLURM cluster in machines.yaml: the message said "has 0 SLURM clusters []; allowed: --config machine=<one
    of them>", one of none."""
    from types import SimpleNamespace

    from fourloops.placement import Placement

    table = {name: raw for name, raw in TABLE.items() if name != "cluster"}
    view = SimpleNamespace(machines=table, config={"machine": "desk"}, executor=lambda: "slurm")
    with pytest.raises(machines.MachinesError) as err:
        Placement.slurm_cluster(view)
    assert str(err.value) == (
        "machine = 'desk' under --executor slurm: config/machines.yaml has no SLURM cluster (a machine with a "
        '`slurm:` section, as the file\'s `cluster`); allowed: add one (docs/running.md, "On SLURM"), or run without '
        "--executor slurm")
    # a real run under the slurm executor: refused before any job, in Snakemake's words for a workflow error
    script = ("import sys, yaml\nfrom pathlib import Path\nfrom fourloops import machines\n"
              "table = yaml.safe_load(machines.DEFAULT_PATH.read_text()); del table['cluster']\n"
              "path = Path(sys.argv[1]) / 'machines.yaml'; path.write_text(yaml.safe_dump(table))\n"
              "load = machines.load; machines.load = lambda *a, **kw: load(path)\n"
              "from snakemake.cli import main\n"
              "main(['-s', sys.argv[2], '--executor', 'slurm', '--jobs', '1', '--directory', sys.argv[1] + '/w', "
              "'results/render/az000.png'])\n")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path), str(REPO / "Snakefile")], capture_output=True,
                          text=True, env=snakemake_env(), timeout=300)
    assert proc.returncode == 1 and "invalid machines (nothing was run or written):\n  machine = 'desk' under " \
        "--executor slurm: config/machines.yaml has no SLURM cluster" in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "w" / "results").exists()
    view.machines = {**table, "a": TABLE["cluster"], "b": TABLE["cluster"]}
    with pytest.raises(machines.MachinesError, match=r"has 2 SLURM clusters \['a', 'b'\]; allowed: --config machine="):
        Placement.slurm_cluster(view)

"""The job-side GPU memory figures: the cap that emulates a smaller card, and the NVML peak sampler."""

from __future__ import annotations

import datetime

import pytest

from fourloops import gpumem, provenance


def test_the_cap_is_read_from_the_environment_and_a_bad_value_is_named():
    assert gpumem.cap_gib({}) is None and gpumem.cap_gib({gpumem.CAP_ENV: ""}) is None
    assert gpumem.cap_gib({gpumem.CAP_ENV: "24"}) == 24.0
    for bad in ("24GiB", "0", "-3", "nan", "inf"):
        with pytest.raises(ValueError, match=f"{gpumem.CAP_ENV} = '{bad}'.*allowed"):
            gpumem.cap_gib({gpumem.CAP_ENV: bad})


def test_the_pool_is_capped_so_that_pool_plus_context_fits_under_the_cap():
    # a 24 GiB desk on a 139.8 GiB card whose process already holds 0.6 GiB of context
    fraction = gpumem.cap_fraction(24.0, 139.8, 0.6)
    assert fraction * 139.8 + 0.6 == pytest.approx(24.0)
    assert gpumem.cap_fraction(200.0, 139.8, 0.6) == 1.0  # a cap above the card caps nothing
    assert gpumem.cap_fraction(0.5, 139.8, 0.6) == 0.0    # the context alone is over: nothing may be reserved


def test_without_a_cap_no_cuda_is_touched_and_without_nvml_no_peak_is_invented(monkeypatch):
    import pynvml

    assert gpumem.apply_cap({}) is None

    def no_driver():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    assert gpumem.NvmlPeak().start().stop() == {"nvml_peak_gib": None,
                                                "nvml_source": "no NVML (pynvml missing or no driver)"}


def test_the_allocator_setting_a_job_ran_under_is_recorded(monkeypatch):
    """The pool's slack depends on torch's allocator setting (expandable segments or not): every GPU record says which
    it ran under; a process that never used CUDA records only the environment's setting, and none without one."""
    from fourloops import provenance

    for name in provenance.ALLOC_ENV:
        monkeypatch.delenv(name, raising=False)
    assert provenance.cuda_allocator() is None
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    assert provenance.cuda_allocator() == {"env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                                           "expandable_segments": None}


def test_the_machines_allocator_is_read_where_the_job_runs_and_a_bad_one_is_named(monkeypatch, tmp_path):
    from fourloops import machines
    from fourloops.card import MACHINE_ENV, allocator_env, allocator_of

    monkeypatch.delenv(MACHINE_ENV, raising=False)
    assert allocator_of("h200") == "expandable_segments"
    assert allocator_of("desk") == "default"
    assert allocator_env("desk") == {} and gpumem.check_allocator({}) is None
    # a user's own setting names its allocator, whatever the machine's (the walls then ask by it: test_levers.py)
    assert gpumem.allocator_named({}) is None
    assert gpumem.allocator_named({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}) == "default"
    assert gpumem.allocator_named({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128, expandable_segments:True"}) == \
        "expandable_segments"
    monkeypatch.setenv(MACHINE_ENV, "h200")  # a pod's own environment names the machine whose setting applies
    assert allocator_of("desk") == "expandable_segments"
    assert allocator_env("desk") == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}  # FOURLOOPS_MACHINE=h200
    bad = tmp_path / "machines.yaml"
    bad.write_text(machines.DEFAULT_PATH.read_text().replace("cuda_allocator: expandable_segments",
                                                             "cuda_allocator: fast"))
    with pytest.raises(machines.MachinesError, match=r"cuda_allocator.*'fast'.*(default|expandable_segments)"):
        machines.load(bad)


def test_the_allocator_fourloops_sets_is_never_taken_for_the_users_own(monkeypatch):
    # rules/common.smk puts a machine's setting into torch's variable for its jobs, marked as its own: a later
    # workflow in the same process (an in-process plan, then a run for another machine) replaces it, while a user's
    # own setting stands and is what the walls ask by (fourloops.smk ask_context)
    from fourloops.card import MACHINE_ENV, SET_BY, own_allocator, set_allocator_env

    monkeypatch.delenv(MACHINE_ENV, raising=False)
    env: dict = {}
    set_allocator_env("h200", environ=env)
    assert env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", SET_BY: "h200"} and own_allocator(env) is None
    set_allocator_env("desk", environ=env)
    assert env == {}
    user = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    set_allocator_env("desk", environ=user)
    assert user == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"} and own_allocator(user) == "expandable_segments"


def test_without_a_card_the_expandable_allocator_is_recorded_as_not_checked(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    checked = gpumem.check_allocator(env)
    assert checked == {"cuda_allocator_asked": "expandable_segments", "cuda_allocator_applied": False,
                       "cuda_allocator_note": "no CUDA device: nothing to check"}
    # the job's record holds the check beside the provenance's own account of the allocator, not in its place
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", env["PYTORCH_CUDA_ALLOC_CONF"])
    record = provenance.build_record(rule="r", wildcards={}, params={}, inputs=[], outputs=[],
                                     started=datetime.datetime.now(datetime.timezone.utc), wall_seconds=0.0,
                                     fields=checked)
    assert record["cuda_allocator"] == {"env": env, "expandable_segments": None}
    assert record["cuda_allocator_applied"] is False

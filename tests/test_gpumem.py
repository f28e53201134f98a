"""The job-side GPU memory figures: the cap that emulates a smaller card, and the NVML peak sampler."""

from __future__ import annotations

import pytest

from fourloops import gpumem


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

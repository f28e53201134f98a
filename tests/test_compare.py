"""`fourloops compare A B`: two smoke runs in two directories are equal artifact by artifact; an image perturbed at
config/compare.yaml's thresholds is close just inside them and different just outside; a missing artifact names its
side; a listing round-trips; the report's comparison page; bad input exits 2. The expected verdicts come from the
config file and the perturbations, never from fourloops.compare."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from conftest import FAKE_SECRETS, REPO, built_once, run_snakemake, snakemake_env
from fourloops.cli import main

TOLERANCES = yaml.safe_load((REPO / "config" / "compare.yaml").read_text())
PIXELS = TOLERANCES["kinds"]["images"]["pixels"]
VIEW = "generate/A/az000.png"  # a generated view of the smoke ladder


def compare(capsys, *args: str) -> tuple[int, dict]:
    """`fourloops compare A B --json ...`: its exit status and its rows by artifact."""
    rc = main(["compare", *map(str, args), "--json"])
    out = capsys.readouterr().out
    return rc, {r["artifact"]: r for r in json.loads(out)["rows"]} if out.strip() else {}


@pytest.fixture(scope="session")
def second_run(tmp_path_factory) -> Path:
    """The smoke ladder built again from an empty directory whose path differs from smoke_run's (another name, two
    folders deeper): absolute paths in its records differ, its results must not."""
    def build(root: Path):
        work = root / "elsewhere" / "second-ladder"
        work.mkdir(parents=True)
        run_snakemake(work, "results/ladder.csv", env=snakemake_env(**FAKE_SECRETS))

    root, _ = built_once(tmp_path_factory, "compare-second-run", build)
    return root / "elsewhere" / "second-ladder"


def checkout_changed(*works: Path) -> bool:
    """Whether the checkout these runs ran from changed between them (other sessions commit to it): their records'
    code and lineage digests then differ, rightly; their results may not."""
    return len({json.dumps(json.loads((w / "results/provenance/ladder/ladder.json").read_text())["code"])
                for w in works}) > 1


def tree(root: Path, files: dict[str, Path | bytes]) -> Path:
    """A working directory whose results/ holds `files` (path under results/ -> a file to copy, or bytes)."""
    for rel, src in files.items():
        dest = root / "results" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(src if isinstance(src, bytes) else src.read_bytes())
    return root


# ------------------------------------------------------------------------------------------ two real runs
def test_two_smoke_runs_in_two_directories_are_equal_artifact_by_artifact(smoke_run, second_run, capsys):
    first = smoke_run["workdir"]
    assert first.name != second_run.name and len(first.parts) != len(second_run.parts)
    rc, rows = compare(capsys, first, second_run, *(["--ignore", "code", "--ignore", "lineage"]
                                                    if checkout_changed(first, second_run) else []))
    files = {f"results/{p.relative_to(first / 'results').as_posix()}" for p in (first / "results").rglob("*")
             if p.is_file() and not any(part.startswith(".") for part in p.relative_to(first).parts)}
    assert set(rows) == files and len(files) > 100
    unequal = {a: (r["verdict"], r["figures"]) for a, r in rows.items() if r["verdict"] != "equal"}
    assert unequal == {} and rc == 0, unequal
    # the records did differ, in their measurement fields only (times, and paths under the other directory)
    measured = rows["results/provenance/generate/A.json"]["figures"]
    assert "they differ in" in measured and "invocation" in measured and "model_path" in measured, measured
    assert "they differ in generate_seconds_per_view" in rows["results/ladder.csv"]["figures"]


# ------------------------------------------------------------------------------------------ images
def _perturbed(image: np.ndarray, case: str) -> np.ndarray:
    """`image` changed just inside or just outside a threshold of config/compare.yaml's images kind."""
    out = image.astype(np.int16).copy()
    flat = out.reshape(-1)
    room = np.flatnonzero(flat <= 255 - (PIXELS["max_abs"] + 1))  # values that can rise without clipping
    if case == "max inside":       # a few values moved by the largest difference allowed
        flat[room[:5]] += PIXELS["max_abs"]
    elif case == "max outside":    # one value moved one level past it
        flat[room[:1]] += PIXELS["max_abs"] + 1
    else:                          # every changed value by 1, as many as put the mean just under or over the mean allowed
        n = int(PIXELS["mean_abs"] * flat.size) + (-flat.size // 200 if case == "mean inside" else flat.size // 200)
        assert len(room) >= n
        flat[room[:n]] += 1
    return out.astype(np.uint8)


@pytest.mark.parametrize("case, verdict", [("max inside", "close"), ("max outside", "different"),
                                           ("mean inside", "close"), ("mean outside", "different")])
def test_a_perturbed_view_is_close_within_the_declared_pixels_and_different_beyond(smoke_run, tmp_path, capsys,
                                                                                    case, verdict):
    source = smoke_run["workdir"] / "results" / VIEW
    with Image.open(source) as im:
        assert im.mode == "RGB"
        pixels = np.asarray(im)
    changed = _perturbed(pixels, case)
    diff = np.abs(changed.astype(int) - pixels.astype(int))
    png = io.BytesIO()
    Image.fromarray(changed).save(png, format="PNG")
    a, b = tree(tmp_path / "a", {VIEW: source}), tree(tmp_path / "b", {VIEW: png.getvalue()})
    rc, rows = compare(capsys, a, b)
    row = rows[f"results/{VIEW}"]
    assert (row["kind"], row["verdict"], rc) == ("images", verdict, int(verdict == "different")), row
    assert f"max |Δpixel| {diff.max()}, mean {diff.mean():.3g}" == row["figures"]
    assert str(PIXELS["max_abs"]) in row["tolerance"] and str(PIXELS["mean_abs"]) in row["tolerance"]


# ------------------------------------------------------------------------------------------ missing, listings
def test_an_artifact_one_tree_lacks_is_missing_and_the_row_names_the_side(smoke_run, tmp_path, capsys):
    results = smoke_run["workdir"] / "results"
    both = {"ladder.csv": results / "ladder.csv", "fit/A.json": results / "fit" / "A.json"}
    a = tree(tmp_path / "a", both)
    b = tree(tmp_path / "b", {**both, VIEW: results / VIEW})
    rc, rows = compare(capsys, a, b)
    assert rc == 1 and rows[f"results/{VIEW}"]["verdict"] == "missing"
    assert rows[f"results/{VIEW}"]["figures"] == "only in B (A lacks it)"
    assert {rows[f"results/{rel}"]["verdict"] for rel in both} == {"equal"}


def test_a_listing_compares_equal_to_its_tree_and_a_changed_hash_is_different(smoke_run, second_run, tmp_path,
                                                                                capsys):
    work = smoke_run["workdir"]
    for name, tree_ in (("listing.json", work), ("second.json", second_run)):
        assert main(["compare", "--list", str(tree_)]) == 0
        (tmp_path / name).write_text(capsys.readouterr().out)
    listing = json.loads((tmp_path / "listing.json").read_text())
    rc, rows = compare(capsys, tmp_path / "listing.json", work)
    assert rc == 0 and len(rows) == len(listing["files"]) and {r["verdict"] for r in rows.values()} == {"equal"}
    if not checkout_changed(work, second_run):  # two runs' listings: their records differ in timings, not content
        rc, rows = compare(capsys, tmp_path / "listing.json", tmp_path / "second.json")
        assert rc == 0 and "content digest" in rows["results/provenance/generate/A.json"]["figures"]
    listing["files"][VIEW]["sha256"] = "0" * 64
    (tmp_path / "changed.json").write_text(json.dumps(listing))
    rc, rows = compare(capsys, work, tmp_path / "changed.json")
    assert rc == 1 and [a for a, r in rows.items() if r["verdict"] != "equal"] == [f"results/{VIEW}"]
    assert rows[f"results/{VIEW}"]["verdict"] == "different" and "listing" in rows[f"results/{VIEW}"]["figures"]


# ------------------------------------------------------------------------------------------ tables, records, tensors
def test_numbers_within_a_declared_field_are_close_and_unreadable_or_reshaped_artifacts_are_different(
        smoke_run, tmp_path, capsys):
    """Keypoints moved less than the declared distance: close. A CSV that is no table, a record whose keys differ, a
    record whose machine differs (unless --across-machines), a tensor moved within and beyond the declared |Δ|."""
    from safetensors.numpy import save_file

    results = smoke_run["workdir"] / "results"
    points = json.loads((results / "keypoints" / "A" / "az000.json").read_text())
    moved = dict(points, keypoints=[[x + 0.6 * TOLERANCES["kinds"]["keypoints"]["fields"]["keypoints"]["max_distance"],
                                     y] for x, y in points["keypoints"]])
    record = json.loads((results / "provenance" / "fit" / "A.json").read_text())
    elsewhere = dict(record, machine=dict(record["machine"], platform="another machine kind"))
    weights = np.linspace(-0.02, 0.02, 64, dtype=np.float32).reshape(8, 8)
    step = TOLERANCES["kinds"]["tensors"]["tensors"]["max_abs"]
    for name, w in (("a", weights), ("b", weights + np.float32(step / 2)), ("c", weights + np.float32(step * 2))):
        save_file({"layer.lora_A.weight": w}, str(tmp_path / f"{name}.safetensors"))
    a = tree(tmp_path / "a", {"keypoints/A/az000.json": results / "keypoints" / "A" / "az000.json",
                              "ladder.csv": results / "ladder.csv", "fit/A.json": results / "fit" / "A.json",
                              "provenance/fit/A.json": results / "provenance" / "fit" / "A.json",
                              "lora/near.safetensors": tmp_path / "a.safetensors",
                              "lora/far.safetensors": tmp_path / "a.safetensors"})
    b = tree(tmp_path / "b", {"keypoints/A/az000.json": json.dumps(moved).encode(),
                              "ladder.csv": b"condition,azimuth\n\"A,0\n", "fit/A.json": json.dumps(
                                  dict(json.loads((results / "fit" / "A.json").read_text()), extra=1)).encode(),
                              "provenance/fit/A.json": json.dumps(elsewhere).encode(),
                              "lora/near.safetensors": tmp_path / "b.safetensors",
                              "lora/far.safetensors": tmp_path / "c.safetensors"})
    rc, rows = compare(capsys, a, b)
    verdicts = {a: (r["verdict"], r["figures"]) for a, r in rows.items()}
    assert rc == 1
    assert verdicts["results/keypoints/A/az000.json"][0] == "close", verdicts
    assert verdicts["results/keypoints/A/az000.json"][1].startswith("keypoints max distance 0.6")
    assert verdicts["results/ladder.csv"][0] == "different" and "B: not a CSV table" in verdicts["results/ladder.csv"][1]
    assert verdicts["results/fit/A.json"] == ("different", "keys differ at (top): only in A: -; only in B: ['extra']")
    assert verdicts["results/provenance/fit/A.json"][0] == "different"
    assert "machine/platform" in verdicts["results/provenance/fit/A.json"][1]
    assert verdicts["results/lora/near.safetensors"][0] == "close" and verdicts["results/lora/far.safetensors"][0] == \
        "different", verdicts
    rc, rows = compare(capsys, a, b, "--across-machines")
    assert rows["results/provenance/fit/A.json"]["verdict"] == "equal"


# ------------------------------------------------------------------------------------------ the report's page
def test_with_compare_against_set_the_report_gathers_the_comparison(restyled_graded, smoke_run, tmp_path):
    """The restyled and graded smoke run against the plain smoke ladder: what both made is equal, what only the
    restyled run made is missing on the other side; unset, the report gathers no comparison."""
    work = tmp_path / "work"
    shutil.copytree(restyled_graded["work"], work, symlinks=True)
    ink = f"--configfile={restyled_graded['config']}"
    against = tmp_path / "against.yaml"
    against.write_text(yaml.safe_dump({"compare": {"against": str(smoke_run["workdir"])}}))
    run_snakemake(work, ink, f"--configfile={against}", "report_contents")
    import pandas as pd

    table = pd.read_csv(work / "results" / "compare" / "against.csv")
    assert list(table.columns) == ["artifact", "kind", "verdict", "figures", "tolerance"]
    rows = table.set_index("artifact")
    assert rows.loc["results/ladder.csv", "verdict"] == "equal"
    assert rows.loc["results/restyle/ink/views.json", ["verdict", "figures"]].tolist() == \
        ["missing", "only in A (B lacks it)"]
    assert not any(a.startswith(("results/compare/", "results/provenance/compare/")) for a in rows.index)
    page = (work / "results" / "compare" / "against.html").read_text()
    assert "SMOKE: tiny random models, not a result" in page and "results/ladder.csv" in page
    record = json.loads((work / "results" / "provenance" / "compare" / "against.json").read_text())
    assert record["verdicts"]["missing"] == int((table["verdict"] == "missing").sum()) > 0
    dry = run_snakemake(work, ink, "-n", "report_contents")
    assert not re.search(r"^(local)?rule compare:", dry.stdout + dry.stderr, re.M), dry.stdout[-3000:]


# ------------------------------------------------------------------------------------------ bad input
def test_a_path_that_is_neither_a_tree_nor_a_listing_exits_2_naming_it(smoke_run, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.json").write_text('{"schema": "something else"}')
    for bad in (tmp_path / "nowhere", tmp_path / "empty", tmp_path / "other.json"):
        assert main(["compare", str(smoke_run["workdir"]), str(bad)]) == 2
        err = capsys.readouterr().err
        assert f"fourloops compare: {bad}:" in err and "allowed: a working directory holding results/" in err, err

"""The output check before a run (fourloops.verify): files on disk against their provenance records.

Small tests write real records with fourloops.provenance.build_record; the rest damage a copy of the
session's finished smoke workdir the ways issue 9 found (truncated, edited, deleted, a killed generate).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pytest

from fourloops import io, provenance, verify


def job(root: Path, rule: str, name: str, inputs: list[str], outputs: dict[str, bytes], wildcards=None) -> str:
    """Write `outputs`, then the record the job would write (run from the working directory)."""
    for path, data in outputs.items():
        io.write_bytes(root / path, data)
    record = provenance.build_record(rule=rule, wildcards=wildcards or {}, params={}, inputs=inputs,
                                     outputs=list(outputs), started=dt.datetime.now(dt.timezone.utc),
                                     wall_seconds=0.0, fields={"model_set": "smoke"})
    path = f"results/provenance/{rule}/{name}.json"
    io.write_json(root / path, record)
    return path


@pytest.fixture
def chain(tmp_path, monkeypatch):
    """source.txt (no job made it) -> make -> a.txt, b.txt -> use -> c.txt"""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "source.txt").write_text("a source\n")
    job(tmp_path, "make", "make", ["source.txt"], {"results/a.txt": b"alpha\n", "results/b.txt": b"beta\n"})
    job(tmp_path, "use", "x", ["results/a.txt"], {"results/c.txt": b"gamma\n"}, wildcards={"tag": "x"})
    return tmp_path


def kinds(problems) -> set[tuple[str, str, str]]:
    return {(p.record, p.path, p.kind) for p in problems}


def test_intact_records_have_no_problem_and_describe_says_nothing(chain):
    assert verify.check(chain) == []
    assert verify.describe([]) == ""


def test_an_output_grown_or_edited_at_the_same_size_is_edited(chain):
    (chain / "results/b.txt").write_bytes(b"beta, and more\n")
    (chain / "results/c.txt").write_bytes(b"GAMMA\n")
    problems = verify.check(chain)
    assert kinds(problems) == {("results/provenance/make/make.json", "results/b.txt", "edited"),
                               ("results/provenance/use/x.json", "results/c.txt", "edited")}
    grown = next(p for p in problems if p.path == "results/b.txt")
    assert grown.detail == "15 bytes, recorded 5"


def test_a_source_no_job_made_is_not_judged_but_a_made_input_is(chain):
    (chain / "source.txt").write_text("another source\n")      # Snakemake's own mtime check covers it
    assert verify.check(chain) == []
    os.remove(chain / "results/a.txt")
    problems = verify.check(chain)
    assert kinds(problems) == {("results/provenance/make/make.json", "results/a.txt", "missing"),
                               ("results/provenance/use/x.json", "results/a.txt", "input gone")}
    assert [p.job for p in problems] == ["make", "use[tag=x]"]              # upstream first


def test_the_warm_cache_reads_no_bytes_and_an_edit_is_read_again(chain, monkeypatch):
    reads = []
    monkeypatch.setattr(verify, "sha256_file", lambda path: reads.append(str(path)) or io.sha256_file(path))
    assert verify.check(chain) == []
    assert len(reads) == 3                                     # a.txt, b.txt, c.txt, each once
    cached = json.loads((chain / verify.HASH_CACHE).read_text())
    assert set(cached["files"]) == {"results/a.txt", "results/b.txt", "results/c.txt"}
    reads.clear()
    assert verify.check(chain) == []
    assert reads == []
    (chain / "results/c.txt").write_bytes(b"GAMMA\n")          # same size, new mtime
    assert kinds(verify.check(chain)) == {("results/provenance/use/x.json", "results/c.txt", "edited")}
    assert reads == [str(chain / "results/c.txt")]
    reads.clear()
    assert len(verify.check(chain, use_cache=False)) == 1 and len(reads) == 3


def test_a_broken_hash_cache_is_ignored_and_rewritten(chain):
    (chain / ".snakemake").mkdir()
    (chain / verify.HASH_CACHE).write_text("{not json")
    cache = verify.HashCache(chain / verify.HASH_CACHE)
    assert verify.check(chain, cache=cache) == [] and cache.hashed == 3
    assert json.loads((chain / verify.HASH_CACHE).read_text())["schema"] == verify.HASH_SCHEMA


def test_an_unreadable_record_is_named(chain):
    (chain / "results/provenance/use/x.json").write_text('{"rule": "use", "outputs": [')
    problems = verify.check(chain)
    assert kinds(problems) == {("results/provenance/use/x.json", "results/provenance/use/x.json",
                                "unreadable record")}
    assert problems[0].rule == "use"


def test_paths_limit_the_check_to_the_jobs_that_make_them(chain):
    os.remove(chain / "results/c.txt")
    assert verify.check(chain, ["results/a.txt"]) == []
    assert verify.check(chain, ["results"]) != []                           # a directory output
    assert kinds(verify.check(chain, ["results/provenance/use/x.json"])) == {
        ("results/provenance/use/x.json", "results/c.txt", "missing")}


def test_a_rewrite_in_place_that_keeps_size_and_mtime_is_read_again(chain):
    """Eight bytes flipped in place, size and mtime set back: only the ctime tells (issue 20)."""
    assert verify.check(chain) == []                           # the cache is warm now
    c = chain / "results/c.txt"
    st = c.stat()
    with open(c, "r+b") as f:
        f.write(b"GAMMA")
    os.utime(c, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (c.stat().st_size, c.stat().st_mtime_ns, c.stat().st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert kinds(verify.check(chain)) == {("results/provenance/use/x.json", "results/c.txt", "edited")}


USE_X = verify.Expected("results/provenance/use/x.json", ("results/c.txt",), "use", {"tag": "x"})
MAKE = verify.Expected("results/provenance/make/make.json", ("results/a.txt", "results/b.txt"), "make")


def test_an_output_whose_record_is_gone_is_unverified(chain):
    assert verify.check(chain, expected=[MAKE, USE_X]) == []
    os.remove(chain / "results/provenance/use/x.json")
    assert verify.check(chain) == []                           # no record, nothing to hold it to
    problems = verify.check(chain, expected=[MAKE, USE_X])
    assert kinds(problems) == {("results/provenance/use/x.json", "results/c.txt", "unverified")}
    assert verify.describe(problems) == ("use[tag=x] must run again (results/provenance/use/x.json): results/c.txt "
                                         "unverified: its record results/provenance/use/x.json is missing "
                                         "(1 of 1 outputs exist)")
    os.remove(chain / "results/c.txt")                        # never made (or all gone): Snakemake's own case
    assert verify.check(chain, expected=[MAKE, USE_X]) == []


def test_an_input_the_run_makes_is_judged_after_its_producers_record_is_gone(chain):
    """A killed `--forcerun make`: Snakemake deleted make's outputs and its record; `use` read them."""
    for p in ("results/a.txt", "results/b.txt", "results/provenance/make/make.json"):
        os.remove(chain / p)
    gone = {("results/provenance/use/x.json", "results/a.txt", "input gone")}
    assert kinds(verify.check(chain, expected=[MAKE, USE_X])) == gone
    # run alone, with no DAG: a file under results/ is a job's even with its record gone, never a source
    assert kinds(verify.check(chain)) == gone


def mark_incomplete(root: Path, output: str, name_max: int = 255) -> Path:
    """The mark Snakemake 9 leaves for `output` of a job that has not finished, at the path its own
    persistence.file.FilePersistence._record_path gives (urlsafe base64, cut into '@' folders past `name_max`)."""
    from types import SimpleNamespace

    from snakemake.persistence.file import FilePersistence

    persistence = SimpleNamespace(_fetch_max_len=lambda subject: name_max)
    mark = Path(FilePersistence._record_path(persistence, str(root / ".snakemake/incomplete"), output))
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(json.dumps({"external_jobid": None}))  # what FilePersistence._mark_incomplete writes for a local job
    return mark


def mark_incomplete_db(outputs: list[str], db_url: str | None = None) -> None:
    """The marks Snakemake 9 keeps under `--persistence-backend db` (its DbPersistence, run from the working
    directory, as Snakemake runs) when a job with `outputs` starts and is never seen to finish."""
    from types import SimpleNamespace

    from snakemake.io import IOFile
    from snakemake.persistence.db import DbPersistence

    kwargs = {} if db_url is None else {"db_url": db_url}
    DbPersistence(**kwargs).started(SimpleNamespace(output=[IOFile(p) for p in outputs]))


def test_an_output_snakemake_marks_incomplete_is_named_by_the_check_run_alone(chain):
    """A SIGINT to Snakemake alone during a job: the job writes every output and its record (so each matches it),
    and Snakemake stops before it clears its marks; the next run makes them again."""
    mark_incomplete(chain, "results/a.txt")
    mark_incomplete(chain, "results/provenance/make/make.json")
    problems = verify.check(chain)
    assert kinds(problems) == {("results/provenance/make/make.json", "results/a.txt", "incomplete")}
    assert verify.describe(problems) == (
        "make must run again (results/provenance/make/make.json): results/a.txt incomplete: Snakemake marks 2 of its "
        "job's 3 outputs incomplete (its job never finished under Snakemake); the next run makes them again")
    # paths limit it as they limit the rest: `use` is not make's job
    assert verify.check(chain, ["results/c.txt"]) == []
    assert {p.kind for p in verify.check(chain, ["results/a.txt"])} == {"incomplete"}
    # in a run (the DAG's jobs given) Snakemake acts on its own marks: the check adds nothing
    assert verify.check(chain, expected=[MAKE, USE_X]) == []


def test_an_incomplete_mark_of_a_file_gone_or_unrecorded_and_a_long_path(chain):
    mark_incomplete(chain, "results/gone.txt")                 # gone: the run makes it because it is missing
    io.write_bytes(chain / "results/orphan.txt", b"half\n")   # no record lists it
    mark_incomplete(chain, "results/orphan.txt")
    deep = "results/" + "d" * 120 + "/" + "e" * 120 + "/c.txt"  # its base64 is longer than a file name
    io.write_bytes(chain / deep, b"deep\n")
    mark = mark_incomplete(chain, deep)
    assert mark.parent.name.startswith("@")                    # Snakemake cut the name into folders
    (chain / ".snakemake/incomplete/migration_underway").write_text("")  # Snakemake's own, not a mark
    problems = verify.check(chain)
    assert kinds(problems) == {("results/orphan.txt", "results/orphan.txt", "incomplete"),
                               (deep, deep, "incomplete")}
    assert "no provenance record lists it" in verify.describe(problems)
    assert sorted(verify.incomplete_marks(chain)) == sorted([deep, "results/gone.txt", "results/orphan.txt"])


def test_marked_outputs_no_record_lists_are_named_once_per_folder(chain):
    """A generate job killed before its record: each view it wrote is marked, and no record lists one."""
    views = [f"results/generate/B/az{az:03d}.png" for az in range(0, 360, 36)]
    for view in views:
        io.write_bytes(chain / view, b"a view\n")
        mark_incomplete(chain, view)
    problems = verify.check(chain)
    assert kinds(problems) == {(views[0], views[0], "incomplete")}
    assert verify.describe(problems) == (
        f"? must run again ({views[0]}): {views[0]} incomplete: Snakemake marks 10 files in results/generate/B/ "
        "incomplete (its job never finished under Snakemake); the next run makes them again; no provenance record "
        "lists them, and the marks do not name their job")


def test_the_marks_of_snakemakes_database_backend_are_read(chain, monkeypatch):
    """`--persistence-backend db`: the marks are rows of .snakemake/metadata.db (or of the URL given), none a file."""
    mark_incomplete_db(["results/a.txt", "results/b.txt", "results/provenance/make/make.json"])
    assert (chain / ".snakemake/metadata.db").is_file() and not (chain / ".snakemake/incomplete").exists()
    problems = verify.check(chain)
    assert [(p.record, p.kind, p.detail.split(" (")[0]) for p in problems] == [
        ("results/provenance/make/make.json", "incomplete", "Snakemake marks 3 of its job's 3 outputs incomplete")]
    # a URL the runs were given: the check is given it too; a wrong one is refused, naming it
    os.remove(chain / ".snakemake/metadata.db")
    mark_incomplete_db(["results/c.txt"], db_url="sqlite:///marks.db")
    assert verify.check(chain) == []
    assert kinds(verify.check(chain, db_url="sqlite:///marks.db")) == {
        ("results/provenance/use/x.json", "results/c.txt", "incomplete")}
    with pytest.raises(FileNotFoundError, match="db_url = 'sqlite:///nowhere.db': no database file"):
        verify.check(chain, db_url="sqlite:///nowhere.db")
    # another working directory's marks in the same database are not this one's
    other = chain / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    mark_incomplete_db(["results/a.txt"], db_url=f"sqlite:///{chain / 'marks.db'}")
    assert verify.incomplete_marks(chain, db_url="sqlite:///marks.db") == ["results/c.txt"]


# --------------------------------------------------------------------------- the smoke workdir
def test_the_finished_smoke_run_has_no_problem(built_copy):
    assert verify.check(built_copy) == []


def test_a_truncated_render_names_the_render_and_every_job_that_read_it(built_copy):
    png = built_copy / "results/render/az000.png"
    size = png.stat().st_size
    os.truncate(png, 100)
    problems = verify.check(built_copy)
    own = [p for p in problems if p.path == "results/render/az000.png" and p.kind == "truncated"]
    assert [(p.record, p.detail) for p in own] == [("results/provenance/render/render.json", f"100 of {size} bytes")]
    readers = {p.record for p in problems if p.kind == "input changed"}
    assert readers == {"results/provenance/keypoints/render.json", "results/provenance/generate/A.json",
                       "results/provenance/generate/B.json", "results/provenance/generate/C.json",
                       "results/provenance/generate/D.json"}
    text = verify.describe(problems)
    assert text.splitlines()[0] == (f"render must run again (results/provenance/render/render.json): "
                                    f"results/render/az000.png truncated: 100 of {size} bytes")


def test_a_keypoints_file_edited_at_the_same_size_is_edited(built_copy):
    kp = built_copy / "results/keypoints/A/az090.json"
    data = kp.read_bytes()
    kp.write_bytes(data.replace(b"0.", b"1.", 1))
    assert kp.stat().st_size == len(data)
    problems = verify.check(built_copy)
    assert kinds(problems) == {
        ("results/provenance/keypoints/A.json", "results/keypoints/A/az090.json", "edited"),
        ("results/provenance/fit/A.json", "results/keypoints/A/az090.json", "input changed")}


def test_a_deleted_view_is_missing_and_its_keypoints_job_read_bytes_that_are_gone(built_copy):
    os.remove(built_copy / "results/generate/B/az090.png")
    assert kinds(verify.check(built_copy)) == {
        ("results/provenance/generate/B.json", "results/generate/B/az090.png", "missing"),
        ("results/provenance/keypoints/B.json", "results/generate/B/az090.png", "input gone")}


def test_a_deleted_views_json_names_the_ladder(built_copy):
    os.remove(built_copy / "results/generate/B/views.json")
    problems = verify.check(built_copy)
    assert kinds(problems) == {
        ("results/provenance/generate/B.json", "results/generate/B/views.json", "missing"),
        ("results/provenance/keypoints/B.json", "results/generate/B/views.json", "input gone"),
        ("results/provenance/ladder/ladder.json", "results/generate/B/views.json", "input gone")}
    assert "ladder must run again (results/provenance/ladder/ladder.json): results/generate/B/views.json input gone" \
        in verify.describe(problems).splitlines()


def test_a_killed_forcerun_generate_leaves_the_jobs_that_read_its_views_named(built_copy):
    """What a SIGKILLed `--forcerun generate` leaves: the folder holds only the partial generation."""
    views = built_copy / "results/generate/B"
    shutil.rmtree(views)
    (views / ".views-partial-k1ll3d").mkdir(parents=True)
    (views / ".views-partial-k1ll3d" / "az000.png").write_bytes(b"half a png")
    problems = verify.check(built_copy)
    assert {p.job for p in problems} == {"generate[condition=B]", "keypoints_generated[kpset=B]", "ladder"}
    assert {p.kind for p in problems if p.job == "generate[condition=B]"} == {"missing"}
    lines = verify.describe(problems).splitlines()
    assert [ln.split(" must run again")[0] for ln in lines] == \
        ["generate[condition=B]", "keypoints_generated[kpset=B]", "ladder"]
    assert lines[0].endswith("; +6 more")                      # 8 views and views.json, 3 shown


def test_a_warm_check_of_the_smoke_workdir_reads_no_bytes(built_copy):
    cold = verify.HashCache(built_copy / verify.HASH_CACHE)
    assert verify.check(built_copy, cache=cold) == []
    index = verify.records.index(built_copy)
    files = {e["path"] for r in index.records for e in r.entries("outputs")}
    # and, the check run alone, the recorded inputs under results/ and models/ (Snakemake's .snakemake_timestamp
    # in the smoke generator's folder, which its record does not list): each file read once
    files |= {e["path"] for r in index.records for e in r.entries("inputs") if e["path"].startswith(("results/", "models/"))}
    assert cold.hashed == len(files)
    warm = verify.HashCache(built_copy / verify.HASH_CACHE)
    assert verify.check(built_copy, cache=warm) == [] and warm.hashed == 0


def test_a_db_url_that_is_no_url_is_refused_without_its_password(tmp_path):
    """A db_url SQLAlchemy cannot read (no scheme) may still carry user:password@: the refusal showed it whole."""
    with pytest.raises(ValueError) as err:
        verify.incomplete_marks(tmp_path, "fourloops:s3cret-pw@db.lab/meta")
    assert "s3cret" not in str(err.value) and "db_url = 'fourloops:***@db.lab/meta' is not a database URL" in str(
        err.value), str(err.value)

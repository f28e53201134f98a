"""The publication gate (fourloops.gate): all listed artifacts are published, or none is.

Library tests build synthetic provenance records and files in a temporary working directory; two
workflow tests run `snakemake publish` on a copy of the session's smoke run.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_snakemake
from fourloops import gate
from fourloops.config import load_schema, schema_errors

CLEAN = {"commit": "a" * 40, "dirty": False}


# --------------------------------------------------------------------------- a synthetic workdir
class Work:
    def __init__(self, root: Path):
        self.root = root

    def file(self, path: str, data: bytes) -> dict:
        p = self.root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        return {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}

    def job(self, rule: str, name: str, inputs: list[str], outputs: dict[str, bytes], *, model_set="real",
            precision="fp32", models=None, code=CLEAN, **fields) -> Path:
        """Write `outputs` and the record a job of `rule` would write (inputs hashed as they are now)."""
        outs = [self.file(p, d) for p, d in outputs.items()]
        ins = []
        for p in inputs:
            data = (self.root / p).read_bytes()
            ins.append({"path": p, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})
        record = {"rule": rule, "wildcards": {}, "params": {"model_set": model_set}, "inputs": ins,
                  "outputs": outs, "code": code, "machine": {"hostname": "desk"}, "model_set": model_set,
                  "models": models or [], **fields}
        if precision is not None:
            record["precision"] = precision
        if model_set is None:
            del record["model_set"]
        path = self.root / "results" / "provenance" / rule / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))
        return path

    def chain(self, table: str, *, generator_precision="bf16", model_set="real", tag="A") -> None:
        """render -> generate (the generator at `generator_precision`) -> keypoints -> fit -> table."""
        self.job("render", f"r{tag}", [], {f"results/render/{tag}.png": b"render" + tag.encode()}, model_set=model_set)
        self.job("generate", tag, [f"results/render/{tag}.png"], {f"results/generate/{tag}.png": b"view" + tag.encode()},
                 precision=generator_precision, model_set=model_set,
                 models=[{"model": "OmniGen2/OmniGen2", "revision": "c0ffee", "precision": generator_precision}])
        self.job("keypoints", tag, [f"results/generate/{tag}.png"], {f"results/keypoints/{tag}.json": b"kp" + tag.encode()},
                 models=[{"model": "rfdetr-keypoint", "revision": "sha-1", "precision": "fp32"}], model_set=model_set)
        self.job("fit", tag, [f"results/keypoints/{tag}.json"], {f"results/fit/{tag}.json": b"fit" + tag.encode()},
                 model_set=model_set)
        self.job("table", tag, [f"results/fit/{tag}.json"], {table: b"table" + table.encode()}, model_set=model_set)

    def hef(self, path="results/hef/rfdetr_device.hef", precision="a8_w8") -> None:
        self.job("export_onnx", "onnx", [], {"results/hef/rfdetr_device.onnx": b"onnx"})
        self.job("compile_hef", "hef", ["results/hef/rfdetr_device.onnx"], {path: b"HEF" + path.encode()},
                 precision=precision, models=[{"model": "rf-detr-keypoint", "revision": "r1", "precision": precision}])

    def gate(self, listing, *, code=CLEAN, stale=None, **kw) -> gate.Outcome:
        """Run the gate; Snakemake's verdict defaults to 'nothing is stale'."""
        if stale is None:
            stale = lambda paths: {p: None for p in paths}  # noqa: E731
        return gate.run_gate(self.root, listing, code=code, stale=stale, **kw)

    def snapshot(self) -> dict:
        out = self.root / "results" / "published"
        if not out.exists():
            return {}
        return {str(p.relative_to(out)): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
                for p in sorted(out.rglob("*"))}


@pytest.fixture
def work(tmp_path):
    return Work(tmp_path)


def rules_broken(outcome, artifact=None) -> set[int]:
    return {r.rule for r in outcome.refusals if artifact is None or r.artifact == artifact}


def corpus(path, **kw):
    return {"path": path, "kind": "corpus", **kw}


# --------------------------------------------------------------------------- rule 1: corpus names
def test_rule1_corpus_named_nf4_is_refused_though_its_provenance_is_full_precision(work):
    work.chain("results/grade/grades_NF4.csv", generator_precision="bf16")
    out = work.gate([corpus("results/grade/grades_NF4.csv")])
    assert rules_broken(out) == {1}
    assert "nf4" in out.refusals[0].evidence
    assert not (work.root / "results" / "published").exists()


def test_rule1_deny_patterns_are_tokens_and_configurable(work):
    work.chain("results/print8.csv", tag="A")            # "int8" inside a word is not the token
    work.chain("results/table_q3.csv", tag="B")
    assert work.gate([corpus("results/print8.csv")]).refusals == []
    out = work.gate([corpus("results/table_q3.csv")], deny_patterns=["q3"])
    assert rules_broken(out) == {1}


# --------------------------------------------------------------------------- rule 2: corpus precision
def test_rule2_table_made_from_an_nf4_generator_is_refused_despite_a_clean_name(work):
    work.chain("results/ladder.csv", generator_precision="nf4")
    out = work.gate([corpus("results/ladder.csv")])
    assert rules_broken(out) == {2}
    ev = out.refusals[0].evidence
    # found four links up the lineage, and the chain says how
    assert "precision nf4" in ev and "table <- fit <- keypoints <- generate" in ev, ev


def test_rule2_allowed_precision_passes_and_full_precision_passes(work):
    work.chain("results/ladder.csv", generator_precision="nf4", tag="A")
    work.chain("results/ladder_b.csv", generator_precision="bf16", tag="B")
    out = work.gate([corpus("results/ladder.csv", allow_precisions=["nf4"]), corpus("results/ladder_b.csv")])
    assert out.refusals == []
    entry = out.manifest["artifacts"]["ladder.csv"]
    assert entry["lineage_precisions"] == ["fp32", "nf4"] and entry["allowed_precisions"] == ["nf4"]


def test_rule2_allow_is_per_artifact_and_unknown_precisions_count_as_quantised(work):
    work.chain("results/ladder.csv", generator_precision="nf4", tag="A")
    work.chain("results/other.csv", generator_precision="w3_weird", tag="B")
    out = work.gate([corpus("results/ladder.csv"), corpus("results/other.csv", allow_precisions=["nf4"])])
    assert rules_broken(out, "results/ladder.csv") == {2}
    assert rules_broken(out, "results/other.csv") == {2}


# --------------------------------------------------------------------------- rule 3: deliverables
def test_rule3_quantised_hef_is_published_with_its_precision_while_an_nf4_grade_table_is_refused(work):
    work.hef(precision="a8_w8")
    work.chain("results/grade/overall.csv", generator_precision="nf4")
    hef = {"path": "results/hef/rfdetr_device.hef", "kind": "deliverable"}
    both = work.gate([hef, corpus("results/grade/overall.csv")])
    assert {(r.artifact, r.rule) for r in both.refusals} == {("results/grade/overall.csv", 2)}
    assert not (work.root / "results" / "published").exists()     # one refusal blocks the HEF too
    alone = work.gate([hef])
    assert alone.refusals == []
    entry = json.loads((work.root / "results/published/MANIFEST.json").read_text())["artifacts"]["hef/rfdetr_device.hef"]
    assert entry["precision"] == "a8_w8" and entry["kind"] == "deliverable"
    assert entry["models"][0]["revision"] == "r1" and entry["rule"] == "compile_hef"
    assert (work.root / "results/published/hef/rfdetr_device.hef").read_bytes() == \
        (work.root / "results/hef/rfdetr_device.hef").read_bytes()


def test_rule3_deliverable_must_record_precision_and_not_name_it(work):
    work.hef(path="results/hef/rfdetr_int8.hef", precision="int8")
    out = work.gate([{"path": "results/hef/rfdetr_int8.hef", "kind": "deliverable"}])
    assert rules_broken(out) == {3} and "int8" in out.refusals[0].evidence
    work.hef(path="results/hef/model.hef", precision=None)
    out = work.gate([{"path": "results/hef/model.hef", "kind": "deliverable"}])
    assert rules_broken(out) == {3} and "records no precision" in out.refusals[0].evidence


# --------------------------------------------------------------------------- rule 4: smoke
def test_rule4_anything_from_the_smoke_model_set_is_refused(work):
    work.chain("results/ladder.csv", model_set="smoke")
    assert rules_broken(work.gate([corpus("results/ladder.csv")])) == {4}
    # smoke only upstream (the generator) still taints the table
    work.job("generate", "A", ["results/render/A.png"], {"results/generate/A.png": b"viewA"}, model_set="smoke")
    for rule in ("keypoints", "fit", "table"):
        rec = work.root / "results/provenance" / rule / "A.json"
        data = json.loads(rec.read_text())
        data["model_set"] = "real"
        rec.write_text(json.dumps(data))
    out = work.gate([{"path": "results/ladder.csv", "kind": "report"}])
    assert rules_broken(out) == {4} and "generate" in out.refusals[0].evidence


def test_rule4_anything_from_the_sizing_model_set_is_refused_naming_sizing(work):
    work.chain("results/ladder.csv", model_set="sizing")
    out = work.gate([corpus("results/ladder.csv")])
    assert rules_broken(out) == {4}
    assert "model_set sizing" in out.refusals[0].evidence and "profiles/sizing" in out.refusals[0].fix
    assert "sizing" in out.refusals[0].rule_broken


def test_rule4_a_record_without_a_model_set_is_refused(work):
    work.chain("results/ladder.csv")
    work.job("table", "A", ["results/fit/A.json"], {"results/ladder.csv": b"tableresults/ladder.csv"}, model_set=None)
    assert rules_broken(work.gate([corpus("results/ladder.csv")])) == {4}


# --------------------------------------------------------------------------- rule 5: provenance
def test_rule5_missing_file_missing_record_changed_bytes_and_broken_lineage_are_refused(work):
    work.chain("results/ladder.csv")
    work.file("results/orphan.csv", b"made by hand")
    out = work.gate([corpus("results/absent.csv"), corpus("results/orphan.csv"), corpus("results/nothing*.csv")])
    assert {(r.artifact, r.rule) for r in out.refusals} == {
        ("results/absent.csv", 5), ("results/orphan.csv", 5), ("results/nothing*.csv", 5)}
    assert work.gate([corpus("results/ladder.csv")]).refusals == []
    (work.root / "results/ladder.csv").write_bytes(b"edited afterwards")
    out = work.gate([corpus("results/ladder.csv")])
    assert rules_broken(out) == {5} and "sha256" in out.refusals[0].evidence


def test_rule5_lineage_whose_upstream_bytes_were_remade_is_refused(work):
    work.chain("results/ladder.csv")
    # the keypoints were remade (new bytes, new record) but the fit still claims the old ones
    work.job("keypoints", "A", ["results/generate/A.png"], {"results/keypoints/A.json": b"kp-remade"})
    out = work.gate([corpus("results/ladder.csv")])
    assert rules_broken(out) == {5} and "lineage broken" in out.refusals[0].evidence


# --------------------------------------------------------------------------- rule 6: out of date
def test_rule6_what_snakemake_would_rebuild_or_did_not_judge_is_refused(work):
    work.chain("results/ladder.csv")
    stale = work.gate([corpus("results/ladder.csv")], stale={"results/ladder.csv": "params changed (rule fit)"})
    assert rules_broken(stale) == {6} and "params changed" in stale.refusals[0].evidence
    unjudged = work.gate([corpus("results/ladder.csv")], stale={})
    assert rules_broken(unjudged) == {6}
    assert work.gate([corpus("results/ladder.csv")], stale={"results/ladder.csv": None}).refusals == []


TINY_SNAKEFILE = """
rule table:
    input: "data.txt"
    output: "results/table.csv"
    params: scale=config.get("scale", 1)
    shell: "cat {input} > {output}"
"""


def test_rule6_snakemake_judges_params_input_and_mtime(tmp_path):
    """The dry-run summary, asked the way the gate asks it, sees each rerun trigger."""
    (tmp_path / "Snakefile").write_text(TINY_SNAKEFILE)
    (tmp_path / "data.txt").write_text("1\n")
    smk = [sys.executable, "-m", "snakemake", "-s", "Snakefile", "--cores", "1", "results/table.csv"]
    subprocess.run(smk, cwd=tmp_path, check=True, capture_output=True)
    judge = lambda **kw: gate.snakemake_staleness(tmp_path / "Snakefile", tmp_path,  # noqa: E731
                                                  ["results/table.csv"], **kw)
    assert judge() == {"results/table.csv": None}
    cfg = tmp_path / "scale2.yaml"
    cfg.write_text("scale: 2\n")
    assert "params" in judge(configfile=cfg)["results/table.csv"]
    later = (tmp_path / "results/table.csv").stat().st_mtime + 10
    os.utime(tmp_path / "data.txt", (later, later))
    assert judge() == {"results/table.csv": None}          # touched, same bytes: Snakemake's checksum says current
    (tmp_path / "data.txt").write_text("2\n")
    os.utime(tmp_path / "data.txt", (later, later))
    assert judge()["results/table.csv"]                     # an input changed after its output was made
    assert not (tmp_path / ".snakemake" / "locks").exists() or not any((tmp_path / ".snakemake/locks").iterdir())


def test_rule6_reads_the_metadata_of_a_run_under_the_database_backend(tmp_path, monkeypatch):
    """`--persistence-backend db`: the params are recorded in .snakemake/metadata.db, which the nested dry-run opens
    only when told (rules/common.smk exports the run's backend to its jobs, the gate's among them)."""
    (tmp_path / "Snakefile").write_text(TINY_SNAKEFILE)
    (tmp_path / "data.txt").write_text("1\n")
    # a database of its own (--persistence-backend-db-url), not .snakemake/metadata.db: reached only when it is given
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    smk = [sys.executable, "-m", "snakemake", "-s", "Snakefile", "--cores", "1", "--persistence-backend", "db",
           "--persistence-backend-db-url", url, "results/table.csv"]
    subprocess.run(smk, cwd=tmp_path, check=True, capture_output=True)
    assert not (tmp_path / ".snakemake/metadata").exists() or not any((tmp_path / ".snakemake/metadata").iterdir())
    (tmp_path / "scale2.yaml").write_text("scale: 2\n")
    monkeypatch.setenv("FOURLOOPS_PERSISTENCE_BACKEND", "db")
    monkeypatch.setenv("FOURLOOPS_PERSISTENCE_DB_URL", url)
    commands, run = [], subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: commands.append(cmd) or run(cmd, **kw))
    judged = gate.snakemake_staleness(tmp_path / "Snakefile", tmp_path, ["results/table.csv"],
                                      configfile=tmp_path / "scale2.yaml")
    assert "params" in (judged["results/table.csv"] or "up to date")
    # the URL (a password may be in it) reached the nested Snakemake by a private profile, not its command line (`ps`)
    assert len(commands) == 1 and not any("elsewhere.db" in word for word in commands[0]), commands


def test_a_password_given_in_the_db_urls_query_is_masked_wherever_the_url_is_shown():
    """libpq and the MySQL drivers take the password as a query parameter too (?password=..., sslpassword, passwd):
    SQLAlchemy's hide_password masks only the URL's own password, so the invocation the jobs record, a keep stash's
    manifest (DatabaseRecords.where) and verify's refusal showed it. Every place shows the URL through one function."""
    from types import SimpleNamespace

    from sqlalchemy.engine import make_url

    from fourloops import verify
    from fourloops.lastgood import DatabaseRecords
    from fourloops.smk import invocation

    url = "postgresql://fourloops@db.lab/meta?password=s3cret-pw&sslmode=require&sslpassword=k3y-pw"
    line = invocation(["snakemake", "--persistence-backend-db-url", url], url)
    assert line == "snakemake --persistence-backend-db-url postgresql://fourloops@db.lab/meta?password=***&sslmode=require&sslpassword=***"
    where = DatabaseRecords(SimpleNamespace(engine=SimpleNamespace(url=make_url(url)), namespace="/w/.snakemake")).where
    assert "s3cret" not in where and "k3y" not in where and "sslmode=require" in where, where
    with pytest.raises(FileNotFoundError) as err:
        verify.incomplete_marks(Path("/nonexistent-dir"), "sqlite:///nowhere.db?password=s3cret-pw")
    assert "s3cret" not in str(err.value) and "password=***" in str(err.value), str(err.value)


def test_the_recorded_invocation_masks_the_password_of_the_db_url():
    """The run's db URL (which the gate's dry-run is given) may carry a password: the invocation the jobs record for
    provenance shows it as ***."""
    from fourloops.smk import invocation

    url = "postgresql://fourloops:s3cret-pw@db.lab:5432/meta"
    argv = ["snakemake", "--persistence-backend", "db", "--persistence-backend-db-url", url, "results/ladder.csv"]
    line = invocation(argv, url)
    assert "s3cret-pw" not in line and "postgresql://fourloops:***@db.lab:5432/meta results/ladder.csv" in line
    given_with_equals = invocation([*argv[:4], f"--persistence-backend-db-url={url}"], url)
    assert given_with_equals.endswith("--persistence-backend-db-url=postgresql://fourloops:***@db.lab:5432/meta")


# --------------------------------------------------------------------------- rule 7: dirty tree
def test_rule7_dirty_tree_is_refused_unless_allowed_and_then_the_manifest_says_dirty(work):
    work.chain("results/ladder.csv")
    dirty_now = {"commit": "b" * 40, "dirty": True}
    assert rules_broken(work.gate([corpus("results/ladder.csv")], code=dirty_now)) == {7}
    assert rules_broken(work.gate([corpus("results/ladder.csv")], code={"commit": None, "dirty": None})) == {7}
    out = work.gate([corpus("results/ladder.csv")], code=dirty_now, allow_dirty=True)
    assert out.refusals == []
    manifest = json.loads((work.root / "results/published/MANIFEST.json").read_text())
    assert manifest["code"]["dirty"] is True and manifest["code"]["commit"] == "b" * 40


def test_rule7_artifact_made_from_a_dirty_tree_is_refused_though_the_tree_is_clean_now(work):
    work.chain("results/ladder.csv")
    work.job("fit", "A", ["results/keypoints/A.json"], {"results/fit/A.json": b"fitA"},
             code={"commit": "c" * 40, "dirty": True})
    out = work.gate([corpus("results/ladder.csv")])
    assert rules_broken(out) == {7} and "fit" in out.refusals[0].evidence


# --------------------------------------------------------------------------- all or none, atomically
def test_one_refusal_blocks_the_whole_set_and_the_old_publication_is_untouched(work):
    work.chain("results/ladder.csv", tag="A")
    work.chain("results/restyle.csv", tag="B", generator_precision="nf4")
    work.hef()
    listing = [corpus("results/ladder.csv"), {"path": "results/hef/rfdetr_device.hef", "kind": "deliverable"},
               corpus("results/restyle.csv")]
    first = work.gate(listing[:2])
    assert first.refusals == []
    before = work.snapshot()
    out = work.gate(listing)
    assert {r.artifact for r in out.refusals} == {"results/restyle.csv"}
    assert work.snapshot() == before                                   # bytes and mtimes as they were
    assert not [p for p in (work.root / "results").iterdir() if p.name.startswith(".published")]
    table = gate.report(out)
    for col in ("artifact", "rule broken", "evidence", "how to fix", "2 corpus made with a quantised model"):
        assert col in table


def test_a_pattern_lists_every_match_but_never_the_publication_itself(work):
    work.chain("results/tables/a.csv", tag="A")
    work.chain("results/tables/b.csv", tag="B")
    assert work.gate([corpus("results/**/*.csv")]).refusals == []
    out = work.gate([corpus("results/**/*.csv")])                   # results/published/tables/*.csv exist now
    assert out.refusals == [] and set(out.manifest["artifacts"]) == {"tables/a.csv", "tables/b.csv"}


def test_publication_is_swapped_in_whole_with_a_lock_file_like_manifest(work, monkeypatch):
    import tempfile

    from fourloops import runlock
    from fourloops.gate import swap

    made = []  # the folder the publication is built in: named so that a killed run's is cleared by the next one
    real = tempfile.mkdtemp
    monkeypatch.setattr(swap.tempfile, "mkdtemp", lambda **kw: made.append(real(**kw)) or made[-1])
    work.chain("results/ladder.csv", tag="A")
    work.chain("results/other.csv", tag="B")
    work.gate([corpus("results/ladder.csv"), corpus("results/other.csv")])
    out = work.gate([corpus("results/ladder.csv")], invocation="snakemake publish")
    published = work.root / "results" / "published"
    assert sorted(p.name for p in published.iterdir()) == ["MANIFEST.json", "ladder.csv", "provenance"]
    assert not [p for p in (work.root / "results").iterdir() if p.name.startswith(".published")]
    entry = json.loads((published / "MANIFEST.json").read_text())["artifacts"]["ladder.csv"]
    assert entry["sha256"] == hashlib.sha256(b"tableresults/ladder.csv").hexdigest()
    assert entry["size"] == len(b"tableresults/ladder.csv") and entry["rule"] == "table"
    assert entry["provenance"]["record"] == "results/provenance/table/A.json"
    assert (published / entry["provenance"]["published_copy"]).is_file()
    assert len(entry["provenance"]["lineage"]) == 5                    # table, fit, keypoints, generate, render
    assert {m["model"] for m in entry["models"]} == {"OmniGen2/OmniGen2", "rfdetr-keypoint"}
    assert entry["code"] == CLEAN and entry["machine"] == {"hostname": "desk"} and "params" in entry
    assert out.manifest["invocation"] == "snakemake publish"
    left = Path(made[-1])
    left.mkdir()
    assert runlock.clear_leftovers(work.root) == [str(left.relative_to(work.root))] and not left.exists()


def test_publish_config_defaults_and_schema():
    schema = load_schema(REPO / "config" / "schema.yaml")
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert schema_errors(cfg, schema) == []
    defaults = schema["properties"]["publish"]["properties"]
    assert defaults["deny_name_patterns"]["default"] == ["nf4", "int4", "int8"]
    assert defaults["allow_dirty"]["default"] is False
    bad = dict(cfg, publish={"artifacts": [{"path": "../x.csv", "kind": "weights"}]})
    errors = " ".join(schema_errors(bad, schema))
    assert "publish.artifacts[0].kind" in errors and "publish.artifacts[0].path" in errors


# --------------------------------------------------------------------------- the workflow
def test_snakemake_publish_refuses_the_smoke_ladder_and_leaves_published_as_it_was(built_copy):
    published = built_copy / "results" / "published"
    published.mkdir(parents=True)
    (published / "earlier.txt").write_text("an earlier publication\n")
    proc = run_snakemake(built_copy, "publish", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "rule broken" in out and "how to fix" in out
    for artifact in ("results/ladder.csv", "results/ladder.png"):
        assert any(artifact in line and "4 made by the smoke model set" in line for line in out.splitlines()), out[-3000:]
    assert sorted(p.name for p in published.iterdir()) == ["earlier.txt"]
    assert "6 out of date" not in out                                   # the smoke run is current


def test_snakemake_publish_publishes_a_current_real_ladder_and_refuses_it_once_a_param_changes(built_copy):
    """The smoke records relabelled real stand in for a real run; Snakemake judges staleness itself."""
    for rec in (built_copy / "results" / "provenance").rglob("*.json"):
        data = json.loads(rec.read_text())
        data["model_set"] = "real"
        rec.write_text(json.dumps(data))
    allow = built_copy / "publish.yaml"
    allow.write_text(yaml.safe_dump({"publish": {"allow_dirty": True}}))   # the working tree may be dirty
    proc = run_snakemake(built_copy, "publish", f"--configfile={allow}", check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    manifest = json.loads((built_copy / "results/published/MANIFEST.json").read_text())
    assert set(manifest["artifacts"]) == {"ladder.csv", "ladder.png"}
    assert manifest["artifacts"]["ladder.csv"]["kind"] == "corpus"
    before = {p.name: p.read_bytes() for p in (built_copy / "results/published").iterdir() if p.is_file()}
    changed = built_copy / "fit.yaml"
    changed.write_text(yaml.safe_dump({"publish": {"allow_dirty": True}, "fit": {"grid_step_deg": 3.0}}))
    proc = run_snakemake(built_copy, "publish", f"--configfile={changed}", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert any("results/ladder.csv" in ln and "6 out of date" in ln and "params changed" in ln
               for ln in out.splitlines()), out[-3000:]
    after = {p.name: p.read_bytes() for p in (built_copy / "results/published").iterdir() if p.is_file()}
    assert after == before


# --------------------------------------------------------------------------- rule 8: the determinism settings
ON = {"applied": True, "mode": "on", "torch_loaded": True, "deterministic_algorithms": True,
      "deterministic_warn_only": False}


def test_rule8_a_gpu_job_upstream_without_the_determinism_settings_is_refused(work):
    work.chain("results/ladder.csv")
    assert work.gate([corpus("results/ladder.csv")]).refusals == []  # CPU records that never loaded torch: nothing
    data = {"peak_vram_gib": 15.4}  # the generator on a card, with no settings recorded (made before them)
    work.job("generate", "A", ["results/render/A.png"], {"results/generate/A.png": b"viewA"}, precision="bf16",
             **data)
    out = work.gate([corpus("results/ladder.csv")])
    assert rules_broken(out) == {8} and "did not apply fourloops.determinism" in out.refusals[0].evidence
    assert "generate" in out.refusals[0].evidence and "FOURLOOPS_DETERMINISM" in out.refusals[0].fix
    # the settings off where it ran (a bench's baseline) is refused by name; on, the ladder passes
    work.job("generate", "A", ["results/render/A.png"], {"results/generate/A.png": b"viewA"}, precision="bf16",
             determinism={**ON, "mode": "off"}, **data)
    out = work.gate([corpus("results/ladder.csv")])
    assert rules_broken(out) == {8} and "FOURLOOPS_DETERMINISM=off" in out.refusals[0].evidence
    work.job("generate", "A", ["results/render/A.png"], {"results/generate/A.png": b"viewA"}, precision="bf16",
             determinism=ON, **data)
    assert work.gate([corpus("results/ladder.csv")]).refusals == []

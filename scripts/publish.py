# The gate as a Snakemake job. Not wrapped in fourloops.jobs.job: that writes a provenance record
# to a declared output, and the gate has none (MANIFEST.json is its record); the refusal table must
# also reach the terminal, not only the log.
import os
import sys
import tempfile

import yaml

from fourloops import gate, provenance

cfg = snakemake.params.publish
with tempfile.TemporaryDirectory(prefix="fourloops-publish-") as tmp:
    # The nested dry-run sees exactly this run's config (the profile's and the command line's overrides).
    configfile = os.path.join(tmp, "config.yaml")
    with open(configfile, "w", encoding="utf-8") as fh:
        yaml.safe_dump(dict(snakemake.config), fh, sort_keys=False)  # params compare by repr: keep key order
    outcome = gate.run_gate(
        os.getcwd(),
        cfg["artifacts"],
        deny_patterns=cfg["deny_name_patterns"],
        allow_dirty=cfg["allow_dirty"],
        code=provenance.code_version(snakemake.params.repo),
        stale=lambda paths: gate.snakemake_staleness(
            snakemake.params.snakefile, os.getcwd(), paths, configfile=configfile
        ),
        invocation=os.environ.get("FOURLOOPS_INVOCATION", ""),
    )
text = gate.report(outcome)
os.makedirs(os.path.dirname(snakemake.log[0]), exist_ok=True)
with open(snakemake.log[0], "w", encoding="utf-8") as fh:
    fh.write(text + "\n")
print(text, file=sys.stderr if outcome.refusals else sys.stdout, flush=True)
sys.exit(1 if outcome.refusals else 0)

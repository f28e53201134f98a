# Shared by the stage files: the config check, the run's names, wildcard constraints and the helpers every stage
# file uses. A rule file's input and params functions are its own (src/fourloops/rule_functions/<file>.py, bound
# to the config by `with_config` below); what a job asks, its lineage, the walls and the preflight come from the
# stage declarations (src/fourloops/declarations/*.py, read through fourloops.smk), not from here.
import gc
import json
import os
import sys
import tempfile
from pathlib import Path

# What Snakemake and its plugins built at import lives as long as the process: frozen, it is not scanned again by
# every full garbage collection the parse and the DAG trigger (Python's documented use of gc.freeze).
gc.freeze()

from snakemake.exceptions import WorkflowError

from fourloops import names, provenance, smk
from fourloops.backends import BACKENDS, SMOKE_BACKENDS
from fourloops.config import ConfigError, check_config, configfile_problems, loaded_configfiles, schema_with_slices

# Snakemake's message for a malformed config file, or one that holds no mapping of keys (an empty file), names
# neither file nor line: name both first.
if _config_problems := configfile_problems([os.path.join(workflow.basedir, "config", "config.yaml")]):
    raise WorkflowError("invalid config (nothing was run or written):\n  " + "\n  ".join(_config_problems))


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


# The experiment schema plus each stage's own slice (config/schema.d/<key>.yaml), checked before any job.
# Written as JSON (also YAML): Snakemake's validate reads JSON first, in a fraction of YAML's time.
with tempfile.TemporaryDirectory(prefix="fourloops-schema-") as _tmp:
    _schema = Path(_tmp) / "schema.json"
    try:
        _schema.write_text(json.dumps(schema_with_slices(
            Path(workflow.basedir) / "config" / "schema.yaml", Path(workflow.basedir) / "config" / "schema.d"
        )))
        check_config(
            config, _schema, BACKENDS, SMOKE_BACKENDS, fill_defaults=validate,
            configfiles=loaded_configfiles(workflow), command_line=workflow.config_settings.config,
        )
    except ConfigError as err:
        raise WorkflowError(str(err)) from None
# A --configfile value the command line replaces (a profile's `config:` list is one): said once, by the Snakemake
# the user started, not by each job's (no cores or jobs to run on is refused once the executor is known:
# fourloops.smk.Workflow.check_outputs_on_the_dag)
if workflow.is_main_process:
    from fourloops.config import overridden

    for _line in overridden(workflow.config_settings.configfiles, workflow.config_settings.config):
        print(f"fourloops: note: {_line}", file=sys.stderr)

# Jobs read the top-level invocation from here for their provenance (secrets redacted, a db URL's password masked).
os.environ.setdefault("FOURLOOPS_INVOCATION", provenance.redact(
    smk.invocation(sys.argv, workflow.workflow_settings.persistence_backend_db_url)))
os.environ.setdefault("FOURLOOPS_REPO", str(workflow.basedir))
# The gate's nested dry-run (fourloops.gate.staleness) reads the metadata where this run keeps it (--persistence-backend;
# the file backend, Snakemake's default, needs nothing, and imports nothing at parse)
if workflow.is_main_process and workflow.workflow_settings.persistence_backend.name != "FILE":
    from fourloops.gate.staleness import persistence_env

    os.environ.update(persistence_env(workflow.workflow_settings.persistence_backend,
                                      workflow.workflow_settings.persistence_backend_db_url))
# Every job ends when the Snakemake that parsed this dies (fourloops.lifeline watches this pid).
os.environ.update(FOURLOOPS_SNAKEMAKE_PID=str(os.getpid()))

CONDITIONS = list(config["conditions"])
SOURCES = names.sources(config)
RENDER_TAGS = names.tags(config["azimuths"])
LADDER_TAGS = names.tags(config["ladder"]["azimuths"])
STYLES = list(config["restyle"]["styles"])
RESTYLE_TAGS = names.tags(config["restyle"]["azimuths"])
LORA_FILE = names.lora_file(config)


wildcard_constraints:
    az="|".join(sorted(set(RENDER_TAGS) | set(LADDER_TAGS))),
    condition="|".join(CONDITIONS),
    source="|".join(SOURCES),
    backend="|".join(SMOKE_BACKENDS),
    style="|".join(STYLES),


from fourloops import model_sets
from fourloops.model_sets import SMOKE_DETECTOR, SMOKE_GENERATOR_DIR, SMOKE_SCORER_DIR
from fourloops.stage import builds as sizing_builds, probed as probed_components
from fourloops.sizing import corpus as sizing_corpus

# fourloops' view of this workflow; the stage files use its ASKS (as resources) and LINEAGE (a param).
smk.check_model_set(config["model_set"])
try:  # models.yaml and machines.yaml are validated by their own schemas (config/*.schema.yaml)
    FOURLOOPS = smk.workflow_of(workflow, config)
except ValueError as err:  # ConfigError, MachinesError: the message names file, line, key and value
    raise WorkflowError(str(err)) from None
# The machine's torch allocator (config/machines.yaml cuda_allocator) for every job this Snakemake starts: torch's own
# variable, read where the job runs, never a param (a job checks torch took it: fourloops.gpumem.check_allocator);
# a user's own setting stands.
from fourloops.card import set_allocator_env

set_allocator_env(config["machine"], FOURLOOPS.machines)
# A precision the Hailo target cannot run is refused now, not after the compile (RFD 1165).
from fourloops.hef import precision_problem

if _precision_problem := precision_problem(config["hef"], FOURLOOPS.machines):
    raise WorkflowError(f"invalid config (nothing was run or written):\n  {_precision_problem}")
# The LoRA's resolution and target modules against the architecture descriptions, not minutes into the run.
from fourloops.lora_config import config_problems as lora_config_problems

if _lora_problems := lora_config_problems(config):
    raise WorkflowError("invalid config (nothing was run or written):\n  " + "\n  ".join(_lora_problems))
ASKS = FOURLOOPS.resources()
LINEAGE = FOURLOOPS.lineage_param()
# On the real set, the local weight directories a rule's jobs load, with their digest (a param: other weights at the
# same path stale those jobs); {} for hub ids, whose pinned commit is in the params, and on the smoke and sizing sets.
GENERATOR_WEIGHTS = model_sets.local_weights(config, "generator")
SCORER_WEIGHTS = model_sets.local_weights(config, "scorer")
# Once Snakemake's DAG has its jobs, before it decides which must run, their outputs are checked against their
# provenance records (a corrupted one reruns); a stash of last good outputs left by a killed run was settled when
# FOURLOOPS was made, before it read the records (fourloops.keep).
FOURLOOPS.check_outputs_on_the_dag()


def with_config(function):
    """A rule's input or params function of (config, wildcards), from fourloops.rule_functions, as Snakemake calls
    one: of the wildcards alone (so a params function stays in Snakemake's params trigger)."""
    return lambda wildcards: function(config, wildcards)

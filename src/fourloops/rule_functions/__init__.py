"""The rules' input and params functions, one module per rule file: rules/<file>.smk imports its own from
fourloops.rule_functions.<file> (Snakemake's linter wants no function beside a rule) and binds each to the run's
config with common.smk's `with_config`. Each is a plain function of (config, wildcards), testable without
Snakemake; a new stage adds its module here and edits no shared file.

No job's lineage holds them (`LINEAGE = False` in each): what they return is the job's inputs and params, whose
change the lineage sees there."""

LINEAGE = False  # each module's functions give a job's inputs and params, never its code

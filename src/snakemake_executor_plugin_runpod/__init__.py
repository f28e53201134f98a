"""Snakemake executor plugin: run `pod`-tagged jobs on a rented RunPod pod, everything else locally.

    snakemake --workflow-profile profiles/pod results/ladder.csv

The package holds one job per module: `settings` (the `--runpod-*` flags, machines.yaml's pod section,
their precedence and checks), `pool` (the run's pods), `transport` (ssh and rsync), `executor` (the
Executor). The REST client is `fourloops.runpod`. Here only what Snakemake's plugin interface needs.
"""

from snakemake_interface_executor_plugins.settings import CommonSettings

from .executor import Executor
from .settings import ExecutorSettings

__all__ = ["Executor", "ExecutorSettings", "common_settings"]

common_settings = CommonSettings(
    non_local_exec=True,
    implies_no_shared_fs=False,      # the local side keeps its working directory; we move files ourselves
    job_deploy_sources=False,        # sources go up once per pod by rsync, not per job as an archive
    pass_default_storage_provider_args=True,
    pass_default_resources_args=True,
    pass_envvar_declarations_to_cmd=False,  # never put environment values (secrets) on a command line
    auto_deploy_default_storage_provider=False,
    init_seconds_before_status_checks=0,
    can_transfer_local_files=True,
)

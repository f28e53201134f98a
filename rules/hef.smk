# The HEF chain (RFD 1163, RFD 1165): the detector's device half as ONNX with parity and census, the
# allowlist check and calibration frames (desk), the Dataflow Compiler in its container (HEF + HAR),
# hailortcli run2 on the USB device beside the CPU baseline (desk).
#   snakemake results/hef/rfdetr-keypoint.latency.csv
from fourloops.rule_functions.hef import hef_detector_inputs, hef_settings


rule hef_export:
    input:
        unpack(with_config(hef_detector_inputs)),
    output:
        onnx="results/hef/{model}.onnx",
        record="results/hef/{model}.export.json",
        provenance="results/provenance/hef_export/{model}.json",
    log:
        "logs/hef/{model}.export.log",
    benchmark:
        "benchmarks/hef/{model}.export.tsv"
    wildcard_constraints:
        model=config["hef"]["model"],
    params:
        detector=model_sets.detector(config),
        hef=hef_settings(config),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/hef_export.py"


rule hef_allowlist:
    input:
        onnx="results/hef/{model}.onnx",
        record="results/hef/{model}.export.json",
    output:
        allowlist="results/hef/{model}.allowlist.txt",
        provenance="results/provenance/hef_allowlist/{model}.json",
    log:
        "logs/hef/{model}.allowlist.log",
    benchmark:
        "benchmarks/hef/{model}.allowlist.tsv"
    wildcard_constraints:
        model=config["hef"]["model"],
    params:
        hef=hef_settings(config),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/hef_allowlist.py"


rule hef_calib:
    input:
        images=expand("results/render/az{az}.png", az=RENDER_TAGS),
        record="results/hef/{model}.export.json",
    output:
        frames="results/hef/calib/{model}.npy",
        provenance="results/provenance/hef_calib/{model}.json",
    log:
        "logs/hef/{model}.calib.log",
    benchmark:
        "benchmarks/hef/{model}.calib.tsv"
    wildcard_constraints:
        model=config["hef"]["model"],
    params:
        hef=hef_settings(config),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/hef_calib.py"


rule hef_compile:
    input:
        onnx="results/hef/{model}.onnx",
        allowlist="results/hef/{model}.allowlist.txt",
        frames="results/hef/calib/{model}.npy",
    output:
        hef="results/hef/{model}.hef",
        har="results/hef/{model}.har",
        provenance="results/provenance/hef_compile/{model}.json",
    log:
        "logs/hef/{model}.compile.log",
    benchmark:
        "benchmarks/hef/{model}.compile.tsv"
    wildcard_constraints:
        model=config["hef"]["model"],
    params:
        hef=hef_settings(config),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/hef_compile.py"


rule hef_run2:
    input:
        hef="results/hef/{model}.hef",
        record="results/hef/{model}.export.json",
    output:
        record="results/hef/{model}.run2.json",
        provenance="results/provenance/hef_run2/{model}.json",
    log:
        "logs/hef/{model}.run2.log",
    benchmark:
        "benchmarks/hef/{model}.run2.tsv"
    wildcard_constraints:
        model=config["hef"]["model"],
    params:
        hef=hef_settings(config),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/hef_run2.py"


rule hef_cpu_baseline:
    input:
        unpack(with_config(hef_detector_inputs)),
    output:
        record="results/hef/{model}.cpu.json",
        provenance="results/provenance/hef_cpu_baseline/{model}.json",
    log:
        "logs/hef/{model}.cpu.log",
    benchmark:
        "benchmarks/hef/{model}.cpu.tsv"
    wildcard_constraints:
        model=config["hef"]["model"],
    params:
        detector=model_sets.detector(config),
        runs=config["hef"]["latency"]["cpu_runs"],
        cpu_threads=config["hef"]["latency"]["cpu_threads"],
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: config["hef"]["latency"]["cpu_threads"]
    resources:
        **ASKS,
    script:
        "../scripts/hef_cpu_baseline.py"


rule hef_latency_table:
    input:
        device="results/hef/{model}.run2.json",
        cpu="results/hef/{model}.cpu.json",
    output:
        table="results/hef/{model}.latency.csv",
        provenance="results/provenance/hef_latency_table/{model}.json",
    log:
        "logs/hef/{model}.latency.log",
    benchmark:
        "benchmarks/hef/{model}.latency.tsv"
    wildcard_constraints:
        model=config["hef"]["model"],
    params:
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/hef_latency_table.py"

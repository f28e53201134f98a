# The camera LoRA (config lora:): records rendered from the Anny body, the instruction embeddings from the
# generator's own text encoder (its own job), and the LoRA the `lora: true` ladder conditions load.
# Resume checkpoints live in lora_checkpoints(config), outside the outputs: a killed training resumes on rerun.
from fourloops.rule_functions.lora import (
    get_lora_embeddings_params,
    get_lora_inputs,
    get_lora_records_params,
    get_lora_train_inputs,
    get_lora_train_params,
    lora_checkpoints,
    lora_record_tags,
)

LORA_NAME = config["lora"]["name"]


rule lora_records:
    output:
        records="results/lora/records.jsonl",
        images=expand("results/lora/records/az{az}.png", az=lora_record_tags(config)),
        provenance="results/provenance/lora_records/records.json",
    log:
        "logs/lora_records/records.log",
    benchmark:
        "benchmarks/lora_records/records.tsv"
    params:
        job=with_config(get_lora_records_params),
        model_set=config["model_set"],
        lineage=LINEAGE,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/lora_records.py"


rule lora_embeddings:
    input:
        unpack(with_config(get_lora_inputs)),
    output:
        embeddings="results/lora/embeddings.safetensors",
        provenance="results/provenance/lora_embeddings/embeddings.json",
    log:
        "logs/lora_embeddings/embeddings.log",
    benchmark:
        "benchmarks/lora_embeddings/embeddings.tsv"
    params:
        job=with_config(get_lora_embeddings_params),
        model_set=config["model_set"],
        lineage=LINEAGE,
        **GENERATOR_WEIGHTS,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/lora_embeddings.py"


rule lora_train:
    input:
        unpack(with_config(get_lora_train_inputs)),
    output:
        lora=protected(LORA_FILE),
        loss=f"results/lora/{LORA_NAME}.loss.csv",
        curve=report(
            f"results/lora/{LORA_NAME}.loss.png",
            caption="../report/lora_loss.rst",
            category="LoRA",
            labels={"figure": "loss"},
        ),
        provenance=f"results/provenance/lora_train/{LORA_NAME}.json",
    log:
        f"logs/lora_train/{LORA_NAME}.log",
    benchmark:
        f"benchmarks/lora_train/{LORA_NAME}.tsv"
    params:
        train=with_config(get_lora_train_params),
        checkpoint_dir=lora_checkpoints(config),
        model_set=config["model_set"],
        lineage=LINEAGE,
        **GENERATOR_WEIGHTS,
    threads: 1
    resources:
        **ASKS,
    script:
        "../scripts/lora_train.py"

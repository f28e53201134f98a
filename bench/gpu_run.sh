#!/usr/bin/env bash
# GPU jobs through Snakemake itself on one lent GPU with no network, with the sizing model set (profiles/sizing-gpu):
# the sizing builds and a probe per component (unless carried), the held-out sizing probes, then the whole DAG under
# a 24 GiB cap, asked and admitted by the desk's walls (the 24 GiB confusion matrix), the ladder's GPU jobs once more
# (repeat, when GPU_RUN_REPEAT=1; GPU_RUN_HELDOUT=0 skips the held-out probes, =after runs them after the DAG), then Qwen-Image-Edit NF4 under the cap when QWEN_SIZES names sizes; raw records to $OUT. GPU_RUN_SEEDS_LORA=1 also runs the seeds' LoRA setup under the cap (a job the desk's walls refuse).
#
# Here (with network), once: the wheels the GPU machine's own Python 3.12 + torch lacks (bench/gpu_wheels.sh), the
# pinned OmniGen2 package in .carry/omnigen2, a git bundle of HEAD (so each job's provenance names a clean commit),
# and the desk half (render and the LoRA records need anny + EGL, which the GPU machine lacks; they are desk jobs):
#   bench/gpu_wheels.sh; bench/gpu_run.sh prepare
# There:
#   bench/gpu_run.sh start            # a detached session (outlives one command's limit) runs `all`
#   bench/gpu_run.sh wait 540         # prints its log as it goes; copies the records so far to $OUT
# Carry .wheels and .carry on EVERY call to the GPU machine, and sizing on the first only: on 2026-12-02 a poll
# call that carried nothing found .carry/omnigen2 gone, and every later generator job failed to import it (`all`
# now copies the package into /tmp/site, which outlives the calls); carrying sizing again would replace the run's
# results there with this machine's. A machine idle 30 s between two calls goes back with the run on it (2026-12-04:
# twice after the first call): send the next call at once, and keep each call's output short (`wait ... > $OUT/wait.log`).
# A session's device seconds count an earlier cut-off try's (2026-12-04: 352 s were left, not 1800): read the device's
# status first, and give `wait` less than its budget_left_s (its copies to $OUT each minute are what a cut-off call keeps).
# GPU_RUN_WARMJUDGE=1 fits in one call (warmjudge below).
# GPU_RUN_JUDGE=heldout: the held-out set (`heldout` below) alone, in one call (311-371 s in the twenty-first and
# twenty-third runs): `GPU_RUN_JUDGE=heldout bench/gpu_run.sh start; bench/gpu_run.sh wait 330 > $OUT/wait.log`.
# With GPU_RUN_ALLOC_AB=generator it then runs the allocator A/B's generator half (four generator probes, not yet
# timed on a GPU): give that a second call at once, `bench/gpu_run.sh wait 420 > $OUT/wait2.log`.
# GPU_RUN_ALLOC=plain GPU_RUN_PROBE_TWICE=1 GPU_RUN_HELDOUT=0: the whole DAG's forecasts judged with probes and jobs
# under one allocator (the twenty-fourth run: 25.3 device minutes to the DAG's end, `wait` in three calls, each sent
# at once); GPU_RUN_ALLOC_AB=1 then adds about 6 more (alloc_ab), which that run's 30 held only 4 of.
# Each step logs and goes on when one fails; `all` writes $RUN/done at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
RUN=${RUN:-/tmp/gpu_run}
TARGETS=(results/ladder.csv results/drift/watercolor.csv results/grades/watercolor.csv results/hef/rfdetr-keypoint.onnx)
# --workflow-profile, not --profile: profiles/default (the desk's vram_mb=24576) would otherwise override the
# profile's resources key by key, and the walls would refuse the H200's jobs over 24 GiB
PROFILE=(--workflow-profile profiles/sizing-gpu)
# what the GPU machine's own Python 3.12 + torch lacks: one wheel each (pip download ... -d .wheels)
WHEELS=(snakemake transformers huggingface_hub peft tokenizers diffusers rfdetr supervision bitsandbytes editscore
        qwen_vl_utils json_repair omegaconf onnxoptimizer pydantic jsonschema pulp)

say() { echo "$(date -u +%H:%M:%S) == $*"; }

env_gpu() {
  export PYTHONPATH=/tmp/site:$REPO/src:$REPO/.carry/omnigen2 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
  export TOKENIZERS_PARALLELISM=false
  # GPU_RUN_ALLOC=expandable: torch's caching allocator with expandable segments for every process of the run (the
  # ninth run, 2026-12-03): torch's own setting, read where each job runs, never a param; every record says which
  # allocator it ran under (provenance `cuda_allocator`). The deprecated name, since torch 2.9.1 ignored the new
  # PYTORCH_ALLOC_CONF for CUDA (pytorch/pytorch#183387).
  case "${GPU_RUN_ALLOC:-default}" in
    default) ;;
    expandable) export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ;;
    # GPU_RUN_ALLOC=plain: torch's default allocator for every process, the h200 machine's probes too (a user's own
    # setting stands over machines.yaml's cuda_allocator), so that the probes a forecast reads ran as the jobs do
    # (the twenty-second run's probes ran under expandable segments and its desk jobs under the default allocator)
    plain) export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False ;;
    *) echo "GPU_RUN_ALLOC=$GPU_RUN_ALLOC; allowed: default, expandable, plain" >&2; exit 2 ;;
  esac
}

prepare() {
  local py=${PY:-.venv/bin/python}
  [ -d .wheels ] && [ -d .carry/omnigen2/omnigen2 ] || { echo "prepare: .wheels/ and .carry/omnigen2 first (see docs/walls.md, 'Sizing model set')" >&2; return 2; }
  local w; for w in "${WHEELS[@]}"; do
    compgen -G ".wheels/${w}-*.whl" >/dev/null || { echo "prepare: no wheel for $w in .wheels/" >&2; return 2; }
  done
  git diff --quiet HEAD -- || { echo "prepare: commit first (the run's provenance must name a clean commit)" >&2; return 2; }
  rm -f .carry/repo.bundle && git bundle create -q .carry/repo.bundle HEAD
  # the desk half, here: render and the LoRA records
  "$py" -m snakemake "${PROFILE[@]}" results/render/skeleton.json results/lora/records.jsonl
}

bundle_fetched() {  # the bundle's commit as FETCH_HEAD, in a .git made here if the copied tree has none; moves no branch
  [ -f .carry/repo.bundle ] || return 1
  git rev-parse --git-dir >/dev/null 2>&1 || git init -q .
  git fetch -q .carry/repo.bundle HEAD
}

git_ready() {  # the copied tree's .git may be missing or name another commit (2026-12-02: the one before, so
  # every record said dirty): make HEAD the bundle's commit, index and all; the tree is that commit's
  bundle_fetched && git reset -q FETCH_HEAD
}

all() {
  env_gpu
  mkdir -p "$RUN"
  say "machine (allocator: ${GPU_RUN_ALLOC:-default})"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -V; df -h "$REPO" | tail -1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .wheels/*.whl \
    || { say "wheel install failed"; touch "$RUN/done"; return 1; }
  # OmniGen2 beside the wheels: a later call that carries no .carry/omnigen2 finds it gone from the tree (the fifth
  # run of 2026-12-02: its DAG's every OmniGen2 job failed to import it), while /tmp/site stays for the session
  cp -r "$REPO/.carry/omnigen2/omnigen2" /tmp/site/ || { say "no .carry/omnigen2"; touch "$RUN/done"; return 1; }
  # compiled once here, as a user's installed packages are: with --no-compile, the first process to import each
  # package paid its compilation (the fourth run's detector probe: 12.3 s of load against 11.5-14.6 s for a whole
  # keypoints job), and the forecasts made from those probes ran long
  say "compileall"; python3 -m compileall -q -j 0 /tmp/site "$REPO/src" "$REPO/.carry/omnigen2" > /dev/null 2>&1; say "compiled"
  python3 -c 'import torch, snakemake, transformers, diffusers, bitsandbytes, omnigen2, onnxoptimizer; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  git_ready && say "code $(git rev-parse HEAD) dirty=$(git status --porcelain --untracked-files=no | wc -l)" || say "no git"
  # what this run carried from an earlier one (bench/gpu_table.py and bench/walls_fit.py leave them to that run)
  (cd "$REPO" && ls sizing/results/probe/*/*.json sizing/results/provenance/probe/*.json 2>/dev/null) > "$RUN/carried.txt"
  if [ -n "${GPU_RUN_WARMUP:-}" ]; then  # the twelfth run: OmniGen2's sizing build alone, then `warmup`
    say "the OmniGen2 sizing model, then the LoRA step probe twice"
    python3 -m snakemake "${PROFILE[@]}" results/provenance/sizing_model/omnigen2.json \
      || { say "the build failed: stop"; touch "$RUN/done"; return 1; }
    warmup; collect warmup; touch "$RUN/done"; return 0
  fi
  if [ -n "${GPU_RUN_WARMJUDGE:-}" ]; then  # the fifteenth run: the warm-up rule judged in one call (below)
    warmjudge; collect dag; touch "$RUN/done"; return 0
  fi
  if [ -n "${GPU_RUN_JUDGE:-}" ]; then  # the tenth run: OmniGen2's sizing build alone, then `judge`; nothing else
    say "the OmniGen2 sizing model, then the judging probes"
    python3 -m snakemake "${PROFILE[@]}" results/provenance/sizing_model/omnigen2.json \
      || { say "the build failed: stop"; touch "$RUN/done"; return 1; }
    # GPU_RUN_JUDGE=heldout: the run's held-out configurations instead (the thirteenth run: its machine was lost
    # after the probes, with 9 device minutes left)
    if [ "$GPU_RUN_JUDGE" = heldout ]; then heldout; else judge; fi
    collect heldout
    # then GPU_RUN_ALLOC_AB=generator: the A/B's generator half, which the twenty-fourth run's budget cut off
    [ -n "${GPU_RUN_ALLOC_AB:-}" ] && { alloc_ab; collect alloc_ab; }
    touch "$RUN/done"; return 0
  fi
  # probes carried from an earlier session on this kind of machine (sizing/results/probe/h200 with their provenance)
  # are kept: this run's seconds then judge a forecast made before them; without them, probe here first.
  local until=(); compgen -G "sizing/results/probe/h200/*.json" >/dev/null && until=(--until sizing_model)
  say "the sizing models${until:+ (builds only: the probes were carried)}, then a probe per component unless carried"
  python3 -m snakemake "${PROFILE[@]}" probe "${until[@]}" \
    || { say "sizing builds or probes failed: stop"; collect builds; touch "$RUN/done"; return 1; }
  if [ -n "${GPU_RUN_PROBE_TWICE:-}" ] && ! ((${#until[@]})); then
    # the thirteenth run: every component probe once more, the first pass kept apart (probe_warmup/). A machine's
    # first process of a model compiles kernels into on-disk caches (the twelfth run), so the first pass's first
    # items held that one-off cost, and the plan then forecast each job's warm-up from the smallest first-item
    # excess over a probe's configurations, a floor (the eleventh run: 0.001 s for the generator, whose jobs' first
    # views ran 2.2-6.1 s over their second). The second pass's records say it compiled nothing a later process
    # finds made (kernel_caches: fourloops.asks.compiled_once), and fourloops.asks then reads a job's warm-up
    # from the first configuration's excess
    say "the component probes once more; the first pass kept apart in probe_warmup/"
    first_pass_apart
    python3 -m snakemake "${PROFILE[@]}" probe --forcerun probe_model || say "the second probe pass failed"
  fi
  if ((${#until[@]})); then  # a component declared since the carried probes were made is probed here
    local missing; missing=$(python3 -c 'import os
from fourloops.stage import probed
print(" ".join(f"results/probe/h200/{c}.json" for c in probed() if not os.path.exists(f"sizing/results/probe/h200/{c}.json")))')
    if [ -n "$missing" ]; then
      say "probes not carried: $missing"
      python3 -m snakemake "${PROFILE[@]}" -- $missing || say "a probe not carried failed (its jobs keep their estimates)"
    fi
  fi
  # a LoRA step probe carried with the others (the ninth run's second call) is kept
  compgen -G "sizing/results/probe/h200/lora_step-*.json" >/dev/null || lora_probe
  if [ "${GPU_RUN_DAG:-1}" = 0 ]; then  # the probes alone (the ninth run's second call, after the first call's
    # machine was lost mid-DAG with 17 device minutes left): in-sample and held-out, no plans, no DAG
    insample; heldout; collect heldout; touch "$RUN/done"; return 0
  fi
  # the held-out probes (5.5 device minutes in the seventh run, whose DAG then ran out of the session's 30): skipped
  # with GPU_RUN_HELDOUT=0, for a session that is to finish the whole DAG; GPU_RUN_HELDOUT=after runs them after it,
  # so that a session short of minutes loses held-out probes rather than the DAG's tail
  case "${GPU_RUN_HELDOUT:-1}" in 0|after) ;; *) insample; heldout; collect heldout ;; esac
  [ -n "${GPU_RUN_SEEDS_LORA:-}" ] && cap24_refused
  say "plans before the capped run: the forecast (this machine's probes) and the desk walls' verdicts"
  python3 -m fourloops.cli plan "${PROFILE[@]}" --json "${CAPPED[@]}" > "$RUN/plan-before.json"
  python3 -m fourloops.cli plan "${PROFILE[@]}" --machine desk --json "${CAPPED[@]}" > "$RUN/plan-before-desk.json"
  say "cap 24: the DAG's GPU jobs under a 24 GiB cap, each asked and admitted by the desk's walls"
  cap24_admitted "${CAPPED[@]}"
  cp "$RUN"/plan-before*.json sizing/ 2>/dev/null
  collect dag
  # GPU_RUN_INSAMPLE=0: no in-sample probe (the eleventh run: every held-out configuration judged by the facts
  # committed before it, nothing fitted within the run)
  [ "${GPU_RUN_HELDOUT:-1}" = after ] && { [ "${GPU_RUN_INSAMPLE:-1}" = 0 ] || insample; heldout; collect heldout; }
  # the ladder's jobs forced once more (the sixth run: 6 of 6 within 20% of their first wall); 5.5 device minutes,
  # so only when asked (the seventh run left it out to fit its 30 minutes)
  [ -n "${GPU_RUN_REPEAT:-}" ] && repeat
  [ -n "${GPU_RUN_ALLOC_AB:-}" ] && { alloc_ab; collect alloc_ab; }
  # Qwen-Image-Edit last, when QWEN_SIZES names sizes: its 54 GiB sizing build and the others' do not fit the disk
  # together (the fourth run measured 512 and 768 px, the fifth 640 and 1024)
  if [ -n "${QWEN_SIZES:-}" ]; then
    rm -rf sizing/models "$RUN"/heldout/models "$RUN"/lora_probe
    qwen_image
    collect qwen
  fi
  touch "$RUN/done"
}

first_pass_apart() {  # a probe pass's records, kept apart in probe_warmup/ before the pass that replaces them
  mkdir -p "$RUN/probe_warmup"
  cp -r sizing/results/probe "$RUN/probe_warmup/results"; cp -r sizing/benchmarks/probe "$RUN/probe_warmup/benchmarks"
  cp -r sizing/results/provenance/probe "$RUN/probe_warmup/provenance"; cp -r sizing/logs/probe "$RUN/probe_warmup/logs"
}

warmjudge() {  # the warm-up rule judged within one 10-minute call (2026-12-04: two sessions lost their machine between
  # the calls of a whole-DAG run with GPU_RUN_PROBE_TWICE, each after its first call): the generator's and the
  # detector's probes twice (the first pass kept apart), then the plan from the second pass, then the ladder's
  # generate and keypoints jobs of conditions A, B and C under the 24 GiB cap, asked by the desk's walls, as in `all`.
  # Its generate jobs are the eleventh run's that ran 0.79-0.86 of their forecast, made from first-pass probes.
  local probes=(results/probe/h200/generator.json results/probe/h200/detector.json)
  local targets=(results/provenance/keypoints/A.json results/provenance/keypoints/B.json results/provenance/keypoints/C.json)
  say "warm-up judgement: the generator's and the detector's probes twice, then conditions A-C's jobs"
  python3 -m snakemake "${PROFILE[@]}" -- "${probes[@]}" || { say "builds or probes failed: stop"; return 1; }
  first_pass_apart
  python3 -m snakemake "${PROFILE[@]}" --forcerun probe_model -- "${probes[@]}" || { say "the second pass failed: stop"; return 1; }
  python3 -m fourloops.cli plan "${PROFILE[@]}" --json "${targets[@]}" > "$RUN/plan-before.json"
  cp "$RUN/plan-before.json" sizing/
  cap24_admitted "${targets[@]}"
}

cap24_admitted() {  # the targets' GPU jobs under a 24 GiB cap, each asked and admitted by the desk's walls; the log
  # (cap24-admitted.log, its exit status last) is what bench/cap24_matrix.py reads. The probes ran as the h200 machine
  # (expandable segments, config/machines.yaml), these jobs as the desk (the default allocator, unless GPU_RUN_ALLOC
  # says otherwise): the desk's walls take those probes as floors for their estimates, not as their asks (the
  # twenty-second run's generate jobs, asked from them before that rule, were 0.979-0.988 of the driver)
  FOURLOOPS_VRAM_CAP_GIB=24 python3 -m snakemake "${PROFILE[@]}" --config model_set=sizing machine=desk --resources vram_mb=24576 \
    -- "$@" > "$RUN/cap24-admitted.log" 2>&1
  echo "exit $?" >> "$RUN/cap24-admitted.log"; tail -5 "$RUN/cap24-admitted.log"
}

repeat() {  # the ladder's generator and keypoints jobs once more, forced, on the same machine with the same probes
  # (2026-12-02, sixth run): the same job's seconds twice in one session, the floor under any forecast's error (the
  # fourth and fifth runs' same generate job took 44.6 and 62.8 s, on two lent machines)
  say "repeat: the ladder's generate and keypoints jobs again (--forcerun generate), same probes, same cap"
  mkdir -p "$RUN/repeat"
  # the forced jobs' forecast: their benchmark history from the pass before (the sixth run planned without
  # --forcerun, so its repeat's plan held no job)
  python3 -m fourloops.cli plan "${PROFILE[@]}" --json --forcerun generate -- results/ladder.csv \
    > "$RUN/repeat/plan-before.json"
  FOURLOOPS_VRAM_CAP_GIB=24 timeout "${REPEAT_SECONDS:-330}" python3 -m snakemake "${PROFILE[@]}" --config \
    model_set=sizing machine=desk --resources vram_mb=24576 --forcerun generate -- results/ladder.csv \
    > "$RUN/repeat/cap24-admitted.log" 2>&1
  echo "exit $?" >> "$RUN/repeat/cap24-admitted.log"; tail -3 "$RUN/repeat/cap24-admitted.log"
  collect repeat
}

# the capped run's targets: the whole DAG, or GPU_RUN_TARGETS (2026-12-02's second run, with 20 device minutes left:
# "results/generate/D/views.json results/drift/watercolor.csv results/grades/watercolor.csv results/hef/rfdetr-keypoint.onnx")
read -r -a CAPPED <<< "${GPU_RUN_TARGETS:-${TARGETS[*]}}"

heldout() {  # configurations no fit used, chosen and committed before the run (2026-12-06, under torch's DEFAULT allocator,
  # the desk's (config/machines.yaml): judged by config/models.yaml's process_overhead as committed then,
  # bench/walls_fit.py HELDOUT_RUNS; memory: few steps and items, each in its own process). The last set ran in the
  # forty-seventh run (chosen after the forty-fifth, no fact moved; committed in e1ac8aa, which ran it; on an H100,
  # 210.7 s with setup): fp32 frozen weights with the text encoder at 640 px r4 and at 1024 px r32 (the largest step
  # the walls ask, 33.274 GiB), without it at 320 px r64 (below the training context's step); bf16 with the encoder at
  # 768 px r64. A run after it: replace the set below with configurations no record holds, chosen and committed
  # before the run; the same command is then judged by bench/walls_fit.py once its records are added there.
  # The forty-fifth run's (chosen after the forty-fourth's refit, committed in 9451d3e, run at 982abfa; on an H100):
  # fp32 frozen weights with the text encoder at 768 px r64 and 352 px r16, without it at 992 px r32 and 576 px r4;
  # bf16 with the encoder at 640 px r32.
  # The forty-fourth run's (chosen after the forty-third's refit, committed in 3533caf; on an H100): fp32 frozen
  # weights with the text encoder at 960 px r16 and 832 px r32, without it at 448 px r64.
  # The forty-third run's (chosen after the forty-second's refit, committed in 6aca52e; on an H100): fp32 frozen
  # weights with the text encoder at 1024 px r8, 704 px r16 and 576 px r64, without it at 896 px r32 and 288 px r8.
  # The forty-second run's (chosen after the fp32 step's term was fitted, 2e02eae; committed in 394f182; on an H100):
  # fp32 frozen weights at 1024 px r8 and 640 px r16, with the encoder 896 px r8 and 320 px r32; bf16 with the
  # encoder at 1024 px r8.
  # The forty-first run's (chosen after the fortieth's refit, committed in d08e785; on an H100): the LoRA step with
  # the text encoder resident in bf16 at 384 px r16 and 896 px r8 and in fp32 at 448 px r8; fp32 without it at 768 px
  # r32; the scorer at bf16 and NF4 grading 384 px images.
  # The fortieth run's (chosen after the thirty-eighth's refit, committed in 5f3772a; on an H100): what the
  # thirty-ninth did not reach: OmniGen2 bf16 288 px with 2 references and NF4 928 px with 3; LoRA 256 px r64 and
  # 1024 px r64; the scorer at bf16 grading 448 px images.
  # The thirty-ninth run's (the same set; its detector probes first, bd53257; on an H100, in part): the detector at
  # 17, 38 and 90 images a call, each in its own process, and OmniGen2 NF4 192 px (1 reference).
  # The thirty-eighth run's (chosen in 31261c0; on an H100): the detector at 13, 30, 46, 58 and 72 images a call, each
  # in its own process, and apart (control/records) 30 after 6 in one; OmniGen2 bf16 192 px (1 reference) and 480 px
  # (3), NF4 224 px (2); LoRA 336 px r4.
  # The thirty-seventh run's (chosen in 9c54c1a and widened in a269dae; on an H100): OmniGen2 bf16 224 px (2
  # references) and NF4 288 px (3), LoRA 512 px r16 and 608 px r64, the scorer at NF4 grading 448 px images, the
  # detector at 18 then 34 images a call in one process.
  # The thirty-sixth run's (chosen in f3d5b57; on an H100): bf16 256 px (3 references), LoRA 448 px r4 (alone), bf16
  # 672 px (2) with the detector at 26 images a call.
  # The thirty-fifth run's (chosen in 4f3dc66; on an H100, 7 of 9 run): OmniGen2 NF4 256 px (3 references), bf16 256 px
  # (1), bf16 352 px (2), NF4 288 px (2), bf16 608 px (3), NF4 736 px (2), bf16 992 px (1); not reached: LoRA 448 px r4,
  # bf16 672 px (2) with the detector at 26 images a call.
  # The thirty-fourth run's (chosen in e21c442; on an H100): NF4 320 px (1 reference), bf16 320 px (3), NF4 480 px (3),
  # bf16 416 px (2), NF4 672 px (1), bf16 736 px (1), bf16 864 px (2), NF4 864 px (3).
  # The thirty-third run's (chosen in c056afa; on an H100): OmniGen2 at 448 px with 1 reference, NF4 and bf16; NF4 544
  # px (1); bf16 544 px (2); NF4 608 px (2); NF4 992 px (1); bf16 384 px (3); NF4 384 px (2).
  # The thirty-second run's (chosen in 1aecbd6; on an H100): NF4 512 px (1 reference) with LoRA 992 px r8, NF4 704 px
  # (2), bf16 800 px (2), the scorer at bf16 grading 576 px, bf16 928 px (3) with the detector at 11 and 52 images.
  # The thirty-first run's (chosen in b2d7299; on an H100): NF4 576 px (1 reference) with LoRA 608 px r8, the detector
  # at 7 and 9 images a call.
  # The thirtieth run's (chosen in db1d76b; on an H100): bf16 576 px (3 references) with LoRA 736 px r16, NF4 832 px
  # (1), NF4 800 px (2), the scorer at NF4 grading 832 px, bf16 928 px (1) with the detector at 14 and 44 images a call.
  # The twenty-ninth run's (chosen in 72690df; on an H100): NF4 960 px (1 reference) with LoRA 864 px r32, NF4 512 px
  # (2), the scorer at bf16 grading 800 px, NF4 768 px (1) with the detector at 5 and 36 images a call.
  # The twenty-eighth run's (chosen in 1728254; on an H100, 3 of 9 run): NF4 640 px (1 reference) with LoRA 672 px
  # r16, NF4 896 px (2) (its LoRA 864 px r32 cut off), and, not run, the scorer at bf16 grading 800 px, NF4 960 px (1)
  # with the detector at 5 and 36 images a call.
  # The twenty-seventh run's (chosen in 423cc6a; run on an H100 80GB HBM3): NF4 704 px (1 reference) with LoRA 480 px
  # r16, bf16 640 px (2) with LoRA 800 px r32, the scorer at NF4 grading 704 px, bf16 832 px (1) with the detector at
  # 10 and 28 images a call.
  # The twenty-sixth run's (chosen in 4dc3ac7 and 5fdd309; run on an H100 80GB HBM3, no H200 being lent): NF4 960 px
  # (3 references) with LoRA 544 px r32, NF4 832 px (2) with LoRA 928 px r16, the scorer at bf16 grading 896 px, bf16
  # 576 px (1).
  # The twenty-fifth run's (chosen in 121c250): bf16 768 px (2 references) with LoRA 704 px r32, NF4 1024 px (2) with
  # LoRA 384 px r32, the scorer at NF4 grading 960 px images.
  # The twenty-third run's (chosen in 22d7642): bf16 960 px (1 reference) with LoRA 896 px r64, NF4 896 px (3) with
  # LoRA 320 px r32, the scorer at bf16 grading 640 px images.
  # The twenty-first run's (chosen in 5842530 and 8c2caba): bf16 768 px (1 reference) with LoRA 1024 px r32, bf16
  # 832 px (3) with LoRA 416 px r64, the scorer at NF4 grading 1024 px images.
  # The twentieth run's (chosen in 5842530): 896 (bf16, 3 references), 832 (nf4, 3), LoRA 352 r32 and 704 r64. The
  # nineteenth run's (chosen in 2612e86): 576 (bf16, 2 references), 704 (nf4, 3), 1024 (bf16, 1), LoRA 288 r8,
  # 832 r64 and 576 r32. The eighteenth run's (chosen for the seventeenth, in d2eb350): 1024 (bf16, 3 references) and
  # 960 (nf4, 2), 704 (bf16, 1), LoRA 960 r4, 640 r64 and 320 r64.
  # The fourteenth run's (expandable segments) were 1024 (nf4, 1 reference) and 832 (bf16, 3), LoRA 768 r64 and 1024 r4.
  # The thirteenth run's were 1024 (bf16, 1 reference) and 768 (nf4, 2), LoRA 512 r4 and r64; the eleventh run's 640
  # (bf16, 2 references) and 576 (nf4, 1), the scorer at 640 and 576, the detector at 16
  # and 40, LoRA 352 r8, 416 r16, 640 r8 and 896 r32; the ninth run's 576 (bf16, 3 references) and 704 (nf4, 3), the
  # scorer at 576 and 704, the detector at 10 and 28, LoRA 320 r16 and 736 r32; the eighth run's 704 (bf16, 3
  # references) and 800 (nf4, 1), the scorer at 704 and 800, the detector at 20 and 64, LoRA 448 r32 and 832 r8; the
  # seventh run's 960 (bf16, 3 references) and 576 (nf4, 2), the scorer at 960 and 576, the detector at 6 and 48, LoRA
  # 576 r16 and 960 r32; the sixth run's 832 (bf16, 2 references) and 896 (nf4), the scorer at 832 and 896, the
  # detector at 12 and 40, LoRA 704 r8 and 1024 r16; the fifth run's 640 px (generator, scorer), the detector at 3 and
  # 24, LoRA 896 r16 and 512 r32.
  say "held-out probes"
  local work=$RUN/heldout; mkdir -p "$work/models"
  ln -sfn "$REPO/sizing/models/sizing/omnigen2" "$work/models/omnigen2"
  local base=(--work "$work" --out "$RUN/heldout/records" --timeout 300 --steps 4 --scorer-precisions)
  local common=("${base[@]}" --no-detector)
  python3 bench/sizing_gpu.py "${common[@]}" --items 1 --omnigen2-precisions --lora-steps fp32:resident:640:4 \
    fp32:precomputed:320:64 fp32:resident:1024:32 bf16:resident:768:64
}

judge() {  # configurations neither the ninth run nor any fit under expandable segments saw, chosen and committed
  # before the run (2026-12-03, tenth run: the 7 device minutes left), judged by config/models.yaml's
  # process_overhead_expandable as committed then (bench/walls_fit.py EXPANDABLE_JUDGED): LoRA steps at 256 px rank 8
  # (the default allocator's records held their largest context there), 384 px rank 16 and 448 px rank 32; OmniGen2
  # bf16 at 640 px with 2 references and NF4 at 576 px with 1
  say "judging probes (expandable segments)"
  local work=$RUN/heldout; mkdir -p "$work/models"
  ln -sfn "$REPO/sizing/models/sizing/omnigen2" "$work/models/omnigen2"
  local common=(--work "$work" --out "$RUN/heldout/records" --timeout 120 --steps 4 --scorer-precisions --no-detector)
  python3 bench/sizing_gpu.py "${common[@]}" --items 4 --omnigen2-precisions \
    --lora-steps bf16:precomputed:256 bf16:precomputed:384:16 bf16:precomputed:448:32
  python3 bench/sizing_gpu.py "${common[@]}" --size 640 --items 1 --references 2 --omnigen2-precisions bf16 --lora-steps
  python3 bench/sizing_gpu.py "${common[@]}" --size 576 --items 1 --references 1 --omnigen2-precisions nf4 --lora-steps
}

alloc_ab() {  # does torch's allocator change a job's seconds? (the twenty-second run: the detector probe, under
  # expandable segments, loaded in 9.1 and 10.3 s; the keypoints jobs after it, under the default allocator, in 5.9-6.8 s;
  # the generator's 15.3 s against 11.7-14.3). The same probes, each in its own process, the allocators alternating:
  # the detector three times each, then the generator (bf16, 512 px, 1 reference, 8 steps) twice each
  if [ "${GPU_RUN_ALLOC_AB:-}" = generator ]; then say "allocator A/B: the generator's probes, each allocator in turn"
  else say "allocator A/B: the detector's and the generator's probes, each allocator in turn"; fi
  local work=$RUN/alloc_ab; mkdir -p "$work/models"
  ln -sfn "$REPO/sizing/models/sizing/omnigen2" "$work/models/omnigen2"
  local common=(--work "$work" --timeout 120 --scorer-precisions --lora-steps)
  local i a; [ "${GPU_RUN_ALLOC_AB:-}" = generator ] || for i in 1 2 3; do for a in True False; do
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:$a python3 bench/sizing_gpu.py "${common[@]}" \
      --out "$RUN/alloc_ab/records/detector-$i-expandable_$a" --items 3 --omnigen2-precisions
  done; done
  for i in 1 2; do for a in True False; do
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:$a python3 bench/sizing_gpu.py "${common[@]}" --no-detector \
      --out "$RUN/alloc_ab/records/generator-$i-expandable_$a" --items 3 --steps 8 --size 512 --references 1 \
      --omnigen2-precisions bf16
  done; done
}

warmup() {  # is the LoRA step probe's slow first step (14.4 s against 0.44 s steady in the eleventh run; the job's
  # first optimizer step, 2 micro-steps, 7.9 s) paid once per process or once per machine? The same probe twice, each
  # in its own process, with the sizes of the on-disk kernel caches a first process could fill (CUDA's JIT cache,
  # Triton's, torch's inductor) before, between and after
  say "warm-up: the LoRA step probe twice, each in its own process"
  local work=$RUN/warmup; mkdir -p "$work/models"
  ln -sfn "$REPO/sizing/models/sizing/omnigen2" "$work/models/omnigen2"
  local i; for i in 1 2 3; do
    du -sk ~/.nv/ComputeCache ~/.triton /tmp/torchinductor_* 2>/dev/null | sed "s/^/cache before probe $i: /"
    [ "$i" = 3 ] && break
    python3 bench/sizing_gpu.py --work "$work" --out "$RUN/warmup/records/$i" --timeout 120 --items 4 \
      --omnigen2-precisions --scorer-precisions --no-detector --lora-steps bf16:precomputed:512:8
  done
}

insample() {  # configurations the facts were fitted at, under this run's allocator, beside the DAG's own jobs: the
  # NF4 generator at 512 px with 3 references (no DAG job runs an NF4 generator, and the in-sample records of a run
  # under another allocator than the earlier runs' are this run's own)
  say "in-sample probes (the NF4 generator at 512 px)"
  local work=$RUN/insample; mkdir -p "$work/models"
  ln -sfn "$REPO/sizing/models/sizing/omnigen2" "$work/models/omnigen2"
  python3 bench/sizing_gpu.py --work "$work" --out "$RUN/insample/records" --timeout 300 --steps 4 --size 512 \
    --items 1 --references 3 --omnigen2-precisions nf4 --scorer-precisions --no-detector --lora-steps
}

lora_probe() {  # the LoRA step at the run's own settings (bf16 frozen, embeddings precomputed, 512 px, rank 8), timed
  # on this machine beside the probe rule's records, so that the plan forecasts lora_train from a probe (the probe
  # rule has no LoRA job: bench/sizing_gpu.py measures it through fourloops.lora.train, the job's own code)
  say "lora step probe (the run's LoRA settings) into sizing/results/probe/h200"
  local work=$RUN/lora_probe; mkdir -p "$work/models"
  ln -sfn "$REPO/sizing/models/sizing/omnigen2" "$work/models/omnigen2"
  # once first, kept apart (lora_warmup/): a machine's first LoRA process compiles kernels it caches on disk (the
  # twelfth run: first step 19.31 s in the first process, 5.58 s in the next; CUDA's JIT cache and Triton's filled
  # during the first only), which the DAG's lora_train, a later process, does not pay; the plan reads the second
  python3 bench/sizing_gpu.py --work "$work" --out "$RUN/lora_warmup/records" --timeout 300 --items 2 \
    --omnigen2-precisions --scorer-precisions --no-detector --lora-steps bf16:precomputed:512:8
  python3 bench/sizing_gpu.py --work "$work" --out "$REPO/sizing/results/probe/h200" --timeout 300 --items 4 \
    --omnigen2-precisions --scorer-precisions --no-detector --lora-steps bf16:precomputed:512:8
}

cap24_refused() {  # the seeds' LoRA setup: the desk's walls refuse it; run capped on this card, it must fail
  say "cap 24: a job the desk walls refuse (the seeds' LoRA setup), run capped on this card"
  python3 -m fourloops.cli plan "${PROFILE[@]}" --machine desk --json --configfile profiles/sizing-gpu/run.yaml \
    profiles/sizing-gpu/seeds-lora.yaml -- results/lora/camera.safetensors \
    > "$RUN/cap24-refused-plan.json" 2>"$RUN/cap24-refused-plan.err"
  FOURLOOPS_VRAM_CAP_GIB=24 python3 -m snakemake "${PROFILE[@]}" --configfile profiles/sizing-gpu/run.yaml \
    profiles/sizing-gpu/seeds-lora.yaml -- results/lora/camera.safetensors > "$RUN/cap24-refused.log" 2>&1
  echo "exit $?" >> "$RUN/cap24-refused.log"; tail -5 "$RUN/cap24-refused.log"
  # its outputs are the seeds' LoRA's, not the run's: out of the way of the capped DAG
  rm -rf sizing/results/lora/camera.safetensors sizing/results/lora/.camera*
}

qwen_image() {  # Qwen-Image-Edit-Plus (54 GiB on disk), NF4 under the 24 GiB cap at QWEN_SIZES (the fifth run: 640 and
  # 1024 px; the walls' verdicts are in plan-qwen.txt, made here before they run). The third run
  # measured NF4 uncapped and bf16 capped, the fourth NF4 capped at 512 and 768.
  say "qwen_image_edit_plus: nf4 under a 24 GiB cap, $QWEN_SIZES px"
  local work=$RUN/qwen; mkdir -p "$work/models"
  local size; for size in $QWEN_SIZES; do
    python3 -c "import sys, yaml; sys.path.insert(0, 'src'); from fourloops import asks
f = asks.load_facts('config/models.yaml')
a = asks.generator_ask(f, {'backend': 'qwen_image_edit_plus', 'precision': 'nf4', 'size': $size, 'device': 'cuda'})
print('qwen_image_edit_plus nf4 $size px: VRAM asked', round(a.vram.value, 3), 'GiB:', a.vram.source)" >> "$RUN/qwen/plan-qwen.txt" 2>&1
    FOURLOOPS_VRAM_CAP_GIB=24 python3 bench/sizing_gpu.py --work "$work" --out "$RUN/qwen/records/$size" \
      --omnigen2-precisions --scorer-precisions --no-detector --qwen-image-edit --only generator-qwen_image_edit_plus-nf4 \
      --size "$size" --steps 4 --items 1 --references 1 --timeout 300
  done
  cat "$RUN/qwen/plan-qwen.txt"
}

collect() {  # what comes back: records, logs, benchmarks, tables (no images, no models)
  local name=$1
  say "collect $name"
  tar -czf "$RUN/$name.tar.gz" --exclude='*.png' --exclude='*.onnx' --exclude='*.npy' --exclude='*.safetensors' \
    -C "$REPO" sizing/results sizing/logs sizing/benchmarks -C "$RUN" $(cd "$RUN" && ls -d carried.txt plan-before*.json probe_warmup heldout/records control/records insample/records warmup/records lora_warmup/records alloc_ab/records qwen/records qwen/plan-qwen.txt cap24-* repeat 2>/dev/null) 2>/dev/null
  ls -la "$RUN"/*.tar.gz
}

check() {  # the bundle `prepare` made must be the carried tree's commit: a commit after `prepare` (2026-12-06, the
  # thirty-sixth run: the test suite's change, committed while the device was refused) makes every record name the
  # bundle's commit, dirty. Refused in seconds, before any device minute goes to a run whose records say so.
  # (FETCH_HEAD alone: moves no branch, wherever it runs.) The tree against the bundle's commit in an index of its
  # own: the copied tree's .git may hold an index of another commit, where files added since read as differing
  # (2026-12-06, the thirty-eighth run's first start was refused so: every file its commit added)
  bundle_fetched || return 0
  local idx changed; idx=$(mktemp)
  changed=$(GIT_INDEX_FILE=$idx git read-tree FETCH_HEAD && GIT_INDEX_FILE=$idx git update-index -q --refresh >/dev/null
            GIT_INDEX_FILE=$idx git diff-files --name-only); rm -f "$idx"
  if [ -n "$changed" ]; then
    echo "STALE BUNDLE: the tree is not .carry/repo.bundle's commit $(git rev-parse --short FETCH_HEAD); it differs in:" >&2
    echo "$changed" | head -5 >&2
    echo "run bench/gpu_run.sh prepare after the last commit, then start again" >&2
    return 2
  fi
  echo "the tree is .carry/repo.bundle's commit $(git rev-parse --short FETCH_HEAD)"
}

start() {
  check || return
  mkdir -p "$RUN"; rm -f "$RUN/done"
  # a token in the run's working directory, kept apart too: `wait` tells a sizing/ that a later call's carry replaced
  # (2026-12-04, the seventeenth run: a poll call that carried sizing took the working directory from under its last
  # job, whose script was gone, and every later step read this machine's files)
  mkdir -p sizing && date +%s%N | tee "$RUN/sizing.token" > sizing/.gpu_run_token
  setsid nohup bash "$0" "${GPU_RUN_MODE:-all}" > "$RUN/log" 2>&1 < /dev/null &
  echo "started $!"
}

wait_run() {  # print the log while it grows, until done or $1 seconds; then copy the records to $OUT
  local until=$(( $(date +%s) + ${1:-540} )) seen=0
  # no run on this machine (the machine was given back between two calls, and this one is fresh): say so at once
  # instead of polling a log that will never come (the thirteenth run lost 9 device minutes so)
  [ -f "$RUN/log" ] || { echo "NO RUN HERE: $RUN/log is missing (a fresh machine?)"; return 3; }
  # the run's working directory replaced by this call's carry: its jobs lost their files, and what `collect` would
  # read is this call's copy, not the run's. Say so and bring back the log alone
  if [ -f "$RUN/sizing.token" ] && ! cmp -s "$RUN/sizing.token" sizing/.gpu_run_token; then
    echo "SIZING REPLACED: this call carried sizing/ over the run's working directory (carry .wheels and .carry only"
    echo "after the first call); the run is broken from here: start it again on a fresh machine"
    [ -n "${OUT:-}" ] && cp "$RUN/log" "$OUT"/ 2>/dev/null; return 4
  fi
  # every minute, what the jobs wrote so far goes to $OUT as well: a call cut off before its `wait` ends (2026-12-04,
  # the sixteenth run: the session's device seconds ran out 325 s in, under a wait of 578) still brings back what a
  # killed command leaves under $OUT
  local next_copy=$(( $(date +%s) + 60 ))
  while [ ! -f "$RUN/done" ] && [ "$(date +%s)" -lt "$until" ]; do
    sleep 10
    local n; n=$(wc -l < "$RUN/log"); [ "$n" -gt "$seen" ] && sed -n "$((seen+1)),${n}p" "$RUN/log" | grep -v "^    \|^$" | cut -c1-300; seen=$n
    if [ -n "${OUT:-}" ] && [ "$(date +%s)" -ge "$next_copy" ]; then
      if [ -f "$RUN/timeline.txt" ]; then repro_collect sofar >/dev/null 2>&1; else collect sofar >/dev/null 2>&1; fi
      cp "$RUN/sofar.tar.gz" "$RUN/log" "$OUT"/ 2>/dev/null
      next_copy=$(( $(date +%s) + 60 ))
    fi
  done
  [ -f "$RUN/done" ] && echo "RUN DONE" || echo "RUN STILL GOING"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader
  if [ ! -f "$RUN/done" ]; then  # what the jobs wrote so far, should the session end mid-run
    if [ -f "$RUN/timeline.txt" ]; then repro_collect sofar >/dev/null; else collect sofar >/dev/null; fi
  fi
  [ -n "${OUT:-}" ] && cp "$RUN"/*.tar.gz "$RUN/log" "$OUT"/ 2>/dev/null; true
}

machine_ready() {  # the wheels, OmniGen2 and the code's commit on a fresh GPU machine
  say "machine (allocator: ${GPU_RUN_ALLOC:-default})"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -V
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .wheels/*.whl \
    || { say "wheel install failed"; return 1; }
  cp -r "$REPO/.carry/omnigen2/omnigen2" /tmp/site/ || { say "no .carry/omnigen2"; return 1; }
  say "compileall"; python3 -m compileall -q -j 0 /tmp/site "$REPO/src" "$REPO/.carry/omnigen2" > /dev/null 2>&1
  python3 -c 'import torch, snakemake, transformers, diffusers, bitsandbytes, omnigen2; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  git_ready && say "code $(git rev-parse HEAD) dirty=$(git status --porcelain --untracked-files=no | wc -l)" || say "no git"
}

fresh() {  # a fresh working directory holding only what the GPU machine cannot make (the desk half: renders and the
  # LoRA records, made by `prepare`) and the sizing builds (hard links): every GPU job of the DAG runs in it
  local w=$1; rm -rf "$w"; mkdir -p "$w/results/provenance" "$w/results/lora" "$w/.snakemake"
  cp -al sizing/models "$w/"; cp -al sizing/results/render "$w/results/"; cp -al sizing/results/lora/records* "$w/results/lora/"
  local r; for r in render lora_records sizing_model; do cp -al "sizing/results/provenance/$r" "$w/results/provenance/"; done
  cp -r sizing/.snakemake/metadata "$w/.snakemake/"; cp sizing/.fourloops-model-set "$w/" 2>/dev/null; true
}

listing() {  # every output's sha256 under a working directory's results/ (the raw evidence the compare table reads)
  (cd "$1" && find results -type f ! -path '*/.*' | LC_ALL=C sort | xargs sha256sum) > "$2"
}

repro_collect() {  # records, logs, listings, traces, tables: no images, models or tensors
  local name=${1:-repro}
  tar -czf "$RUN/$name.tar.gz" --exclude='*.png' --exclude='*.onnx' --exclude='*.npy' --exclude='*.safetensors' \
    --exclude='models' --exclude='.snakemake' -C "$RUN" $(cd "$RUN" && ls -d trace listing-* compare* pair-*.log cost-*.log batch-*.log lora-*.log timeline.txt w*/results w*/logs w*/benchmarks 2>/dev/null) 2>/dev/null
  ls -la "$RUN/$name.tar.gz"
}

repro() {  # the reproducibility pair and what determinism and batching cost, in one detached session on one GPU
  env_gpu; mkdir -p "$RUN"; : > "$RUN/timeline.txt"
  mark() { echo "$(date +%s) $*" >> "$RUN/timeline.txt"; say "$*"; }
  machine_ready || { touch "$RUN/done"; return 1; }
  mark "builds: the sizing models (OmniGen2, detector, scorer) in sizing/"
  python3 -m snakemake "${PROFILE[@]}" -- results/provenance/sizing_model/omnigen2.json \
    results/provenance/sizing_model/detector.json results/provenance/sizing_model/scorer.json \
    > "$RUN/builds.log" 2>&1 || { mark "builds failed"; tail -30 "$RUN/builds.log"; repro_collect; touch "$RUN/done"; return 1; }
  mark "trace: the generate path and a LoRA step, two processes with the settings off, then two on"
  mkdir -p "$RUN/trace"
  local m i; for m in off on; do
    for i in 1 2; do FOURLOOPS_DETERMINISM=$m timeout 240 python3 bench/repro_trace.py --model sizing/models/sizing/omnigen2 \
      --out "$RUN/trace/$m-$i.json" > "$RUN/trace/$m-$i.log" 2>&1; tail -2 "$RUN/trace/$m-$i.log"; done
    python3 bench/repro_trace.py --compare "$RUN/trace/$m-1.json" "$RUN/trace/$m-2.json" > "$RUN/trace/compare-$m.json" 2>&1
    head -c 1500 "$RUN/trace/compare-$m.json"; echo
    [ "${GPU_RUN_TRACE_ON:-1}" = 0 ] && break
  done
  repro_collect sofar
  mark "pair: the sizing DAG in two fresh working directories, two snakemake runs side by side"
  fresh "$RUN/w1"; fresh "$RUN/w2"
  for i in 1 2; do (FOURLOOPS_MACHINE=h200_pair python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w$i" -- "${TARGETS[@]}" \
    > "$RUN/pair-$i.log" 2>&1; echo "exit $?" >> "$RUN/pair-$i.log") & done; wait
  tail -2 "$RUN/pair-1.log" "$RUN/pair-2.log"
  listing "$RUN/w1" "$RUN/listing-1.txt"; listing "$RUN/w2" "$RUN/listing-2.txt"
  python3 -m fourloops.cli compare "$RUN/w1" "$RUN/w2" --markdown "$RUN/compare-pair.md" > "$RUN/compare-pair.txt" 2>&1
  echo "compare exit $?" >> "$RUN/compare-pair.txt"; tail -5 "$RUN/compare-pair.txt"
  python3 -m fourloops.cli compare --list "$RUN/w1" > "$RUN/listing-1.json" 2>/dev/null
  python3 -m fourloops.cli compare --list "$RUN/w2" > "$RUN/listing-2.json" 2>/dev/null
  mark "pair done"; repro_collect sofar
  # what the settings cost: each GPU rule's job alone, forced in w1, with the settings off, then on, then off again
  local cost=(results/generate/A/views.json results/lora/embeddings.safetensors results/lora/camera.safetensors
              results/keypoints/A/az045.json results/grades/watercolor.csv)
  for m in off on; do
    mark "cost: GPU jobs with FOURLOOPS_DETERMINISM=$m"
    FOURLOOPS_DETERMINISM=$m python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w1" \
      --forcerun generate lora_embeddings lora_train keypoints_generated grades -- "${cost[@]}" > "$RUN/cost-$m.log" 2>&1
    echo "exit $?" >> "$RUN/cost-$m.log"; mkdir -p "$RUN/cost-$m"; cp -r "$RUN/w1/results/provenance" "$RUN/cost-$m/"
  done
  listing "$RUN/w1" "$RUN/listing-1-after-cost.txt"; repro_collect sofar
  # batching: the LoRA at one sample a forward and at auto (the effective batch of 8 in one), then condition A's and
  # C's views at the default config (8 views, 28 steps) at one a call and at auto; each pair alone, fresh directories
  for i in 3 4; do fresh "$RUN/w$i"; mkdir -p "$RUN/w$i/results/provenance/lora_embeddings"
    rm -rf "$RUN/w$i/.snakemake/metadata"; cp -r "$RUN/w1/.snakemake/metadata" "$RUN/w$i/.snakemake/"
    cp -al "$RUN/w1/results/lora/embeddings.safetensors" "$RUN/w$i/results/lora/"
    cp -al "$RUN/w1/results/provenance/lora_embeddings/." "$RUN/w$i/results/provenance/lora_embeddings/"; done
  local before=(--configfile profiles/sizing-gpu/run.yaml profiles/sizing-gpu/batching-before.yaml)
  local after=(--configfile profiles/sizing-gpu/run.yaml profiles/sizing-gpu/batching-after.yaml)
  mark "lora: micro-batch 1 (w3), then auto (w4)"
  python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w3" "${before[@]}" -- results/lora/camera.safetensors > "$RUN/lora-before.log" 2>&1
  python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w4" "${after[@]}" -- results/lora/camera.safetensors > "$RUN/lora-after.log" 2>&1
  repro_collect sofar
  local c; for c in A C; do
    mark "batch: condition $c at one view a call (w3), then auto (w4)"
    python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w3" "${before[@]}" -- "results/generate/$c/views.json" > "$RUN/batch-$c-before.log" 2>&1
    python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w4" "${after[@]}" -- "results/generate/$c/views.json" > "$RUN/batch-$c-after.log" 2>&1
    repro_collect sofar
  done
  listing "$RUN/w3" "$RUN/listing-3.txt"; listing "$RUN/w4" "$RUN/listing-4.txt"
  python3 -m fourloops.cli compare "$RUN/w3" "$RUN/w4" --markdown "$RUN/compare-batch.md" > "$RUN/compare-batch.txt" 2>&1
  python3 - "$RUN" > "$RUN/compare-batch-images.txt" 2>&1 <<'PY'
import sys, numpy as np
from pathlib import Path
from PIL import Image
run = Path(sys.argv[1])
for png in sorted((run / "w3/results/generate").rglob("*.png")):
    other = run / "w4" / png.relative_to(run / "w3")
    a, b = np.asarray(Image.open(png)).astype(int), np.asarray(Image.open(other)).astype(int)
    d = np.abs(a - b)
    print(png.relative_to(run / "w3"), "equal" if not d.any() else f"max {d.max()} mean {d.mean():.4f}")
PY
  cat "$RUN/compare-batch-images.txt"
  mark "done"; repro_collect; touch "$RUN/done"
}

case "${1:-}" in
  prepare) prepare ;;
  all) all ;;
  repro) repro ;;
  start) start ;;
  check) check ;;
  wait) wait_run "${2:-540}" ;;
  *) echo "usage: bench/gpu_run.sh prepare | check | start | wait [seconds] | all" >&2; exit 2 ;;
esac

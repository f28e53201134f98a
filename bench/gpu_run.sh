#!/usr/bin/env bash
# The workflow's GPU jobs through Snakemake itself on one lent GPU with no network, with the sizing model set
# (profiles/sizing-gpu: the configured models at their real shapes with random weights), raw records to $OUT.
# Three modes (GPU_RUN_MODE, for `start`):
#   all      the whole DAG: the sizing builds and a probe per component (probes carried from an earlier session on
#            this kind of machine are kept), the LoRA step probe, the plans, then every GPU job under a 24 GiB cap,
#            asked and admitted by the desk's walls (the 24 GiB confusion matrix: bench/cap24_matrix.py)
#   heldout  the OmniGen2 build, then the held-out set: bench/results/heldout.yaml's `next: true` entry, whose
#            configurations no record holds and which is committed before the run (bench/walls_fit.py judges it)
#   repro    the reproducibility pair: the trace of the generate path and a LoRA step (bench/repro_trace.py;
#            GPU_RUN_TRACE=0 skips), the sizing DAG twice in two fresh working directories side by side, compared
#            (fourloops compare); each GPU rule's job alone with the determinism settings off, then on
#            (GPU_RUN_COST=0 skips; GPU_RUN_COST_ROUNDS=N repeats the pair of runs N times, interleaved); the LoRA step's attention variants on padded prompts (GPU_RUN_LORA_ATTENTION=1);
#            views with the jobs' settings and kernels against all off, one process (GPU_RUN_VIEWS_COST=1).
#            GPU_RUN_RUNS=1 makes one run instead of two, of GPU_RUN_TARGETS (default: the DAG's targets) after
#            the builds GPU_RUN_BUILDS names: the half of a comparison across machine kinds. The first run's
#            artifacts under GPU_RUN_ARTIFACTS come back in parts, for `fourloops compare --across-machines`
#   twice    one GPU job (GPU_RUN_TARGET, default condition A's views; GPU_RUN_RULE, default generate) at auto,
#            twice, each in a fresh working directory alone on the card, compared (fourloops compare); then once more
#            in the first with the settings off, forced: whether the job writes the same bytes, and what they cost it
#   batching what the LoRA step's determinism settings cost (bench/determinism_cost.py, its samples' prompts padded:
#            GPU_RUN_PROMPT_LENGTHS, default "22 23 24 25"; GPU_RUN_ABLATE=0 skips,
#            =generate: the generate path's views strict and fused instead, =both: the two), GPU_RUN_JOBS=0 stops before the jobs,
#            probes of the batched path (GPU_RUN_PROBES=0 skips), the LoRA and condition A's views one item a call
#            and at auto (profiles/sizing-gpu/batching-*.yaml), compared; the images and tensors come back in parts.
#            GPU_RUN_CONDITIONS (default "A") names the conditions whose views run both ways; GPU_RUN_LORA_MICRO4=1 adds
#            the LoRA at 4 samples a forward (w5, profiles/sizing-gpu/batching-micro4.yaml), a wall no record measured;
#            GPU_RUN_FLOPS=1 the transformer's forwards' FLOPs over their seconds (bench/forward_flops.py), before the
#            jobs; GPU_RUN_LORA=0 leaves the LoRA's jobs out (the conditions' views alone, for conditions without it);
#            GPU_RUN_SCORER=1 builds the sizing scorer and probes it at one question and 8 a call
#            (profiles/sizing-gpu/batching-scorer.yaml) into probes/, for the pod bill's grades job;
#            GPU_RUN_ATTENTION names the LoRA step's attention variants timed with the settings on (default: torch),
#            e.g. "torch cudnn-frontend", which needs the nvidia-cudnn-frontend wheel: GPU_RUN_EXTRA_WHEELS names a
#            folder whose wheels are installed when the batching run starts (a later call may carry it, when the
#            first call's 64 MB are spent):
#              pip download --no-deps nvidia-cudnn-frontend==1.32.0 --python-version 3.12 --only-binary=:all: \
#                --platform manylinux_2_28_x86_64 -d .gpu/wheels-extra
#
# Here (with network), once: the wheels the GPU machine's Python lacks (bench/gpu_wheels.sh), the pinned OmniGen2
# package in .carry/omnigen2, then `prepare`: a git bundle of HEAD (each job's provenance names a clean commit) and
# the desk half (render and the LoRA records need anny and EGL, which the GPU machine lacks):
#   bench/gpu_wheels.sh; bench/gpu_run.sh prepare
# There: carry .wheels, .carry and sizing on the first call, and nothing on the next (sizing/ is the run's working
# directory: a carried copy would replace it under the running jobs; `wait` says so):
#   GPU_RUN_MODE=all bench/gpu_run.sh start     # a detached session (it outlives one command's limit)
#   bench/gpu_run.sh wait 540                   # prints the log as it goes; copies the records so far to $OUT
# A call carries at most 64 MB (the tracked tree with what it names): where .wheels takes it over, the batching
# mode imports neither the detector's nor (without GPU_RUN_SCORER=1) the scorer's packages (rfdetr, supervision,
# editscore, qwen_vl_utils, json_repair) nor onnxoptimizer, so their wheels can stay behind for it.
# A machine idle 30 s between two calls goes back with the run on it: send the next call at once. GPU_RUN_ALLOC
# picks torch's allocator for every process (default: the machines' own; expandable; plain).
# Each step logs and goes on when one fails; the run writes $RUN/done at its end.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
RUN=${RUN:-/tmp/gpu_run}
TARGETS=(results/ladder.csv results/drift/watercolor.csv results/grades/watercolor.csv results/hef/rfdetr-keypoint.onnx)
# --workflow-profile, not --profile: profiles/default (the desk's vram_mb=24576) would otherwise override the
# profile's resources key by key, and the walls would refuse the lent card's jobs over 24 GiB
PROFILE=(--workflow-profile profiles/sizing-gpu)
# what the GPU machine's own Python + torch lacks: one wheel each (bench/gpu_wheels.sh)
WHEELS=(snakemake transformers huggingface_hub peft tokenizers diffusers rfdetr supervision bitsandbytes editscore
        qwen_vl_utils json_repair omegaconf onnxoptimizer pydantic jsonschema pulp)

say() { echo "$(date -u +%H:%M:%S) == $*"; }

env_gpu() {
  export PYTHONPATH=/tmp/site:$REPO/src:$REPO/.carry/omnigen2 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
  export TOKENIZERS_PARALLELISM=false
  # torch's allocator for every process of the run, probes included (a user's own setting stands over
  # machines.yaml's cuda_allocator; every record says which it ran under: provenance `cuda_allocator`). The
  # deprecated variable: torch ignores PYTORCH_ALLOC_CONF for CUDA (pytorch/pytorch#183387).
  case "${GPU_RUN_ALLOC:-default}" in
    default) ;;
    expandable) export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ;;
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

git_ready() {  # the copied tree's .git may be missing or name another commit (every record would then say dirty):
  # make HEAD the bundle's commit, index and all; the tree is that commit's
  bundle_fetched && git reset -q FETCH_HEAD
}

all() {
  env_gpu; mkdir -p "$RUN"
  machine_ready || { touch "$RUN/done"; return 1; }
  # what this run carried from an earlier one (bench/gpu_table.py and bench/walls_fit.py leave them to that run)
  (cd "$REPO" && ls sizing/results/probe/*/*.json sizing/results/provenance/probe/*.json 2>/dev/null) > "$RUN/carried.txt"
  local until=(); compgen -G "sizing/results/probe/h200/*.json" >/dev/null && until=(--until sizing_model)
  say "the sizing models${until:+ (builds only: the probes were carried)}, then a probe per component unless carried"
  python3 -m snakemake "${PROFILE[@]}" probe "${until[@]}" \
    || { say "sizing builds or probes failed: stop"; collect builds; touch "$RUN/done"; return 1; }
  if ((${#until[@]})); then  # a component declared since the carried probes were made is probed here
    local missing; missing=$(python3 -c 'import os
from fourloops.stage import probed
print(" ".join(f"results/probe/h200/{c}.json" for c in probed() if not os.path.exists(f"sizing/results/probe/h200/{c}.json")))')
    [ -n "$missing" ] && { say "probes not carried: $missing"; python3 -m snakemake "${PROFILE[@]}" -- $missing \
      || say "a probe not carried failed (its jobs keep their estimates)"; }
  fi
  compgen -G "sizing/results/probe/h200/lora_step-*.json" >/dev/null || lora_probe
  say "plans before the capped run: the forecast (this machine's probes) and the desk walls' verdicts"
  python3 -m fourloops.cli plan "${PROFILE[@]}" --json "${TARGETS[@]}" > "$RUN/plan-before.json"
  python3 -m fourloops.cli plan "${PROFILE[@]}" --machine desk --json "${TARGETS[@]}" > "$RUN/plan-before-desk.json"
  say "cap 24: the DAG's GPU jobs under a 24 GiB cap, each asked and admitted by the desk's walls"
  FOURLOOPS_VRAM_CAP_GIB=24 python3 -m snakemake "${PROFILE[@]}" --config model_set=sizing machine=desk \
    --resources vram_mb=24576 -- "${TARGETS[@]}" > "$RUN/cap24-admitted.log" 2>&1
  echo "exit $?" >> "$RUN/cap24-admitted.log"; tail -5 "$RUN/cap24-admitted.log"
  cp "$RUN"/plan-before*.json sizing/ 2>/dev/null
  collect dag; touch "$RUN/done"
}

heldout() {  # bench/results/heldout.yaml's next set: each call of bench/sizing_gpu.py in its own process, under the
  # desk's allocator, judged by config/models.yaml as committed (few steps and items: memory, not time)
  env_gpu; mkdir -p "$RUN"
  machine_ready || { touch "$RUN/done"; return 1; }
  say "the OmniGen2 sizing model, then the held-out set"
  python3 -m snakemake "${PROFILE[@]}" results/provenance/sizing_model/omnigen2.json \
    || { say "the build failed: stop"; touch "$RUN/done"; return 1; }
  local work=$RUN/heldout; mkdir -p "$work/models"
  ln -sfn "$REPO/sizing/models/sizing/omnigen2" "$work/models/omnigen2"
  local call; while IFS= read -r call; do
    say "held out: $call"
    eval "python3 bench/sizing_gpu.py --work \"$work\" --out \"$RUN/heldout/records\" --timeout 300 --steps 4 $call"
  done < <(python3 -c 'import shlex, yaml
sets = [h for h in yaml.safe_load(open("bench/results/heldout.yaml"))["heldout"] if h.get("next")]
assert len(sets) == 1, "bench/results/heldout.yaml: one entry with next: true"
for call in sets[0]["calls"]:
    print(" ".join(shlex.quote(str(a)) for a in call))')
  collect heldout; touch "$RUN/done"
}

lora_probe() {  # the LoRA step at the run's own settings (bf16 frozen, embeddings precomputed, 512 px, rank 8), timed
  # on this machine beside the probe rule's records, so that the plan forecasts lora_train from a probe (the probe
  # rule has no LoRA job: bench/sizing_gpu.py measures it through fourloops.lora.train, the job's own code). Once
  # first, kept apart (lora_warmup/): a machine's first LoRA process compiles kernels into on-disk caches, which the
  # DAG's lora_train, a later process, does not pay; the plan reads the second
  say "lora step probe (the run's LoRA settings) into sizing/results/probe/h200"
  local work=$RUN/lora_probe; mkdir -p "$work/models"
  ln -sfn "$REPO/sizing/models/sizing/omnigen2" "$work/models/omnigen2"
  python3 bench/sizing_gpu.py --work "$work" --out "$RUN/lora_warmup/records" --timeout 300 --items 2 \
    --omnigen2-precisions --scorer-precisions --no-detector --lora-steps bf16:precomputed:512:8
  python3 bench/sizing_gpu.py --work "$work" --out "$REPO/sizing/results/probe/h200" --timeout 300 --items 4 \
    --omnigen2-precisions --scorer-precisions --no-detector --lora-steps bf16:precomputed:512:8
}

collect() {  # what comes back: records, logs, benchmarks, tables (no images, no models)
  local name=$1
  say "collect $name"
  tar -czf "$RUN/$name.tar.gz" --exclude='*.png' --exclude='*.onnx' --exclude='*.npy' --exclude='*.safetensors' \
    -C "$REPO" sizing/results sizing/logs sizing/benchmarks -C "$RUN" $(cd "$RUN" && ls -d carried.txt plan-before*.json heldout/records lora_warmup/records cap24-* 2>/dev/null) 2>/dev/null
  ls -la "$RUN"/*.tar.gz
}

check() {  # the bundle `prepare` made must be the carried tree's commit: a commit after `prepare` would make every
  # record name the bundle's commit, dirty. Refused in seconds, before any device minute goes to such a run.
  # (FETCH_HEAD alone: moves no branch, wherever it runs.) The tree against the bundle's commit in an index of its
  # own: the copied tree's .git may hold an index of another commit, where files added since read as differing
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
  case "${GPU_RUN_MODE:-all}" in all|heldout|repro|twice|batching) ;; *) echo "GPU_RUN_MODE=$GPU_RUN_MODE; allowed: all, heldout, repro, twice, batching" >&2; return 2 ;; esac
  mkdir -p "$RUN"; rm -f "$RUN/done"
  # a token in the run's working directory, kept apart too: `wait` tells a sizing/ that a later call's carry replaced
  mkdir -p sizing && date +%s%N | tee "$RUN/sizing.token" > sizing/.gpu_run_token
  setsid nohup bash "$0" "${GPU_RUN_MODE:-all}" > "$RUN/log" 2>&1 < /dev/null &
  echo "started $!"
}

wait_run() {  # print the log while it grows, until done or $1 seconds; then copy the records to $OUT
  local until=$(( $(date +%s) + ${1:-540} )) seen=0
  # no run on this machine (the machine was given back between two calls, and this one is fresh): say so at once
  [ -f "$RUN/log" ] || { echo "NO RUN HERE: $RUN/log is missing (a fresh machine?)"; return 3; }
  # the run's working directory replaced by this call's carry: its jobs lost their files; bring back the log alone
  if [ -f "$RUN/sizing.token" ] && ! cmp -s "$RUN/sizing.token" sizing/.gpu_run_token; then
    echo "SIZING REPLACED: this call carried sizing/ over the run's working directory (carry .wheels and .carry only"
    echo "after the first call); the run is broken from here: start it again on a fresh machine"
    [ -n "${OUT:-}" ] && cp "$RUN/log" "$OUT"/ 2>/dev/null; return 4
  fi
  # every minute, what the jobs wrote so far goes to $OUT as well: a call cut off before its `wait` ends still
  # brings back what a killed command leaves under $OUT
  local next_copy=$(( $(date +%s) + 60 ))
  while [ ! -f "$RUN/done" ] && [ "$(date +%s)" -lt "$until" ]; do
    sleep 10
    local n; n=$(wc -l < "$RUN/log"); [ "$n" -gt "$seen" ] && sed -n "$((seen+1)),${n}p" "$RUN/log" | grep -v "^    \|^$" | cut -c1-300; seen=$n
    if [ -n "${OUT:-}" ] && [ "$(date +%s)" -ge "$next_copy" ]; then
      so_far >/dev/null 2>&1; cp "$RUN/sofar.tar.gz" "$RUN/log" "$OUT"/ 2>/dev/null
      next_copy=$(( $(date +%s) + 60 ))
    fi
  done
  [ -f "$RUN/done" ] && echo "RUN DONE" || echo "RUN STILL GOING"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader
  [ -f "$RUN/done" ] || so_far >/dev/null  # what the jobs wrote so far, should the session end mid-run
  [ -n "${OUT:-}" ] && cp "$RUN"/*.tar.gz "$RUN/log" "$OUT"/ 2>/dev/null
  [ -n "${OUT:-}" ] && [ -f "$RUN/done" ] && cp "$RUN"/artifacts.tar.part* "$OUT"/ 2>/dev/null; true
}

so_far() {  # the records so far, as the running mode collects them
  if [ -f "$RUN/timeline.txt" ]; then repro_collect sofar; else collect sofar; fi
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

fresh_from_w3() {  # a fresh working directory with w3's LoRA embeddings (the same for every batch), their record and
  # Snakemake's metadata of them: its jobs start from the same embeddings, and none makes them again
  local w=$1; fresh "$w"; mkdir -p "$w/results/provenance/lora_embeddings"
  rm -rf "$w/.snakemake/metadata"; cp -r "$RUN/w3/.snakemake/metadata" "$w/.snakemake/"
  cp -al "$RUN/w3/results/lora/embeddings.safetensors" "$w/results/lora/"
  cp -al "$RUN/w3/results/provenance/lora_embeddings/." "$w/results/provenance/lora_embeddings/"
}

listing() {  # every output's sha256 under a working directory's results/ (the raw evidence the compare table reads)
  (cd "$1" && find results -type f ! -path '*/.*' | LC_ALL=C sort | xargs sha256sum) > "$2"
}

repro_collect() {  # records, logs, listings, traces, tables: no images, models or tensors
  local name=${1:-repro}
  tar -czf "$RUN/$name.tar.gz" --exclude='*.png' --exclude='*.onnx' --exclude='*.npy' --exclude='*.safetensors' \
    --exclude='models' --exclude='.snakemake' -C "$RUN" $(cd "$RUN" && ls -d trace listing-* compare* pair-*.log cost-on* cost-off* twice-*.log batch-*.log lora-*.log timeline.txt w*/results w*/logs w*/benchmarks \
    determinism flops probes probes.log scorer.log builds.log embeddings.log 2>/dev/null) 2>/dev/null
  ls -la "$RUN/$name.tar.gz"
}

repro() {  # the reproducibility pair and what determinism costs, in one detached session on one GPU
  env_gpu; mkdir -p "$RUN"; : > "$RUN/timeline.txt"
  mark() { echo "$(date +%s) $*" >> "$RUN/timeline.txt"; say "$*"; }
  machine_ready || { touch "$RUN/done"; return 1; }
  local builds targets runs=${GPU_RUN_RUNS:-2} b
  read -r -a builds <<< "${GPU_RUN_BUILDS:-omnigen2 detector scorer}"
  read -r -a targets <<< "${GPU_RUN_TARGETS:-${TARGETS[*]}}"
  case "$runs" in 1|2) ;; *) echo "GPU_RUN_RUNS=$runs; allowed: 1, 2" >&2; touch "$RUN/done"; return 2 ;; esac
  mark "builds: the sizing models (${builds[*]}) in sizing/"
  python3 -m snakemake "${PROFILE[@]}" -- $(for b in "${builds[@]}"; do echo "results/provenance/sizing_model/$b.json"; done) \
    > "$RUN/builds.log" 2>&1 || { mark "builds failed"; tail -30 "$RUN/builds.log"; repro_collect; touch "$RUN/done"; return 1; }
  local m i
  if [ "${GPU_RUN_TRACE:-1}" = 1 ]; then
    mark "trace: the generate path and a LoRA step, two processes with the settings off, then two on"
    mkdir -p "$RUN/trace"
    for m in off on; do
      for i in 1 2; do FOURLOOPS_DETERMINISM=$m timeout 240 python3 bench/repro_trace.py --model sizing/models/sizing/omnigen2 \
        --out "$RUN/trace/$m-$i.json" > "$RUN/trace/$m-$i.log" 2>&1; tail -2 "$RUN/trace/$m-$i.log"; done
      python3 bench/repro_trace.py --compare "$RUN/trace/$m-1.json" "$RUN/trace/$m-2.json" > "$RUN/trace/compare-$m.json" 2>&1
      head -c 1500 "$RUN/trace/compare-$m.json"; echo
      [ "${GPU_RUN_TRACE_ON:-1}" = 0 ] && break
    done
    repro_collect sofar
  fi
  # FOURLOOPS_MACHINE=h200_pair for one run as for two: the same machine declaration resolves every `auto` batch
  # alike, so one run on another machine kind is the same jobs as each run of the pair
  mark "pair: ${targets[*]} in $runs fresh working directories, $runs snakemake runs side by side"
  for i in $(seq 1 "$runs"); do fresh "$RUN/w$i"; done
  for i in $(seq 1 "$runs"); do (FOURLOOPS_MACHINE=h200_pair python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w$i" \
    -- "${targets[@]}" > "$RUN/pair-$i.log" 2>&1; echo "exit $?" >> "$RUN/pair-$i.log") & done; wait
  for i in $(seq 1 "$runs"); do tail -2 "$RUN/pair-$i.log"; listing "$RUN/w$i" "$RUN/listing-$i.txt"; done
  if [ "$runs" = 2 ]; then
    python3 -m fourloops.cli compare "$RUN/w1" "$RUN/w2" --markdown "$RUN/compare-pair.md" > "$RUN/compare-pair.txt" 2>&1
    echo "compare exit $?" >> "$RUN/compare-pair.txt"; tail -5 "$RUN/compare-pair.txt"
  fi
  # the first run's images, tensors and records themselves, in parts under the 16 MiB a returned file may hold
  local kept; read -r -a kept <<< "${GPU_RUN_ARTIFACTS:-results/generate/A results/generate/D results/lora
    results/keypoints/A results/keypoints/D results/provenance/generate/A.json results/provenance/generate/D.json
    results/provenance/lora_embeddings results/provenance/lora_train results/provenance/keypoints/A.json
    results/provenance/keypoints/D.json}"
  (cd "$RUN/w1" && tar -cf - $(ls -d "${kept[@]}" 2>/dev/null) | split -b 15M -d - "$RUN/artifacts.tar.part")
  ls -la "$RUN"/artifacts.tar.part*
  mark "pair done"; repro_collect sofar
  [ "${GPU_RUN_VIEWS_COST:-0}" = 1 ] && views_cost
  [ "${GPU_RUN_LORA_ATTENTION:-0}" = 1 ] && lora_attention
  if [ "${GPU_RUN_COST:-1}" = 1 ]; then
    # what the settings cost: each GPU rule's job alone, forced in w1, with the settings off, then on, for
    # GPU_RUN_COST_ROUNDS rounds (default 1; interleaved, so that neither setting always runs on a warmer machine).
    # Round 1's records in cost-off/ and cost-on/, round r's in cost-off-r/ and cost-on-r/
    local cost=(results/generate/A/views.json results/lora/embeddings.safetensors results/lora/camera.safetensors
                results/keypoints/A/az045.json results/grades/watercolor.csv) r dir
    for r in $(seq 1 "${GPU_RUN_COST_ROUNDS:-1}"); do
      for m in off on; do
        dir=cost-$m; [ "$r" = 1 ] || dir=cost-$m-$r
        mark "cost: GPU jobs with FOURLOOPS_DETERMINISM=$m (round $r)"
        FOURLOOPS_DETERMINISM=$m python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w1" \
          --forcerun generate lora_embeddings lora_train keypoints_generated grades -- "${cost[@]}" > "$RUN/$dir.log" 2>&1
        echo "exit $?" >> "$RUN/$dir.log"; mkdir -p "$RUN/$dir"; cp -r "$RUN/w1/results/provenance" "$RUN/$dir/"
      done
    done
    listing "$RUN/w1" "$RUN/listing-1-after-cost.txt"
  fi
  mark "done"; repro_collect; touch "$RUN/done"
}

views_cost() {  # views of 14 steps at one and 8 a call, the jobs' settings and kernels (default), then all off (none,
  # after: any warm-up favours it), in one process: what the settings cost the generate path
  mkdir -p "$RUN/determinism"; mark "determinism cost: views, the jobs' settings and kernels, then all off"
  timeout 240 python3 bench/determinism_cost.py --generate --generate-attention default none --generate-steps 14 \
    --views 3 --model sizing/models/sizing/omnigen2 --out "$RUN/determinism/views.json" > "$RUN/determinism/views.log" 2>&1
  grep "^{" "$RUN/determinism/views.log" | cut -c1-200
  python3 bench/determinism_cost.py --table "$RUN/determinism/views.json" | tee "$RUN/determinism/views-table.md"
}

lora_attention() {  # the LoRA step at 8 samples a forward, its prompts padded (GPU_RUN_PROMPT_LENGTHS), in one process
  # with the settings on: the jobs' attention with deterministic algorithms on and off, then each variant
  # GPU_RUN_LORA_VARIANTS names (default torch: its own kernels, the jobs' bypassed), each step's gradients hashed
  local lengths variants; read -r -a lengths <<< "${GPU_RUN_PROMPT_LENGTHS:-22 23 24 25}"
  read -r -a variants <<< "${GPU_RUN_LORA_VARIANTS:-torch}"
  mkdir -p "$RUN/determinism"; mark "determinism cost: the LoRA step at 8 a forward, attention ${variants[*]}"
  FOURLOOPS_DETERMINISM=on timeout 300 python3 bench/determinism_cost.py --model sizing/models/sizing/omnigen2 --micros 8 \
    --attention "${variants[@]}" --prompt-lengths "${lengths[@]}" --out "$RUN/determinism/attention.json" \
    > "$RUN/determinism/attention.log" 2>&1; grep "^mode" "$RUN/determinism/attention.log"
  python3 bench/determinism_cost.py --table "$RUN/determinism/attention.json" | tee "$RUN/determinism/attention-table.md"
}

twice() {  # the same job twice with the settings on, then once off (see the modes above)
  env_gpu; mkdir -p "$RUN"; : > "$RUN/timeline.txt"
  mark() { echo "$(date +%s) $*" >> "$RUN/timeline.txt"; say "$*"; }
  machine_ready || { touch "$RUN/done"; return 1; }
  local target=${GPU_RUN_TARGET:-results/generate/A/views.json} rule=${GPU_RUN_RULE:-generate} i
  local cfg=(--configfile profiles/sizing-gpu/run.yaml profiles/sizing-gpu/batching-after.yaml)
  mark "builds: the sizing OmniGen2 in sizing/"
  python3 -m snakemake "${PROFILE[@]}" -- results/provenance/sizing_model/omnigen2.json > "$RUN/builds.log" 2>&1 \
    || { mark "build failed"; tail -30 "$RUN/builds.log"; repro_collect; touch "$RUN/done"; return 1; }
  for i in 1 2; do
    fresh "$RUN/w$i"; mark "on: $target in w$i"
    python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w$i" "${cfg[@]}" -- "$target" > "$RUN/twice-$i.log" 2>&1
    echo "exit $?" >> "$RUN/twice-$i.log"; tail -2 "$RUN/twice-$i.log"; listing "$RUN/w$i" "$RUN/listing-$i.txt"
  done
  python3 -m fourloops.cli compare "$RUN/w1" "$RUN/w2" --markdown "$RUN/compare-twice.md" > "$RUN/compare-twice.txt" 2>&1
  echo "compare exit $?" >> "$RUN/compare-twice.txt"; tail -4 "$RUN/compare-twice.txt"; repro_collect sofar
  mark "off: $target in w1, forced"
  mkdir -p "$RUN/cost-on"; cp -r "$RUN/w1/results/provenance" "$RUN/cost-on/"
  FOURLOOPS_DETERMINISM=off python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w1" "${cfg[@]}" --forcerun "$rule" \
    -- "$target" > "$RUN/cost-off.log" 2>&1; echo "exit $?" >> "$RUN/cost-off.log"
  mark "done"; repro_collect; touch "$RUN/done"
}

batching() {  # what batching buys and what determinism costs the LoRA step, in one detached session on one GPU
  env_gpu; mkdir -p "$RUN"; : > "$RUN/timeline.txt"
  mark() { echo "$(date +%s) $*" >> "$RUN/timeline.txt"; say "$*"; }
  machine_ready || { touch "$RUN/done"; return 1; }
  if [ -n "${GPU_RUN_EXTRA_WHEELS:-}" ]; then  # wheels beyond .wheels (bench/determinism_cost.py's cudnn-frontend)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "$GPU_RUN_EXTRA_WHEELS"/*.whl && mark "installed from $GPU_RUN_EXTRA_WHEELS: $(cd "$GPU_RUN_EXTRA_WHEELS" && ls *.whl)" \
      || mark "no wheels installed from GPU_RUN_EXTRA_WHEELS=$GPU_RUN_EXTRA_WHEELS"
  fi
  mark "builds: the sizing OmniGen2 in sizing/"
  python3 -m snakemake "${PROFILE[@]}" -- results/provenance/sizing_model/omnigen2.json > "$RUN/builds.log" 2>&1 \
    || { mark "build failed"; tail -30 "$RUN/builds.log"; repro_collect; touch "$RUN/done"; return 1; }
  local model=sizing/models/sizing/omnigen2 m
  if [ "${GPU_RUN_ABLATE:-1}" = generate ] || [ "${GPU_RUN_ABLATE:-1}" = both ]; then  # views, strict and fused, two processes
    mkdir -p "$RUN/determinism"
    for m in 1 2; do mark "determinism cost: views strict and fused (the first process also with the settings off), process $m"
      local g=(default fused); [ "$m" = 1 ] && g=(default fused none)
      timeout 200 python3 bench/determinism_cost.py --generate --generate-attention "${g[@]}" --generate-steps 14 \
        --views 1 --model "$model" --out "$RUN/determinism/generate-$m.json" > "$RUN/determinism/generate-$m.log" 2>&1
      grep "^{" "$RUN/determinism/generate-$m.log" | cut -c1-200; done
    python3 bench/determinism_cost.py --table "$RUN/determinism/generate-1.json" "$RUN/determinism/generate-2.json" \
      | tee "$RUN/determinism/generate-table.md"
  fi
  if [ "${GPU_RUN_ABLATE:-1}" = 1 ] || [ "${GPU_RUN_ABLATE:-1}" = both ]; then  # the LoRA step with each setting
    # (one sample and 8 a forward); the attention variants with the settings on only
    mkdir -p "$RUN/determinism"
    # the samples' prompts of different lengths (GPU_RUN_PROMPT_LENGTHS), as the LoRA's records of different azimuths
    # are: a micro-batch of them is padded, and its attention masked
    local lengths; read -r -a lengths <<< "${GPU_RUN_PROMPT_LENGTHS:-22 23 24 25}"
    for m in on off; do mark "determinism cost: the LoRA step, FOURLOOPS_DETERMINISM=$m"
      local variants=(); [ "$m" = off ] && variants=(--attention)
      [ "$m" = on ] && [ -n "${GPU_RUN_ATTENTION:-}" ] && read -r -a variants <<< "--attention $GPU_RUN_ATTENTION"
      FOURLOOPS_DETERMINISM=$m timeout 300 python3 bench/determinism_cost.py --model "$model" "${variants[@]}" \
        --prompt-lengths "${lengths[@]}" --out "$RUN/determinism/$m.json" > "$RUN/determinism/$m.log" 2>&1; grep "^mode" "$RUN/determinism/$m.log"; done
    python3 bench/determinism_cost.py --table "$RUN/determinism/on.json" "$RUN/determinism/off.json" | tee "$RUN/determinism/table.md"
  fi
  if [ "${GPU_RUN_PROBES:-1}" = 1 ]; then  # the batched path's probes: views 1 and 8 a call, LoRA samples 1 and 8 a forward
    mark "probes: the generator (1 and 3 references) and the LoRA step, one item and 8 a call"
    local work=$RUN/probe_work; mkdir -p "$work/models"; ln -sfn "$REPO/$model" "$work/models/omnigen2"
    python3 bench/sizing_gpu.py --work "$work" --out "$RUN/probes" --timeout 400 --items 2 --references 1 3 \
      --batch 8 --lora-micro-batch 8 --omnigen2-precisions bf16 --scorer-precisions --no-detector \
      --lora-steps bf16:precomputed:512 > "$RUN/probes.log" 2>&1; tail -4 "$RUN/probes.log"
  fi
  if [ "${GPU_RUN_SCORER:-0}" = 1 ]; then  # the scorer at one question and 8 a call: what a grades job pays at each batch
    mark "scorer: the sizing build, then its probe at one question a call and 8"
    python3 -m snakemake "${PROFILE[@]}" --configfile profiles/sizing-gpu/run.yaml profiles/sizing-gpu/batching-scorer.yaml \
      -- results/probe/h200/scorer.json > "$RUN/scorer.log" 2>&1 \
      && mkdir -p "$RUN/probes" && cp sizing/results/probe/h200/scorer.json "$RUN/probes/" \
      || mark "the scorer's build or probe failed (scorer.log)"
    tail -3 "$RUN/scorer.log"
  fi
  if [ "${GPU_RUN_FLOPS:-0}" = 1 ]; then  # the transformer's forwards: FLOPs over seconds, 1 and 3 references, 1 and 8 a call
    mkdir -p "$RUN/flops"; mark "flops: the transformer's forwards at 1 and 8 views a call"
    timeout 400 python3 bench/forward_flops.py --model "$model" --references 1 3 --batch 8 --calls 1 --steps 14 \
      --out "$RUN/flops/flops.json" > "$RUN/flops/flops.log" 2>&1; grep "^{" "$RUN/flops/flops.log" | cut -c1-200
  fi
  repro_collect sofar
  [ "${GPU_RUN_JOBS:-1}" = 1 ] || { mark "done"; repro_collect; touch "$RUN/done"; return 0; }
  # the LoRA at one sample a forward (w3) and at auto (w4, the effective batch of 8 in one); condition A's 8 views at
  # one a call (w3) and at auto (w4): the same embeddings, fresh directories, each job alone on the card
  local before=(--configfile profiles/sizing-gpu/run.yaml profiles/sizing-gpu/batching-before.yaml)
  local after=(--configfile profiles/sizing-gpu/run.yaml profiles/sizing-gpu/batching-after.yaml)
  fresh "$RUN/w3"
  # GPU_RUN_AFTER=0: the one-item-a-call side alone (w3), e.g. on a second machine kind for fourloops compare
  local after_too=${GPU_RUN_AFTER:-1} lora=${GPU_RUN_LORA:-1}
  if [ "$lora" = 1 ]; then
    mark "lora embeddings (w3)"
    python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w3" "${before[@]}" -- results/lora/embeddings.safetensors \
      > "$RUN/embeddings.log" 2>&1
    fresh_from_w3 "$RUN/w4"
    mark "lora: micro-batch 1 (w3), then auto (w4)"
    python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w3" "${before[@]}" -- results/lora/camera.safetensors \
      > "$RUN/lora-before.log" 2>&1
    [ "$after_too" = 1 ] && python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w4" "${after[@]}" \
      -- results/lora/camera.safetensors > "$RUN/lora-after.log" 2>&1
  else  # GPU_RUN_LORA=0: the conditions' views alone (a condition without the LoRA needs none of its jobs)
    fresh "$RUN/w4"
  fi
  if [ "${GPU_RUN_LORA_MICRO4:-0}" = 1 ] && [ "$lora" = 0 ]; then
    mark "lora: micro-batch 4 skipped (GPU_RUN_LORA=0 made no embeddings for it)"
  elif [ "${GPU_RUN_LORA_MICRO4:-0}" = 1 ]; then  # a micro-batch no record measured: its wall, held out
    fresh_from_w3 "$RUN/w5"
    mark "lora: micro-batch 4 (w5)"
    python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w5" --configfile profiles/sizing-gpu/run.yaml \
      profiles/sizing-gpu/batching-micro4.yaml -- results/lora/camera.safetensors > "$RUN/lora-micro4.log" 2>&1
  fi
  repro_collect sofar
  local c conds; read -r -a conds <<< "${GPU_RUN_CONDITIONS:-A}"
  for c in "${conds[@]}"; do
    mark "batch: condition $c at one view a call (w3), then auto (w4)"
    python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w3" "${before[@]}" -- "results/generate/$c/views.json" > "$RUN/batch-$c-before.log" 2>&1
    [ "$after_too" = 1 ] && python3 -m snakemake "${PROFILE[@]}" --directory "$RUN/w4" "${after[@]}" -- "results/generate/$c/views.json" > "$RUN/batch-$c-after.log" 2>&1
    repro_collect sofar
  done
  listing "$RUN/w3" "$RUN/listing-3.txt"
  if [ "$after_too" = 1 ]; then
    listing "$RUN/w4" "$RUN/listing-4.txt"
    python3 -m fourloops.cli compare "$RUN/w3" "$RUN/w4" --markdown "$RUN/compare-batch.md" > "$RUN/compare-batch.txt" 2>&1
    echo "compare exit $?" >> "$RUN/compare-batch.txt"; tail -4 "$RUN/compare-batch.txt"
  fi
  mark "done"; repro_collect
  # the tensors and images themselves, for a comparison across machine kinds (fourloops compare --across-machines):
  # in parts under the 16 MiB a returned file may hold
  (cd "$RUN" && tar -cf - $(ls -d w3/results/generate w4/results/generate w3/results/lora/camera.safetensors \
    w3/results/lora/embeddings.safetensors 2>/dev/null) | split -b 15M -d - artifacts.tar.part)
  ls -la "$RUN"/artifacts.tar.part*
  touch "$RUN/done"
}

case "${1:-}" in
  prepare) prepare ;;
  all) all ;;
  heldout) heldout ;;
  repro) repro ;;
  twice) twice ;;
  batching) batching ;;
  start) start ;;
  check) check ;;
  wait) wait_run "${2:-540}" ;;
  *) echo "usage: bench/gpu_run.sh prepare | check | start | wait [seconds] | all | heldout | repro | twice | batching" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Every benchmark of docs/performance.md, one after another, at this commit, as the page's
# figures were measured, nothing else running (both cores are the measurement): the paper-scale
# run in its own scratch clone, then a clean clone whose first `dvc repro` starts on a cold
# response store and model cache, and the other scripts in that clone. Output and /usr/bin/time
# of each go to LOGDIR/<name>.log and .err, its start and exit code to LOGDIR/progress.
#
#   bash bench/all.sh [LOGDIR]          # in the README's environment (how long: the page)
#
# The vLLM benchmark needs the engine's environment (docs/many-models.md): run
# `python bench/vllm_throughput.py --repeats 3` there, in the same clone, afterwards.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
logs=$(mkdir -p "${1:-bench-logs}" && cd "${1:-bench-logs}" && pwd)
work=$(mktemp -d)
step() {
  local name=$1
  shift
  echo "== $name $(date +%T)" >>"$logs/progress"
  /usr/bin/time -v "$@" >"$logs/$name.log" 2>"$logs/$name.err"
  echo "   rc=$? $(date +%T)" >>"$logs/progress"
}
git -C "$repo" log --oneline -1 >"$logs/commit"

cd "$repo"
step paper_scale python bench/paper_scale.py --scale 1 --workdir "$work/paper-scale"

git clone -q "$repo" "$work/clone"
cd "$work/clone"
export PYTHONPATH="$work/clone" SYPS_CACHE_DIR="$work/cache"
step cold_repro dvc repro
git status --short >"$logs/cold_status.txt"
step noop_repro dvc repro
step judge_batch_noise python bench/judge_batch_noise.py
step score_many_cells python bench/score_many_cells.py
step bootstrap_scale python bench/bootstrap_scale.py
step busy_machine python bench/busy_machine.py --n 8 --repeats 2
step openai_throughput python bench/openai_throughput.py
step trace_logging python bench/trace_logging.py --rows 5000 --fluent-rows 300
mkdir -p .cache && cp -r "$work/cache/models" .cache/ # incremental.py keeps its cache there
step incremental python bench/incremental.py
step hf_dtype python bench/hf_dtype.py
step hf_prefix python bench/hf_prefix.py --repeats 3
step hf_throughput python bench/hf_throughput.py
# The README's test command, in the checkout: rewrites the test row of docs/performance.md.
cd "$repo"
step test_count python bench/test_count.py
echo "== done $(date +%T); the clones are in $work" >>"$logs/progress"

#!/usr/bin/env bash
# The GPT-2-small tie verdict (config/gpt2_small_verdict.py, docs/gpt2-small.md), one command a stage:
#   bash config/gpt2_small.sh prepare DIR   # DIR: a folder of .jsonl files (a text field) or .txt files: OpenWebText
#   bash config/gpt2_small.sh plan [--gpus=G] [--tokens_per_s=T]   # hours, disk, memory for this machine and an H100 node
#   bash config/gpt2_small.sh smoke         # the config at a hundredth of its length, one seed: speed, kill, resume
#   bash config/gpt2_small.sh rates         # each family's rate at this size, 200 steps a run (gpt2_small_rates.py)
#   bash config/gpt2_small.sh run           # every run, G at a time on G GPUs; run again after a stop to go on
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${1:-}
shift || true
case $stage in
prepare) [ -n "${1:-}" ] || { echo "error: bash config/gpt2_small.sh prepare DIR: DIR, a folder of .jsonl or .txt" \
             "files, is missing" >&2; exit 2; }
    python prepare.py --input="$1" --dataset=openwebtext ;;
plan) python lab/gpt2_small_plan.py "$@" ;;
smoke) python ablate.py config/gpt2_small_verdict.py --max_iters=48 --warmup_iters=5 --eval_interval=24 \
           --eval_iters=5 --seeds=1 --out_dir=out-gpt2-small-smoke "$@" ;;
rates) python ablate.py config/gpt2_small_rates.py "$@" ;;
run) python ablate.py config/gpt2_small_verdict.py "$@" ;;
*) sed -n '2,7p' "$0"; exit 2 ;;
esac

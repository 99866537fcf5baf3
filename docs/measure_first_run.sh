#!/usr/bin/env bash
# The README's quick-start table: config/first_run.py (200 steps of train.py's default model and init) for plain
# tying, shuffle and untied, three seeds each, one after another on a quiet machine. Each row: the start and the end
# (val loss on the 20 fixed batches), the copy probe at the start and at step 50, and the command's wall time.
#   bash docs/measure_first_run.sh [OUT]     # default OUT=out-first-run; each run's log in OUT/MODE-SEED.log
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out-first-run}
mkdir -p "$OUT"
echo "# $(grep -m1 -E 'cpu family' /proc/cpuinfo | tr -s ' \t' ' '), $(grep -q avx512_bf16 /proc/cpuinfo && echo avx512_bf16 || echo 'no avx512_bf16'), $(date -u +%F)" | tee "$OUT/table.txt"
for mode in tied shuffle untied; do
    for seed in 1337 1338 1339; do
        run="$OUT/$mode-$seed"
        rm -rf "$run"
        t0=$(date +%s.%N)
        python train.py config/first_run.py --tie_mode=$mode --seed=$seed --out_dir="$run" --progress=false > "$run.log" 2>&1
        t1=$(date +%s.%N)
        python - "$run" "$mode" "$seed" "$(echo "$t1 - $t0" | bc)" <<'PY' | tee -a "$OUT/table.txt"
import csv, os, sys
run, mode, seed, wall = sys.argv[1:]
rows = [r for r in csv.DictReader(open(os.path.join(run, 'metrics.csv'))) if r['val_loss']]
at = {int(r['iter']): r for r in rows}
print(f"{mode} seed {seed}: start {float(at[0]['val_loss']):.3f}, end {float(rows[-1]['val_loss']):.3f}, "
      f"copy {100 * float(at[0]['copy_prob']):.0f} % at the start, {100 * float(at[50]['copy_prob']):.0f} % at step 50, "
      f"{float(wall):.1f} s")
PY
    done
done

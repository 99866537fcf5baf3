#!/usr/bin/env bash
# The measurements of docs/performance.md's "Ablations: runs side by side", as one script, so a fresh
# machine can redo them. Run on a quiet machine (nothing else timed at the same moment):
#   bash docs/measure_grid.sh jobs       # the 8-run grid with --jobs=1 against the default, alternated twice
#   bash docs/measure_grid.sh compile    # the same grid compiled (cold, then warm on-disk cache) against eager
#   bash docs/measure_grid.sh avx2       # compile with torch capped at AVX2: does any loss go NaN?
#   bash docs/measure_grid.sh one        # a grid of one run (a sweep's widening): one worker of one thread vs default
#   bash docs/measure_grid.sh exp3 [N]   # experiment 3's config on a sub-grid of N iterations: --jobs=1 vs default
#   bash docs/measure_grid.sh exp3-full  # experiment 3's config as the README runs it (the default --jobs), 50 runs
#   bash docs/measure_grid.sh compile-long  # compile against eager at experiment 3's length: 2 modes x 2 seeds x 2000
# Wall times go to stdout and to $OUT/times.txt; every out dir lands under $OUT (default out-measure).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out-measure}
mkdir -p "$OUT"
GRID="--dataset=tinyshakespeare --modes=untied,tied,shuffle,logit_scale --seeds=2 --max_iters=300 --progress=false"

timed() {  # timed NAME ARGS...: one ablate.py command on a fresh out dir, its wall time recorded
    local name=$1; shift
    rm -rf "$OUT/$name"
    local t0=$(date +%s.%N)
    python ablate.py "$@" --out_dir="$OUT/$name" > "$OUT/$name.log" 2>&1 || { echo "$name failed:"; tail -3 "$OUT/$name.log"; exit 1; }
    local t1=$(date +%s.%N)
    printf '%-28s %8.1f s\n' "$name" "$(echo "$t1 - $t0" | bc)" | tee -a "$OUT/times.txt"
}

max_diff() {  # max_diff DIR_A DIR_B: the largest difference of any logged loss between two grids' runs
    python - "$1" "$2" <<'PY'
import csv, glob, math, os, sys
a, b = sys.argv[1:]
worst = {'step_loss': 0.0, 'val_loss': 0.0}
nan = 0
for path in sorted(glob.glob(os.path.join(a, '*', 'metrics.csv'))):
    other = os.path.join(b, os.path.basename(os.path.dirname(path)), 'metrics.csv')
    rows_a, rows_b = (list(csv.DictReader(open(p))) for p in (path, other))
    for ra, rb in zip(rows_a, rows_b):
        for k in worst:
            if ra[k] and rb[k]:
                x, y = float(ra[k]), float(rb[k])
                nan += math.isnan(x) + math.isnan(y)
                worst[k] = max(worst[k], abs(x - y))
print(f"largest difference {os.path.basename(a)} vs {os.path.basename(b)}: step loss {worst['step_loss']:.4f}, "
      f"val loss {worst['val_loss']:.4f}, NaN values {nan}")
PY
}

case ${1:-} in
jobs)
    for round in 1 2; do
        timed "jobs1-r$round" $GRID --jobs=1
        timed "jobs-default-r$round" $GRID
    done
    max_diff "$OUT/jobs1-r1" "$OUT/jobs-default-r1" | tee -a "$OUT/times.txt" ;;
one)  # what the default did with fewer runs than cores: one worker of one thread beside an idle core (--jobs=2 here)
    for round in 1 2; do
        timed "one-worker-r$round" --dataset=tinyshakespeare --modes=tied --max_iters=300 --progress=false --jobs=2
        timed "one-default-r$round" --dataset=tinyshakespeare --modes=tied --max_iters=300 --progress=false
    done
    max_diff "$OUT/one-worker-r1" "$OUT/one-default-r1" | tee -a "$OUT/times.txt" ;;
compile)
    export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)     # an empty on-disk cache: the first grid compiles cold
    for dtype in auto float32; do
        timed "eager-$dtype" $GRID --dtype=$dtype --compile=false
        timed "compile-cold-$dtype" $GRID --dtype=$dtype --compile=true
        timed "compile-warm-$dtype" $GRID --dtype=$dtype --compile=true
        max_diff "$OUT/eager-$dtype" "$OUT/compile-warm-$dtype" | tee -a "$OUT/times.txt"
    done ;;
avx2)
    export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
    export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
    timed avx2-eager --dataset=tinyshakespeare --modes=tied,untied --max_iters=300 --progress=false --compile=false
    timed avx2-compile --dataset=tinyshakespeare --modes=tied,untied --max_iters=300 --progress=false --compile=true
    max_diff "$OUT/avx2-eager" "$OUT/avx2-compile" | tee -a "$OUT/times.txt" ;;
exp3)
    ITERS=${2:-300}
    SUB="config/ablate_char_sigma.py --max_iters=$ITERS --lr_decay_iters=$ITERS --progress=false"
    timed "exp3-$ITERS-jobs1" $SUB --jobs=1
    timed "exp3-$ITERS-default" $SUB
    max_diff "$OUT/exp3-$ITERS-jobs1" "$OUT/exp3-$ITERS-default" | tee -a "$OUT/times.txt" ;;
exp3-full)
    timed exp3-full config/ablate_char_sigma.py --progress=false ;;
compile-long)
    export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
    LONG="config/ablate_char_sigma.py --modes=untied,tied --seeds=2 --progress=false"
    timed long-eager $LONG --compile=false
    timed long-compile-cold $LONG --compile=true
    timed long-compile-warm $LONG --compile=true
    max_diff "$OUT/long-eager" "$OUT/long-compile-warm" | tee -a "$OUT/times.txt" ;;
*)
    sed -n '2,10p' "$0"; exit 2 ;;
esac

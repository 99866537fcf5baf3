#!/usr/bin/env bash
# Experiment 7 (docs/experiment7.md): tied against untied along a ladder of four sizes (claim 18) and tied models
# that spend what sharing saves on layers (claim 19). Each stage is one command; every ablate.py command in it skips
# the runs it finished before, so a stage can be run again after an interruption and goes on where it stopped.
#   python prepare.py --source=registry --dataset=shakespeare_works_compact --tokenizer=gpt2 --compact_vocab=true
#   bash config/experiment7.sh time            # untied and tied at each size, 100 iterations: this machine's speed
#   bash config/experiment7.sh sweep [SIZE...] # rates, half length, one seed: Muon at every size, AdamW at the ends
#   bash config/experiment7.sh confirm [SIZE...]  # five seeds, full length, at the default rates and each one's best
#   bash config/experiment7.sh depth [SIZE...] # claim 19's deeper tied models (w128, w160): their rate, five seeds
# A SIZE (w64, w96, w128, w160) names config/ladder_<SIZE>.py; without any, a stage covers every size it trains.
# The sizes, the grids and the lengths are docs/experiment7_tables.py's, which also estimates each stage's hours.
set -euo pipefail
cd "$(dirname "$0")/.."
tables=docs/experiment7_tables.py
read -r -a sizes <<< "$(python $tables sizes)"
read -r -a deep <<< "$(python $tables sizes deep)"
adamw=" $(python $tables sizes adamw) "

optimizers() {  # SIZE: Muon at every size, AdamW where the tables script says
    if [[ $adamw == *" $1 "* ]]; then echo muon adamw; else echo muon; fi
}

sweep() {  # MODEL OPTIMIZER [tied]: the grid at half length, widened until each best has a trained cell on every side
    local out=out-exp7-sweep-$2-$1 modes wider
    modes=$(python $tables grid "$2" ${3:-})
    # run again, a sweep starts from every row it trained before, so that its three widenings are three more
    [ -f "$out/summary.json" ] && modes=$(python $tables widen "$out")
    for _ in 1 2 3 4; do
        python ablate.py "config/ladder_$1.py" $(python $tables flags half) --optimizer="$2" --modes="$modes" \
            --out_dir="$out"
        wider=$(python $tables widen "$out")
        [ "$wider" = "$modes" ] && return
        modes=$wider
    done
    echo "$out: a best still lies on the grid's edge after three widenings; see its summary.md" >&2
    exit 1
}

stage=${1:-}
shift || true
case $stage in
time)  # the first runs anywhere, to size the grid: the tables script then prints each stage's hours as measured
    for size in "${@:-${sizes[@]}}"; do
        python ablate.py "config/ladder_$size.py" --optimizer=muon $(python $tables flags time) \
            --out_dir="out-exp7-time-$size"
    done
    python $tables --timed ;;
sweep)
    for size in "${@:-${sizes[@]}}"; do
        for optimizer in $(optimizers "$size"); do sweep "$size" "$optimizer"; done
    done ;;
confirm)  # the rows come from each sweep's summary: its best cells, once each lies inside its grid
    for size in "${@:-${sizes[@]}}"; do
        for optimizer in $(optimizers "$size"); do
            best=$(python $tables best "out-exp7-sweep-$optimizer-$size")
            python ablate.py "config/ladder_$size.py" --optimizer="$optimizer" --modes="untied,tied,$best" --seeds=5 \
                --out_dir="out-exp7-confirm-$optimizer-$size"
        done
    done ;;
depth)  # a deeper model's best rate is its own: a tied sweep, then five seeds against the confirm stage's untied
    for size in "${@:-${deep[@]}}"; do
        sweep "${size}_deep" muon tied
        best=$(python $tables best "out-exp7-sweep-muon-${size}_deep")
        python ablate.py "config/ladder_${size}_deep.py" --optimizer=muon --modes="$best" --seeds=5 \
            --out_dir="out-exp7-confirm-muon-${size}_deep"
    done ;;
*)
    echo "usage: bash config/experiment7.sh time|sweep|confirm|depth [SIZE...]" >&2
    exit 2 ;;
esac

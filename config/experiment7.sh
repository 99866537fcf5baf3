#!/usr/bin/env bash
# Experiment 7 (docs/experiment7.md): tied against untied along a ladder of four sizes (claim 18) and tied models
# that spend what sharing saves on layers (claim 19). Each stage is one command; every ablate.py command in it skips
# the runs it finished before, so a stage can be run again after an interruption and goes on where it stopped.
#   python prepare.py --source=registry --dataset=shakespeare_works_compact --tokenizer=gpt2 --compact_vocab=true
#   bash config/experiment7.sh sweep [SIZE...] # rates, half length, one seed: Muon at every size, AdamW at the ends
#   bash config/experiment7.sh confirm [SIZE...]  # five seeds, full length, at the default rates and each one's best
#   bash config/experiment7.sh depth [SIZE...] # claim 19's deeper tied models (w128, w160): their rate, five seeds
# A SIZE (w64, w96, w128, w160) names config/ladder_<SIZE>.py; without any, a stage covers every size it trains.
# The follow-up (docs/experiment7.md, "What this cannot say"): stages run in this order, each from the last's
# summaries, every run one that ablate.py skips when it is already finished:
#   bash config/experiment7.sh control    # AdamW at w160, tied: x10/x30/x100 x warmup 25/100 x ends' decay, one seed
#   bash config/experiment7.sh blocks     # the control's best cell with the blocks at 3e-4 and 3e-3
#   bash config/experiment7.sh pair       # five seeds of that best tied cell and of untied's best, paired by seed
#   bash config/experiment7.sh remedies   # the best tied cell with the input side's own rate: sqrt(d) input, igs
#   bash config/experiment7.sh select [SIZE...]   # Muon, every size: the select rule, 3 seeds; the pick, 5 fresh
#   bash config/experiment7.sh select_adamw [SIZE...]  # the same for AdamW's ladder ends, w64 and w160 (warmup 25)
#   bash config/experiment7.sh shallow    # width 160 at 4 layers under AdamW: a sweep of its own, then five seeds
#   bash config/experiment7.sh horizon [SIZE...]  # Muon, w128 and w160: one epoch (1,376 steps) at the picked rates,
#                                                 # three seeds, evaluated every 172 steps
#   bash config/experiment7.sh horizon_lower [SIZE...]  # its rates and a rung lower on each, seed 1337, trained here
#   bash config/experiment7.sh horizon_best [SIZE...]   # each arm's better of the two (by more than a seed's spread)
#                                                 # beside the other's on three seeds, trained here: the re-read cost
#   bash config/experiment7.sh horizon_lower2 [SIZE...] # a rung lower again below horizon_best's rates, seed 1337
#   bash config/experiment7.sh remedy_sweep [coupled|per_step]  # AdamW at w160: every remedy at its own rate, and
#                                                 # untied with and without sqrt(d) input scaling: one seed, half length
#   bash config/experiment7.sh remedy_select [coupled|per_step]  # untied, tied and the three best remedies: their two
#                                                 # best cells on three seeds at full length, widened until each pick
#                                                 # lies inside; the pick on five fresh seeds
#   bash config/experiment7.sh remedy_untied_sqrt_d [coupled|per_step]  # untied with sqrt(d) input scaling through
#                                                 # the select stage's rule: is proj with sqrt(d)'s edge sqrt(d)'s?
#   bash config/experiment7.sh remedy_horizon [coupled|per_step]  # untied's, tied's and the best remedy's fresh pick
#                                                 # over one epoch (1,376 steps), three seeds: the cost at each eighth
#   bash config/experiment7.sh remedy_horizon_lower [coupled|per_step]  # each horizon arm a rung lower on every
#                                                 # rate, over the same epoch, one seed: its rate at its own length
#   bash config/experiment7.sh remedy_horizon_confirm [coupled|per_step]  # the lower rungs that won: three seeds,
#                                                 # and a rung lower again
#   bash config/experiment7.sh remedy_depth [coupled|per_step]  # the best remedy at w160 x 4 layers: its own rate
#                                                 # swept, then five seeds paired with that size's untied and tied
# The sizes, the grids and the lengths are lab/experiment7_tables.py's, which also estimates each stage's hours.
set -euo pipefail
cd "$(dirname "$0")/.."
tables=lab/experiment7_tables.py
read -r -a sizes <<< "$(python $tables sizes)"
read -r -a deep <<< "$(python $tables sizes deep)"
adamw=" $(python $tables sizes adamw) "

optimizers() {  # SIZE: Muon at every size, AdamW where the tables script says
    if [[ $adamw == *" $1 "* ]]; then echo muon adamw; else echo muon; fi
}

sweep() {  # MODEL OPTIMIZER [tied]: the grid at half length, widened until each best has a trained cell on every side
    sweep_rows "$1" "$2" out-exp7-sweep-$2-$1 "$(python $tables grid "$2" ${3:-})"
}

sweep_rows() {  # MODEL OPTIMIZER OUT_DIR ROWS [FLAG...]: sweep() with its rows, out dir and extra ablate.py flags given
    local model=$1 optimizer=$2 out=$3 modes=$4 wider
    shift 4
    # run again, a sweep starts from every row it trained before and any its grid has gained since, so that its
    # three widenings are three more
    [ -f "$out/summary.json" ] && modes=$(python $tables widen "$out" "$modes")
    for _ in 1 2 3 4; do
        python ablate.py "config/ladder_$model.py" $(python $tables flags half) --optimizer="$optimizer" \
            --modes="$modes" "$@" --out_dir="$out"
        wider=$(python $tables widen "$out")
        [ "$wider" = "$modes" ] && return
        modes=$wider
    done
    echo "$out: a best still lies on the grid's edge after three widenings; see its summary.md" >&2
    exit 1
}

control_best() {  # the control's best tied cell: "MODE WARMUP DECAY" (each run's whole-split val loss, one seed),
    # from its out dirs, or from the summaries committed under docs/results/ where the runs are gone
    python - <<'PY'
import glob, json, os
from lab.ablation_grid import parse_row
found = {os.path.basename(p).split('-', 1)[1]: p for p in glob.glob('docs/results/experiment7-control-adamw-w160-*')}
found.update({p.split('-', 2)[2]: p for p in glob.glob('out-exp7-control-adamw-w160-*')
              if os.path.exists(os.path.join(p, 'summary.json'))})
cells = []
for name, out in found.items():
    info = json.load(open(os.path.join(out, 'summary.json')))
    _, warmup, decay = name.rsplit('-', 2)
    cells += [(v['val_loss_all']['mean'], m, warmup[1:], decay) for m, v in info['modes'].items()
              if parse_row(m).tie_mode == 'tied' and v.get('val_loss_all')]
print(*min(cells)[1:])
PY
}

muon_select() {  # SIZE: Muon's select out dir: w96's and w160's record is the one taken whole on one Xeon (-xeon),
    # which the page quotes, not the first pass's, an older rule's on another machine
    if [ -d "docs/results/experiment7-select-muon-$1-xeon" ]; then echo "out-exp7-select-muon-$1-xeon"
    else echo "out-exp7-select-muon-$1"; fi
}

horizon_rows() {  # SIZE: Muon's rates for its horizon: the select stage's pick where it ran, else the sweep's best
    local at
    at=$(muon_select "$1")
    if [ -f "$at/summary.json" ] || [ -d "docs/results/experiment${at#out-exp}" ]; then
        top 1 "$at"
    else
        python $tables best "out-exp7-sweep-muon-$1"
    fi
}

top() {  # N OUT_DIR: each mode's N best cells of a sweep (from docs/results/ where OUT_DIR is gone), as rows
    python - "$@" <<'PY'
import sys
from lab.rate_selection import sweep_cells, best_rows
_, untied, tied, _ = sweep_cells(sys.argv[2], committed=True)
rows = []
for k in range(int(sys.argv[1])):
    u = dict(sorted(untied.items(), key=lambda kv: kv[1])[k:k + 1])
    t = dict(sorted(tied.items(), key=lambda kv: kv[1])[k:k + 1])
    rows += best_rows(u, t)
print(','.join(rows))
PY
}

# The remedy stages' three out dirs (plain remedies, sqrt(d) input scaling, untied) and the flag each one's rows
# were swept with; STAGE is rsweep, rselect, rfresh or rhorizon.
remedy_flags=("" "--emb_scale=true" "")
remedy_dirs() {  # STAGE DECAY [MODEL]: MODEL w160 unless given (the depth stage's is w160_shallow)
    local at=out-exp7-$1-adamw-${3:-w160}-$2
    echo "$at $at-emb_scale $at-untied"
}

fresh_rows() {  # OUT_DIR ROWS ABLATE_ARGS...: train those of ROWS that OUT_DIR's committed record lacks
    local out=$1 rows
    rows=$(python $tables untrained "$out" "$2")
    shift 2
    [ -z "$rows" ] || python ablate.py "$@" --modes="$rows" --out_dir="$out"
}

untied_form() {  # DECAY: untied's pick on the three choosing seeds, the better of its two forms: 0 without sqrt(d)
    # input scaling (remedy_select's), 1 with it (remedy_untied_sqrt_d's); the horizon trains that form alone
    local at=out-exp7-rselect-adamw-w160-$1 picks
    picks=$(python $tables remedy_picks "$at-untied" "$at-emb_scale-untied") || return 1
    if [ -n "$(head -n 1 <<< "$picks")" ]; then echo 0; else echo 1; fi
}

stage=${1:-}
shift || true
case $stage in
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
control)  # AdamW's tied w160: is its cost the rate's, the warmup's or the decay's? Full length, one seed
    for warmup in 25 100; do
        for decay in per_step coupled; do
            python ablate.py config/ladder_w160.py --optimizer=adamw --modes=tied_e10,tied_e30,tied_e100 \
                --warmup_iters=$warmup --ends_decay=$decay --out_dir="out-exp7-control-adamw-w160-w$warmup-$decay"
        done
    done
    control_best ;;
blocks)  # the best cell's blocks at 3e-4 and 3e-3, the shared matrix's own rate held (so its multiple changes)
    read -r mode warmup decay <<< "$(control_best)"
    table=${mode#tied_e}
    for lr in 3e-4 3e-3; do
        mult=$(python -c "print(f'{$table * 1e-3 / $lr:g}')")
        python ablate.py config/ladder_w160.py --optimizer=adamw --modes="tied_e$mult" --learning_rate=$lr \
            --min_lr=$(python -c "print($lr / 10)") --warmup_iters=$warmup --ends_decay=$decay \
            --out_dir="out-exp7-blocks-adamw-w160-lr$lr"
    done ;;
pair)  # five seeds, each mode at its best; the same seeds give both the same batches: paired by seed
    read -r mode warmup decay <<< "$(control_best)"
    python ablate.py config/ladder_w160.py --optimizer=adamw --modes="$mode" --seeds=5 --warmup_iters=$warmup \
        --ends_decay=$decay --out_dir=out-exp7-pair-adamw-w160-tied
    python ablate.py config/ladder_w160.py --optimizer=adamw --modes=untied_e300_h10 --seeds=5 \
        --out_dir=out-exp7-pair-adamw-w160-untied ;;
remedies)  # the input side of the tied matrix given a rate of its own: sqrt(d) at the input, its gradient scaled
    read -r mode warmup decay <<< "$(control_best)"
    python ablate.py config/ladder_w160.py --optimizer=adamw --modes="$mode,${mode}_igs4" --emb_scale=true \
        --warmup_iters=$warmup --ends_decay=$decay --out_dir=out-exp7-remedies-adamw-w160-emb_scale
    python ablate.py config/ladder_w160.py --optimizer=adamw --modes="${mode}_igs4" --warmup_iters=$warmup \
        --ends_decay=$decay --out_dir=out-exp7-remedies-adamw-w160 ;;
select)  # the winner's curse: the select rule (docs/experiments.md) at full length, three seeds; the pick reported
    # from five fresh seeds
    for size in ${@:-${sizes[*]}}; do
        python $tables select "$(muon_select "$size")" "$(top 2 out-exp7-sweep-muon-$size)" \
            "config/ladder_$size.py" --optimizer=muon --seeds=3
        fresh_rows "out-exp7-fresh-muon-$size" "$(top 1 "$(muon_select "$size")")" "config/ladder_$size.py" \
            --optimizer=muon --seed=1342 --seeds=5
    done ;;
select_adamw)  # the select rule for AdamW's two ladder sizes, from their sweeps, in the ladder's recipe (warmup 25,
    # the ends' decay per step) as the sweeps and the confirm stage trained: the ladder's AdamW cost at confirmed rates
    for size in ${@:-$adamw}; do
        python $tables select "out-exp7-select-adamw-$size" "$(top 2 out-exp7-sweep-adamw-$size)" \
            "config/ladder_$size.py" --optimizer=adamw --seeds=3
        fresh_rows "out-exp7-fresh-adamw-$size" "$(top 1 "out-exp7-select-adamw-$size")" "config/ladder_$size.py" \
            --optimizer=adamw --seed=1342 --seeds=5
    done ;;
shallow)  # width 160 at the depth of w96 (4 layers): depth apart from width, under AdamW
    sweep w160_shallow adamw
    best=$(python $tables best out-exp7-sweep-adamw-w160_shallow)
    python ablate.py config/ladder_w160_shallow.py --optimizer=adamw --modes="$best" --seeds=5 \
        --out_dir=out-exp7-confirm-adamw-w160_shallow ;;
remedy_sweep)  # AdamW at w160: each remedy at its own rate (pit at its two, U's and S's), one seed, half length, the
    # control's best setting (warmup 100 of the full 200 steps, so 50 here; the ends' decay coupled, or per_step as
    # the argument). The sqrt(d) rows (tied from x1 up, untied's two rates) have a sweep of their own, --emb_scale
    # being the command's flag.
    decay=${1:-coupled}
    read -r -a sweeps <<< "$(remedy_dirs rsweep "$decay")"
    # the third: untied without sqrt(d) at this warmup (the ladder's sweep had 25 steps), the others' reference
    grids=(remedies remedies_emb_scale remedies_untied)
    for k in 0 1 2; do
        sweep_rows w160 adamw "${sweeps[$k]}" "$(python $tables grid "${grids[$k]}")" --warmup_iters=50 \
            --ends_decay="$decay" ${remedy_flags[$k]}
    done ;;
remedy_select)  # from the remedy sweeps: untied's best, plain tied's and the three best remedies, each with its two
    # best cells, at full length on three seeds, widened by a rung wherever a pick lies at its cells' edge; each
    # one's pick then on five fresh seeds (seed 1342 on), all paired by seed across the three out dirs (the select
    # stage's rule: a pick is reported on seeds it was not picked on). The sqrt(d) rows run with --emb_scale=true, as
    # they were swept; the fresh dirs' summaries hold only the current picks.
    decay=${1:-coupled}
    read -r -a sweeps <<< "$(remedy_dirs rsweep "$decay")"
    read -r -a picked <<< "$(remedy_dirs rselect "$decay")"
    read -r -a fresh <<< "$(remedy_dirs rfresh "$decay")"
    mapfile -t top < <(python $tables remedy_top 3 2 "${sweeps[@]}")
    for k in 0 1 2; do
        [ -n "${top[$k]:-}" ] || continue
        python $tables select "${picked[$k]}" "${top[$k]}" config/ladder_w160.py --optimizer=adamw --seeds=3 \
            ${remedy_flags[$k]} --warmup_iters=100 --ends_decay="$decay"
    done
    mapfile -t rows < <(python $tables remedy_picks "${picked[@]}")
    for k in 0 1 2; do
        [ -n "${rows[$k]:-}" ] || continue
        fresh_rows "${fresh[$k]}" "${rows[$k]}" config/ladder_w160.py --optimizer=adamw --seed=1342 --seeds=5 \
            ${remedy_flags[$k]} --warmup_iters=100 --ends_decay="$decay"
    done ;;
remedy_untied_sqrt_d)  # the control the fresh seeds call for: untied with sqrt(d) input scaling through the select
    # stage's rule on its own (its two best cells of the sqrt(d) sweep on three seeds at full length, widened until its
    # pick lies inside, then that pick on five fresh seeds and over the horizon's epoch), so that proj with sqrt(d)'s
    # edge over untied is told apart from sqrt(d)'s own; its one-seed sweep had put it 0.012 behind untied without
    # it, within a seed's noise. Untied's pick is then the better form on the three choosing seeds.
    decay=${1:-coupled}
    read -r -a sweeps <<< "$(remedy_dirs rsweep "$decay")"
    picked=out-exp7-rselect-adamw-w160-$decay-emb_scale-untied
    rows=$(python $tables remedy_top 0 2 "${sweeps[1]}" | tr , '\n' | grep '^untied_' | paste -sd, -)
    python $tables select "$picked" "$rows" config/ladder_w160.py --optimizer=adamw --seeds=3 --emb_scale=true \
        --warmup_iters=100 --ends_decay="$decay"
    pick=$(python $tables remedy_picks "$picked")
    fresh_rows "${picked/rselect/rfresh}" "$pick" config/ladder_w160.py --optimizer=adamw --seed=1342 --seeds=5 \
        --emb_scale=true --warmup_iters=100 --ends_decay="$decay"
    form=$(untied_form "$decay")
    [ "$form" = 1 ] || exit 0  # not untied's pick: remedy_horizon trains the form without sqrt(d)
    fresh_rows "${picked/rselect/rhorizon}" "$pick" config/ladder_w160.py --optimizer=adamw --seeds=3 \
        --emb_scale=true $(python $tables flags horizon) --ends_decay="$decay"
    [ ! -f "${picked/rselect/rhorizon}/summary.json" ] || python $tables curves "${picked/rselect/rhorizon}" ;;
remedy_horizon)  # under AdamW over one epoch (1,376 steps, an evaluation each eighth, the warmup an eighth as in
    # Muon's horizon): untied's best, plain tied's and the best remedy of the fresh seeds, three seeds each; untied's
    # here only where its pick is the form without sqrt(d) (after remedy_untied_sqrt_d, which trains the other's)
    decay=${1:-coupled}
    read -r -a fresh <<< "$(remedy_dirs rfresh "$decay")"
    mapfile -t rows < <(python $tables remedy_best "${fresh[@]}")
    form=$(untied_form "$decay")
    [ "$form" = 0 ] || rows[2]=
    for k in 0 1 2; do
        [ -n "${rows[$k]}" ] || continue
        fresh_rows "${fresh[$k]/rfresh/rhorizon}" "${rows[$k]}" config/ladder_w160.py --optimizer=adamw --seeds=3 \
            ${remedy_flags[$k]} $(python $tables flags horizon) --ends_decay="$decay"
        [ ! -f "${fresh[$k]/rfresh/rhorizon}/summary.json" ] || python $tables curves "${fresh[$k]/rfresh/rhorizon}"
    done ;;
remedy_horizon_lower)  # the horizon at its own length: each arm it trained, a rung lower on every rate it tunes, over
    # the same epoch, seed 1337; a lower rate that wins by more than a seed's spread goes on to three seeds by hand.
    # One run at a time on one torch thread, as the horizon's float32 records were trained, so that a run pairs with
    # the pick's run on its seed.
    at=out-exp7-rhorizon-adamw-w160-${1:-coupled}
    for dir in "$at" "$at-emb_scale" "$at-emb_scale-untied" "$at-untied"; do
        rows=$(python $tables remedy_picks "$dir" 2> /dev/null) || continue  # a horizon this decay did not train
        OMP_NUM_THREADS=1 python ablate.py config/ladder_w160.py --optimizer=adamw \
            --modes="$(python $tables lower "$rows")" --seeds=1 --jobs=1 \
            $([[ $dir == *emb_scale* ]] && echo --emb_scale=true) $(python $tables flags horizon) \
            --ends_decay="${1:-coupled}" --out_dir="$dir-lower"
    done ;;
remedy_horizon_confirm)  # the rungs of remedy_horizon_lower that beat their pick on seed 1337 (tied x10, by 0.023,
    # within x30's seed spread of 0.024; untied with sqrt(d) x30,x3 and proj with sqrt(d) x3, each by more than its
    # pick's spread): seeds 1338-1339 each, then a summary of the three, the better of rung and pick on three seeds read;
    # and a rung lower again on seed 1337 (tied x3, untied x30,x1 and x10,x3, proj x1). One run at a time on one torch
    # thread, as remedy_horizon_lower.
    at=out-exp7-rhorizon-adamw-w160-${1:-coupled}
    horizon="$(python $tables flags horizon) --ends_decay=${1:-coupled} --jobs=1"
    read -r -a won <<< "tied_e10:$at-lower untied_e30_h3:$at-emb_scale-untied-lower proj_e3:$at-emb_scale-lower"
    for arm in "${won[@]}"; do
        row=${arm%%:*} dir=${arm#*:} scale=$([[ $arm == *emb_scale* ]] && echo --emb_scale=true)
        for seed in 1338 1339; do
            OMP_NUM_THREADS=1 python ablate.py config/ladder_w160.py --optimizer=adamw --modes="$row" --seed=$seed \
                --seeds=1 $scale $horizon --out_dir="$dir"
        done
        OMP_NUM_THREADS=1 python ablate.py config/ladder_w160.py --optimizer=adamw --modes="$row" --seeds=3 $scale \
            $horizon --out_dir="$dir"  # trains nothing: the three seeds' summary
        cp "$dir/summary.md" "$dir/summary-confirmed.md" && cp "$dir/summary.json" "$dir/summary-confirmed.json"
        python $tables curves "$dir" && mv "$dir/curves.csv" "$dir/curves-confirmed.csv"
    done
    for arm in tied_e3:$at-lower2 untied_e30_h3,untied_e10_h10,untied_e30_h1,untied_e10_h3:$at-emb_scale-untied-lower \
               proj_e3,proj_e1:$at-emb_scale-lower; do  # seed 1337's rungs side by side
        OMP_NUM_THREADS=1 python ablate.py config/ladder_w160.py --optimizer=adamw --modes="${arm%%:*}" --seeds=1 \
            $([[ $arm == *emb_scale* ]] && echo --emb_scale=true) $horizon --out_dir="${arm#*:}"
    done ;;
remedy_depth)  # depth apart: the best remedy at w160 x 4, swept along its own rate (half length, one seed, widened),
    # then its best, and that size's untied and plain tied bests (their committed sweep), on five fresh seeds each
    # (1342 on: none of them picked a rate), paired by seed, all with the control's warmup
    decay=${1:-coupled}
    read -r -a fresh <<< "$(remedy_dirs rfresh "$decay")"
    read -r -a sweeps <<< "$(remedy_dirs rsweep "$decay" w160_shallow)"
    read -r -a depth <<< "$(remedy_dirs rdepth "$decay" w160_shallow)"
    read -r remedy rows <<< "$(python $tables remedy_neighbours "${fresh[@]}")"
    sweep_rows w160_shallow adamw "${sweeps[$remedy]}" "$rows" --warmup_iters=50 --ends_decay="$decay" \
        ${remedy_flags[$remedy]}
    IFS=, read -r untied tied <<< "$(python $tables best out-exp7-sweep-adamw-w160_shallow)"
    rows=("$tied" "" "$untied")
    best=$(python $tables best "${sweeps[$remedy]}")
    rows[$remedy]=${rows[$remedy]:+${rows[$remedy]},}$best
    for k in 0 1 2; do
        [ -n "${rows[$k]}" ] || continue
        python ablate.py config/ladder_w160_shallow.py --optimizer=adamw --modes="${rows[$k]}" --seed=1342 \
            --seeds=5 ${remedy_flags[$k]} --warmup_iters=100 --ends_decay="$decay" --out_dir="${depth[$k]}"
    done ;;
horizon)  # does tying's cost keep shrinking as the run lengthens? The rates: the select stage's pick where it ran,
    # else the sweep's best; each run's curve of evaluations goes to curves.csv beside its summary
    for size in ${@:-w128 w160}; do
        python ablate.py "config/ladder_$size.py" --optimizer=muon --modes="$(horizon_rows "$size")" --seeds=3 \
            $(python $tables flags horizon) --out_dir="out-exp7-horizon-muon-$size"
        python lab/experiment7_tables.py curves "out-exp7-horizon-muon-$size"
    done ;;
horizon_lower)  # the horizon at its own length: seed 1337, each arm's rates trained again here beside a rung lower on
    # every rate it tunes (a rate picked at 200 steps need not be the best over 1,376). The rungs are read against the
    # picks' runs here, which also tell whether this machine reproduces the committed ones (bf16 differs between
    # CPU kinds)
    for size in ${@:-w128 w160}; do
        rows=$(horizon_rows "$size")
        python ablate.py "config/ladder_$size.py" --optimizer=muon --modes="$rows,$(python $tables lower "$rows")" \
            --seeds=1 $(python $tables flags horizon) --out_dir="out-exp7-horizon-muon-$size-lower"
    done ;;
horizon_best)  # each arm at its rate for the horizon's length, on this machine: per arm the lowest rung of
    # horizon_lower that beat its pick's run here by more than the pick's seed spread, else the pick, on seeds
    # 1337-1339 beside the other arm's (a bf16 run ends apart between CPU kinds, so a pair trains on one). The seed-1337
    # runs are horizon_lower's; the summary's tied - untied is the horizon's cost at each arm's rate for that length
    for size in ${@:-w128 w160}; do
        at=out-exp7-horizon-muon-$size
        rows=$(python $tables horizon_best "$at" "$at-lower")
        [ "$rows" != "$(horizon_rows "$size")" ] || { echo "$size: no rung won: the picks' cost stands"; continue; }
        mkdir -p "$at-best"
        for row in ${rows//,/ }; do [ -e "$at-best/$row-seed1337" ] || cp -r "$at-lower/$row-seed1337" "$at-best/"; done
        python ablate.py "config/ladder_$size.py" --optimizer=muon --modes="$rows" --seeds=3 \
            $(python $tables flags horizon) --out_dir="$at-best"
        python lab/experiment7_tables.py curves "$at-best"
    done ;;
horizon_lower2)  # does the epoch's rate keep falling? Each arm's rate from horizon_best, a rung lower again on every
    # rate it tunes, seed 1337, trained here beside horizon_best's seed-1337 runs (this machine's kind)
    for size in ${@:-w128 w160}; do
        at=out-exp7-horizon-muon-$size
        rows=$(python $tables horizon_best "$at" "$at-lower")
        python ablate.py "config/ladder_$size.py" --optimizer=muon --modes="$(python $tables lower "$rows")" \
            --seeds=1 $(python $tables flags horizon) --out_dir="$at-lower2"
    done ;;
*)
    echo "usage: bash config/experiment7.sh sweep|confirm|depth|control|blocks|pair|remedies|select|select_adamw|shallow|horizon|horizon_lower|horizon_best|horizon_lower2|remedy_sweep|remedy_select|remedy_untied_sqrt_d|remedy_horizon|remedy_horizon_lower|remedy_horizon_confirm|remedy_depth [SIZE...]" >&2
    exit 2 ;;
esac

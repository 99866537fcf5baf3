#!/usr/bin/env bash
# Experiment 6 (docs/experiment6.md): the learning-rate sweep under AdamW and under Muon (stage 1, half-length
# runs, one seed), then the five-seed confirmation at the default rates and at each setting's best (stage 2,
# full length, config/ablate_bpe_rates_confirm_adamw.py and _muon.py). Every ablate.py command skips the runs it
# finished before, so this script can be run again after an interruption.
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   bash config/experiment6.sh sweep       # 39 + 21 half-length cells and 8 base-rate runs
#   bash config/experiment6.sh edges       # 5 more cells where a best stood on the grid's edge
#   bash config/experiment6.sh confirm     # 15 + 25 full-length runs and the tuned lens on 30 of them
#   bash config/experiment6.sh select OPTIMIZER  # adamw or muon: untied's and tied's picks by the select rule
#   bash config/experiment6.sh fresh OPTIMIZER   # a pick that moved, on the confirmation's five seeds
#   bash config/experiment6.sh fresh_float32 OPTIMIZER  # every pick on those seeds, trained here in float32
#   bash config/experiment6.sh lens        # experiment 5's AdamW untied and tied again, with the tuned lens
#   bash config/experiment6.sh controls    # the expert reading's controls: the ends' decay held per step
#                                          # or off at the best rates, and Muon's confirmation with q, k, v apart
set -euo pipefail
cd "$(dirname "$0")/.."
muon_lr=$(python -c "import train; print(train.DEFAULTS['muon_lr'])")
# Muon's grid: the 4 x 4 middle of AdamW's (its edges were AdamW's losers), tied over the same span
muon_modes=$(python -c "print(','.join([f'untied_e{e}_h{h}' for e in ('1', '3', '10', '30') for h in ('0.3', '1', '3', '10')]
                                       + [f'tied_e{e}' for e in ('0.3', '1', '3', '10', '30')]))")
base_sweep() {  # OPTIMIZER FACTOR...: every rate of the model (AdamW's and Muon's) times each factor, untied and tied
    for factor in "${@:2}"; do
        python ablate.py config/ablate_bpe_rates.py --optimizer=$1 --modes=untied,tied \
            --learning_rate=$(python -c "print(f'{1e-3 * $factor:g}')") \
            --muon_lr=$(python -c "print(f'{$muon_lr * $factor:g}')") --out_dir=out-exp6-rates-$1-base$factor
    done
}
tables=lab/experiment7_tables.py
confirmation() {  # OPTIMIZER: the five-seed confirmation's config and flags (Muon's with q, k, v apart, as today's)
    if [ "$1" = adamw ]; then echo config/ablate_bpe_rates_confirm_adamw.py; else
        echo config/ablate_bpe_rates_confirm_muon.py --muon_qkv=split; fi
}
case "${1:-}" in
sweep)
    python ablate.py config/ablate_bpe_rates.py --out_dir=out-exp6-rates-adamw
    base_sweep adamw 0.3 3
    python ablate.py config/ablate_bpe_rates.py --optimizer=muon --modes="$muon_modes" --out_dir=out-exp6-rates-muon
    base_sweep muon 0.3 3 ;;
edges)  # where the sweep's best stood on its edge: the table's rate beyond x100, the base rate beyond x3
    # the x300 cell in a folder of its own beside untied (the same seed and data order as every cell; untied again
    # checks that), merged into the sweep's tables and heat map (lab/experiment6_tables.py, at commit c72d8a3)
    python ablate.py config/ablate_bpe_rates.py --modes=untied,untied_e300_h3 --out_dir=out-exp6-rates-adamw-e300
    base_sweep adamw 10  # (AdamW's runs ignore the muon_lr it passes)
    base_sweep muon 10 ;;
select)  # OPTIMIZER: the select rule (docs/experiments.md) for untied and tied: each one's two best sweep cells and
    # their neighbours, full length, three seeds (1342-1344, as experiment 8's select), until each pick is confirmed
    # Muon's in float32, as its record was trained: bf16 Muon differs between CPU kinds (fresh_float32)
    python $tables select "out-exp6-select-$2" "$(python $tables top 2 "out-exp6-rates-$2")" $(confirmation "$2") \
        --tuned_lens= --seed=1342 --seeds=3 $(if [ "$2" = muon ]; then echo --dtype=float32; fi) ;;
fresh)  # OPTIMIZER: each new pick on the confirmation's five seeds (1337-1341), beside the committed arms it pairs with
    out=out-exp6-confirm-$2
    if [ "$2" = muon ]; then out=$out-split; fi  # (an assignment from a failing $(...) would end the script)
    rows=$(python $tables untrained "$out" "$(python $tables remedy_picks "out-exp6-select-$2")")
    [ -z "$rows" ] || python ablate.py $(confirmation "$2") --modes="$rows" --tuned_lens= --out_dir="$out" ;;
fresh_float32)  # OPTIMIZER: every pick (untied's and tied's) on the confirmation's five seeds in float32, so that
    # both arms of each pair come from one machine in one precision: a CPU without native bf16 does not reproduce
    # the bf16 confirmation within 0.005 (record experiment8-check-muon-float32), and a select stage trained there
    # picks among float32 runs; as fresh, the rows its committed record holds are not trained again
    out=out-exp6-confirm-$2-float32
    rows=$(python $tables untrained "$out" "$(python $tables remedy_picks "out-exp6-select-$2")")
    [ -z "$rows" ] || python ablate.py $(confirmation "$2") --modes="$rows" --dtype=float32 --tuned_lens= \
        --out_dir="$out" ;;
confirm)  # the rows each config names come from the sweep's best cells
    python ablate.py config/ablate_bpe_rates_confirm_adamw.py
    python ablate.py config/ablate_bpe_rates_confirm_muon.py ;;
lens)  # claim 17 at the default rates too: experiment 5's untied and tied under AdamW trained again (their
    # checkpoints are not kept) with the lens, which also checks that they reproduce on this machine
    python ablate.py config/ablate_bpe_2026.py --modes=untied,tied --tuned_lens=all --out_dir=out-exp6-lens-adamw ;;
controls)  # a rate is also a decay (docs/experiment6.md, "The controls"): at each best row, the ends' decay per
    # step held at x1's (--ends_decay=per_step) or off (none), five seeds each; and Muon with each of q, k, v
    # orthogonalised apart (--muon_qkv=split), its confirmation again with the tuned lens, then its decay controls on
    # that footing
    # AdamW's at the select stage's picks (out-exp6-select-adamw, else its record); the rows its records hold are kept
    picks=$(python $tables remedy_picks out-exp6-select-adamw)
    for form in per_step none; do
        out=out-exp6-decay-adamw-$form
        rows=$(python $tables untrained "$out" "$picks")
        [ -z "$rows" ] || python ablate.py config/ablate_bpe_rates_confirm_adamw.py --modes="$rows" --tuned_lens= \
            --ends_decay=$form --out_dir="$out"
    done
    python ablate.py config/ablate_bpe_rates_confirm_muon.py --muon_qkv=split --out_dir=out-exp6-confirm-muon-split
    for form in per_step none; do
        python ablate.py config/ablate_bpe_rates_confirm_muon.py --muon_qkv=split --modes=untied_e10_h3,tied_e10 \
            --tuned_lens= --ends_decay=$form --out_dir=out-exp6-decay-muon-$form
    done ;;
*)
    echo "usage: bash config/experiment6.sh sweep|edges|confirm|lens|controls," \
        "or select|fresh|fresh_float32 adamw|muon" >&2
    exit 2 ;;
esac

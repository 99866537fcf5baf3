#!/usr/bin/env bash
# Experiment 6 (docs/experiment6.md): the learning-rate sweep under AdamW and under Muon (stage 1), then the
# five-seed confirmation at the default rates and at each setting's best (stage 2). Every ablate.py command
# skips the runs it finished before, so this script can be run again after an interruption.
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   bash config/experiment6.sh sweep      # 72 half-length runs, about an hour on a 2-core CPU
#   bash config/experiment6.sh confirm    # 50 full-length runs and the tuned lens, about 1.5 hours
set -euo pipefail
cd "$(dirname "$0")/.."
muon_lr=$(python -c "import train; print(train.DEFAULTS['muon_lr'])")
case "${1:-}" in
sweep)
    for optimizer in adamw muon; do
        python ablate.py config/ablate_bpe_rates.py --optimizer=$optimizer --out_dir=out-exp6-rates-$optimizer
        for factor in 0.3 3; do  # the base rate: every rate of the model (AdamW's, and Muon's) times factor
            lr=$(python -c "print(f'{1e-3 * $factor:g}')")
            mlr=$(python -c "print(f'{$muon_lr * $factor:g}')")
            python ablate.py config/ablate_bpe_rates.py --optimizer=$optimizer --modes=untied,tied \
                --learning_rate=$lr --muon_lr=$mlr --out_dir=out-exp6-rates-$optimizer-base$factor
        done
    done ;;
confirm)
    for optimizer in adamw muon; do
        python ablate.py config/ablate_bpe_rates_confirm_$optimizer.py
    done ;;
*)
    echo "usage: bash config/experiment6.sh sweep|confirm" >&2
    exit 2 ;;
esac

# Experiment 6, stage 2 under AdamW (docs/experiment6.md): five seeds, full length (experiment 5's BPE recipe,
# config/recipe_bpe.py, 700 iterations), each setting at the rates where the sweep (config/ablate_bpe_rates.py, half
# length, one seed) put its best: untied with its token table at 30x learning_rate and its head at 3x (untied_e30_h3;
# x100 for the table was within 0.003 and further out), tied with its one matrix at 10x (tied_e10), and tied untied at
# 2/3 at tied's best rate (tied_untie_e10; the head goes on at the shared matrix's rate). untied and tied at the default
# rates are experiment 5's runs, the same settings to the last key (docs/results/experiment5-bpe/summary.json), so they
# are not trained again. The tuned lens on the two best rows (claim 17). The select rule at full length then put
# untied's best a rung lower, x10 and x3 (docs/results/experiment6-select-adamw): `bash config/experiment6.sh fresh
# adamw` trains untied_e10_h3 on these seeds into the same out_dir, and the verdicts read it.
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   python ablate.py config/ablate_bpe_rates_confirm_adamw.py
base_config = 'recipe_bpe.py'  # at its full length
out_dir = 'out-exp6-confirm-adamw'
modes = 'untied_e30_h3,tied_e10,tied_untie_e10'
seeds = 5
tuned_lens = 'untied_e30_h3,tied_e10'
optimizer = 'adamw'

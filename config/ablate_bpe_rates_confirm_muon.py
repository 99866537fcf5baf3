# Experiment 6, stage 2 under Muon (docs/experiment6.md): five seeds, full length (experiment 5's BPE recipe,
# config/recipe_bpe.py, 700 iterations) with --optimizer=muon: torch's Muon for the blocks' matrices at
# muon_lr (train.py's default, 8e-3), AdamW for the tables, the head and the gains at learning_rate. Untied and
# tied at the default rates, then each at the rates where the sweep (config/ablate_bpe_rates.py --optimizer=muon,
# half length, one seed) put its best: untied with its token table at 10x learning_rate and its head at 3x
# (untied_e10_h3), tied with its one matrix at 10x (tied_e10), and tied untied at 2/3 at tied's best rate
# (tied_untie_e10). The tuned lens on untied and tied at both rates (claim 17).
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   python ablate.py config/ablate_bpe_rates_confirm_muon.py
base_config = 'recipe_bpe.py'  # at its full length
out_dir = 'out-exp6-confirm-muon'
modes = 'untied,tied,untied_e10_h3,tied_e10,tied_untie_e10'
seeds = 5
tuned_lens = 'untied,tied,untied_e10_h3,tied_e10'
optimizer = 'muon'
muon_qkv = 'fused'  # as its sweep; config/experiment6.sh controls runs it again with q, k, v apart (split)

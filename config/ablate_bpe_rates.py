# Experiment 6, stage 1: the learning-rate sweep (claim 14; docs/experiment6.md). Experiment 5's BPE recipe
# (config/recipe_bpe.py: the 11,706 GPT-2 ids of tiny shakespeare, GPT-2's init, 4 layers, width 128) at
# half its length, one seed: untied with the token table's rate (_eX) and the head's (_hY) varied independently,
# each over two orders of magnitude in steps of sqrt(10) (X from 0.3 to 30, Y from 0.03 to 3 times
# learning_rate: 25 cells, the embed-heavy side where nanochat's 50x and modded-nanogpt's 175x lie), and tied
# with its one rate over the span of both (X from 0.03 to 30: 7 cells). Every cell has the same seed, data
# order and evaluation batches. Then the base rate: untied and tied at learning_rate x0.3 and x3.
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   python ablate.py config/ablate_bpe_rates.py                                     # AdamW, 39 cells
#   python ablate.py config/ablate_bpe_rates.py --optimizer=muon --out_dir=out-exp6-rates-muon --modes=...
#   python ablate.py config/ablate_bpe_rates.py --modes=untied,tied --learning_rate=3e-4 --out_dir=out-exp6-rates-lr3e-4
#   (config/experiment6.sh runs them all, both optimizers, then the five-seed confirmation.)
# The first 25 + 7 cells put untied's optimum on the grid's edge (embed x30, head x3): the last six untied
# cells (embed x100, head x10) and tied_e100 extend it until it is inside (docs/experiment6.md).
# Half length (350 iterations, warmup 50, 1.2 epochs) so that the sweeps fit in about 1.5 hours of a 2-core CPU;
# the confirmation runs (config/ablate_bpe_rates_confirm_adamw.py and _muon.py) are full length. A shorter run
# tends to prefer a somewhat higher rate: the docs say so where it matters.
base_config = 'recipe_bpe.py'  # at half its length, below
out_dir = 'out-exp6-rates-adamw'
modes = 'untied_e0.3_h0.03,untied_e0.3_h0.1,untied_e0.3_h0.3,untied_e0.3_h1,untied_e0.3_h3,untied_e1_h0.03,untied_e1_h0.1,untied_e1_h0.3,untied_e1_h1,untied_e1_h3,untied_e3_h0.03,untied_e3_h0.1,untied_e3_h0.3,untied_e3_h1,untied_e3_h3,untied_e10_h0.03,untied_e10_h0.1,untied_e10_h0.3,untied_e10_h1,untied_e10_h3,untied_e30_h0.03,untied_e30_h0.1,untied_e30_h0.3,untied_e30_h1,untied_e30_h3,untied_e100_h1,untied_e100_h3,untied_e100_h10,untied_e3_h10,untied_e10_h10,untied_e30_h10,tied_e0.03,tied_e0.1,tied_e0.3,tied_e1,tied_e3,tied_e10,tied_e30,tied_e100'
seeds = 1

muon_qkv = 'fused'  # experiment 6's Muon runs orthogonalised c_attn's q, k, v stack as one matrix (docs/optimizers.md)

max_iters = 350
warmup_iters = 50
eval_interval = 50

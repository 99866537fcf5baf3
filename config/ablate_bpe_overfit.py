# Experiment 4: the weight-sharing claims of Press & Wolf (arXiv:1608.05859) on data small enough
# to overfit: does tying lower the best validation loss, overfit less, help rare tokens, spike less?
# GPT-2 BPE on tiny shakespeare, only the 11,706 GPT-2 ids the text uses (304,222 training tokens),
# tied against untied with GPT-2's own init, three seeds.
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   python ablate.py config/ablate_bpe_overfit.py
#   python ablate.py config/ablate_bpe_overfit.py --emb_scale=true --out_dir=out-ablation-bpe-overfit-embscale  # claim 8
# (--input: tiny shakespeare anywhere on disk, e.g. data/_sources/tinyshakespeare.txt once `python prepare.py`
# has fetched it. The full 50257 vocabulary would work too, but its head is 4.3x larger, and at this
# width the head is most of a CPU step: the compact one keeps a run within the budget below.)
dataset = 'shakespeare_compact'
modes = 'untied,tied'
seeds = 3

# GPT-2's init: N(0, 0.02) everywhere, residual projections scaled, no sqrt(d) input scaling.
# At width 128 the self term of (*) is d*sigma/sqrt(2) = 1.8 (about d*sigma = 2.6 with --emb_scale=true), far
# below log n = 9.37: both modes start near log n, so what differs later is training, not the start.
zero_init_residual = False
emb_scale = False
init_std = 0.02

n_layer = 4
n_head = 4
n_embd = 128
block_size = 64
batch_size = 16        # 1,024 tokens per iteration
dropout = 0.0          # no regulariser of its own: overfitting must be free to show

# Sizing, measured on this project's 2-core AMD EPYC while another run used both cores (how ablations
# run here, two side by side), OMP_NUM_THREADS=1: 253 ms/iteration tied, 233 untied (about 4,000
# tokens/s), and one evaluation of 20 + 20 fixed batches 5.5 s. The validation loss has to pass its
# minimum for claims 6 and 7, and 400 iterations (1.35 epochs) is too early for that; 2500
# iterations are 2,560,000 tokens, 8.4 epochs of the 304,222 training tokens:
# 2500 x 0.24 s + 26 evaluations x 5.5 s = about 12.5 minutes a run on one thread. Measured (the README's
# experiment 4, two one-thread processes side by side, bfloat16 autocast): 761-955 s a run, 41-46 minutes
# for the three seeds of one mode; untied's validation loss is lowest near iteration 1400 and rises after.
learning_rate = 1e-3
max_iters = 2500
warmup_iters = 100
lr_decay_iters = None  # cosine from 1e-3 down to min_lr over the whole run
min_lr = 1e-4
eval_interval = 100
eval_iters = 20        # 20 fixed batches per split: 20,480 tokens, about 60 % of the validation split
log_interval = 1       # every step: the spike counts need every grad_norm and step loss
out_dir = 'out-ablation-bpe-overfit'

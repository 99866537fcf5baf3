# Experiment 5's BPE recipe, the one experiments 4 to 7 start from: each of their configs names it as base_config
# and writes only what it changes. GPT-2 BPE on tiny shakespeare with only the 11,706 GPT-2 ids the text uses
# (304,222 training tokens), GPT-2's init, 4 layers of width 128, 700 iterations. Experiment 4
# (config/ablate_bpe_overfit.py) chose the data, the init and the shape; experiment 5 (config/ablate_bpe_2026.py)
# the length and the evaluation, and its header says why.
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   python ablate.py config/recipe_bpe.py   # on its own: every tie mode, one seed, in out-ablation
dataset = 'shakespeare_compact'

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

learning_rate = 1e-3
max_iters = 700        # 716,800 tokens, 2.4 epochs of the training tokens
warmup_iters = 100
lr_decay_iters = None  # cosine from learning_rate down to min_lr over the whole run
min_lr = 1e-4
eval_interval = 100
eval_iters = 10        # 10 fixed batches per split: they only pick best.pt, which is scored on the whole split
log_interval = 1       # every step: the spike counts need every grad_norm and step loss

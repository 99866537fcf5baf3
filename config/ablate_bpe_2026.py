# Experiment 5, BPE: the 2026 claims (rows 10-13 of the verdict table) and claims 5 and 7 on five seeds, in
# experiment 4's setting (config/ablate_bpe_overfit.py: GPT-2 BPE on tiny shakespeare with the 11,706 ids
# it uses, GPT-2's init, no sqrt(d) input scaling), shortened to fit a CPU session: tied, untied,
# pseudo-inverse tying (pit), and tied with its input-side gradient scaled by 2 and by 4, 5 seeds each.
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   python ablate.py config/ablate_bpe_2026.py
# Sizing, measured on a 2-core AMD EPYC with native bf16 (bfloat16 autocast): one run of experiment 4's
# 2500 iterations with 20 + 20 evaluation batches costs about 470 s alone on one thread and more with a
# second run beside it, so 25 runs would take over an hour and a half. 1000 iterations (1,024,000 tokens,
# 3.4 epochs of the 304,222 training tokens) with 10 + 10 evaluation batches every 100 keep the grid near
# 50 minutes; the best point is kept as best.pt and scored on the whole validation split, so the
# cheaper evaluation only picks it.
out_dir = 'out-ablation-bpe-2026'
dataset = 'shakespeare_compact'
modes = 'untied,tied,pit,tied_igs2,tied_igs4'
seeds = 5

zero_init_residual = False
emb_scale = False
init_std = 0.02

n_layer = 4
n_head = 4
n_embd = 128
block_size = 64
batch_size = 16
dropout = 0.0

learning_rate = 1e-3
max_iters = 1000
warmup_iters = 100
lr_decay_iters = None
min_lr = 1e-4
eval_interval = 100
eval_iters = 10
log_interval = 1

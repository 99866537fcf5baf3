# The one-GPU character-level recipe (NanoGPT's "baby GPT"): a few minutes on one modern GPU.
#   python train.py config/train_shakespeare_char.py [--tie_mode=shuffle]
out_dir = 'out-shakespeare-char'
dataset = 'shakespeare_char'
eval_interval = 250
eval_iters = 200
log_interval = 10

batch_size = 64
block_size = 256      # characters of context

n_layer = 6
n_head = 6
n_embd = 384
dropout = 0.2

learning_rate = 1e-3  # a small model can take a large step
max_iters = 5000
lr_decay_iters = 5000
min_lr = 1e-4
beta2 = 0.99          # more tokens per iteration would allow 0.95
warmup_iters = 100

# The initialisation this config's numbers were made with (GPT-2's: train.py's default until the default became
# the one that shows the trap), stated so that they reproduce whatever train.py's default is now.
init_std = 0.02
emb_scale = False
zero_init_residual = False

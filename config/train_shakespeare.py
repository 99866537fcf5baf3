# GPT-2 BPE on the same corpus (vocabulary 50257): here the embedding is most of the model, so
# tying saves the most parameters and plain tying's initial loss is furthest above log n.
#   python prepare.py --dataset=shakespeare && python train.py config/train_shakespeare.py
out_dir = 'out-shakespeare'
dataset = 'shakespeare'
eval_interval = 250
eval_iters = 50
log_interval = 10

batch_size = 16
block_size = 256
gradient_accumulation_steps = 2

n_layer = 6
n_head = 6
n_embd = 384
dropout = 0.1
# vocab_size is the data's 50257: on a GPU, --pad_vocab=auto pads the head's matmul to 50304 rows (NanoGPT's
# faster shape) while the loss stays over the 50257 real tokens, not 47 more that no text holds

learning_rate = 6e-4
max_iters = 3000
lr_decay_iters = 3000
min_lr = 6e-5
beta2 = 0.95
warmup_iters = 100

# The initialisation this config's numbers were made with (GPT-2's: train.py's default until the default became
# the one that shows the trap), stated so that they reproduce whatever train.py's default is now.
init_std = 0.02
emb_scale = False
zero_init_residual = False

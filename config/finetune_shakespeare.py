# Fine-tune OpenAI's GPT-2 small (124M parameters) on Shakespeare in GPT-2 BPE: NanoGPT's finetune_shakespeare recipe,
# sized for GPT-2 small so that a CPU can run it (a few seconds a step). Needs transformers (pip install transformers)
# and GPT-2's weights, which transformers downloads once (about 500 MB) into its cache; offline, set init_from to a
# folder written by GPT2LMHeadModel.save_pretrained.
#   python prepare.py --dataset=shakespeare && python train.py config/finetune_shakespeare.py
#   python sample.py --out_dir=out-finetune-shakespeare --start="ROMEO:"
#   python export.py --out_dir=out-finetune-shakespeare --to=out-finetune-shakespeare-hf
out_dir = 'out-finetune-shakespeare'
dataset = 'shakespeare'
init_from = 'gpt2'             # or gpt2-medium, gpt2-large, gpt2-xl (same recipe, more memory), or a folder

# n_layer, n_head, n_embd, vocab_size, bias and the GELU come from the weights; setting them here would
# be an error. tie_mode stays at its default, which follows the weights: GPT-2 was trained tied.
block_size = 256               # the first 256 of GPT-2's 1024 positions: shorter windows, cheaper steps
dropout = 0.0

# 8 x 4 windows of 256 tokens = 8,192 tokens per step
batch_size = 4
gradient_accumulation_steps = 8

# The weights already model English. A small constant learning rate adapts them to the style of the
# corpus without overwriting what they know, and a few steps are enough to see it in the samples;
# long fine-tuning on 1 MB of text overfits quickly (watch val_loss in metrics.csv).
learning_rate = 3e-5
decay_lr = False
max_iters = 20
eval_interval = 5
eval_iters = 20
log_interval = 1

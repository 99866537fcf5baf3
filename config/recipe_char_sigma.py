# Experiment 3's character-level recipe, the one experiment 5's character grid starts from too: each of their
# configs names it as base_config and writes only what it changes. train.py's default model (4 layers, 4 heads,
# width 128, context 64, batch 12, the full 2000 iterations) on tiny shakespeare (vocabulary 65), with
# sigma = 1/sqrt(d) = 0.0884 instead of 0.02, identity blocks at init and sqrt(d) input scaling, so that the
# self term of (*) is large without a wide model: 11.3 against log n = 4.17 (config/ablate_char_sigma.py).
#   python prepare.py --input=tinyshakespeare.txt
#   python ablate.py config/recipe_char_sigma.py   # on its own: every tie mode, one seed, in out-ablation
dataset = 'tinyshakespeare'    # tiny shakespeare; data/shakespeare_char/ is the same text where prepare.py downloaded it

zero_init_residual = True
emb_scale = True
init_std = 0.0884              # 1/sqrt(128)

max_iters = 2000
lr_decay_iters = 2000
warmup_iters = 100
eval_interval = 50             # the copy probe's resolution: a tied model unlearns copying in the first hundreds
eval_iters = 10                # 10 fixed batches per split: 40 evaluations cost about 13 % of the run
log_interval = 1               # every step: the gradient-source probe and the spike counts read them all
# dtype stays 'auto': bfloat16 autocast on CPUs with native bf16, float32 elsewhere.

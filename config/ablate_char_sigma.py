# Experiment 3 of the tie-mode ablation: character level, where tying hurts. train.py's default
# recipe (4 layers, 4 heads, width 128, context 64, batch 12, the full 2000 iterations) on tiny
# shakespeare (vocabulary 65), with sigma = 1/sqrt(d) = 0.0884 instead of 0.02 and identity blocks
# at init, so that the self term of (*) is large without a wide model: d*sigma*s/sqrt(s^2+1) = 11.3
# with emb_scale (s = sqrt(d)), against log n = 4.17. Every tie mode plus tied_untie, 5 seeds each.
#   python prepare.py --input=tinyshakespeare.txt     # or plain `python prepare.py` where it can download it
#   python ablate.py config/ablate_char_sigma.py   # one run per CPU core at a time (--jobs), one bar
# and without the sqrt(d) input scaling, for tied, untied and one remedy:
#   python ablate.py config/ablate_char_sigma.py --emb_scale=false --modes=tied,untied,shuffle --out_dir=out-ablation-char-sigma-noscale
out_dir = 'out-ablation-char-sigma'
dataset = 'tinyshakespeare'    # tiny shakespeare; data/shakespeare_char/ is the same text where prepare.py downloaded it
seeds = 5

zero_init_residual = True
emb_scale = True
init_std = 0.0884              # 1/sqrt(128)

max_iters = 2000
lr_decay_iters = 2000
warmup_iters = 100
eval_interval = 50             # the copy probe's resolution: a tied model unlearns copying in the first hundreds
eval_iters = 10                # 10 fixed batches per split: 40 evaluations cost about 13 % of the run
log_interval = 1
# dtype stays 'auto': bfloat16 autocast on CPUs with native bf16, float32 elsewhere.

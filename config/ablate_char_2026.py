# Experiment 5, character level: the 2026 claims (rows 10-13 of the verdict table) in experiment 3's
# setting (the same recipe as config/ablate_char_sigma.py: sigma = 1/sqrt(d), identity blocks, sqrt(d)
# input scaling, where (*) makes plain tying start at 11.3 against log n = 4.17): tied and untied,
# pseudo-inverse tying (pit), and tied with its input-side gradient scaled by 2 and by 4 (the rows
# tied_igs2 and tied_igs4), 5 seeds each, every run evaluated on the same batches (eval_seed).
#   python prepare.py --input=tinyshakespeare.txt
#   python ablate.py config/ablate_char_2026.py
out_dir = 'out-ablation-char-2026'
dataset = 'tinyshakespeare'
modes = 'untied,tied,pit,tied_igs2,tied_igs4'
seeds = 5

zero_init_residual = True
emb_scale = True
init_std = 0.0884              # 1/sqrt(128)

max_iters = 2000
lr_decay_iters = 2000
warmup_iters = 100
eval_interval = 50
eval_iters = 10
log_interval = 1               # every step: the gradient-source probe and the spike counts read them all

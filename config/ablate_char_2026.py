# Experiment 5, character level: the 2026 claims (rows 10-13 of the verdict table) in experiment 3's
# setting (the same recipe as config/ablate_char_sigma.py, config/recipe_char_sigma.py: sigma = 1/sqrt(d),
# identity blocks, sqrt(d) input scaling, where (*) makes plain tying start at 11.3 against log n = 4.17):
# tied and untied, pseudo-inverse tying (pit), and tied with its input-side gradient scaled by 2 and by 4
# (the rows tied_igs2 and tied_igs4), 5 seeds each, every run evaluated on the same batches (eval_seed).
#   python prepare.py --input=tinyshakespeare.txt
#   python ablate.py config/ablate_char_2026.py
base_config = 'recipe_char_sigma.py'  # experiment 3's recipe
out_dir = 'out-ablation-char-2026'
modes = 'untied,tied,pit,tied_igs2,tied_igs4'
seeds = 5

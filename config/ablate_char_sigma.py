# Experiment 3 of the tie-mode ablation: character level, where tying hurts. train.py's default
# recipe (4 layers, 4 heads, width 128, context 64, batch 12, the full 2000 iterations) on tiny
# shakespeare (vocabulary 65), with sigma = 1/sqrt(d) = 0.0884 instead of 0.02 and identity blocks
# at init, so that the self term of (*) is large without a wide model: d*sigma*s/sqrt(s^2+1) = 11.3
# with emb_scale (s = sqrt(d)), against log n = 4.17. Every tie mode plus tied_untie, 5 seeds each.
#   python prepare.py --input=tinyshakespeare.txt     # or plain `python prepare.py` where it can download it
#   python ablate.py config/ablate_char_sigma.py   # one run per CPU core at a time (--jobs), one bar
# and without the sqrt(d) input scaling, for tied, untied and one remedy:
#   python ablate.py config/ablate_char_sigma.py --emb_scale=false --modes=tied,untied,shuffle --out_dir=out-ablation-char-sigma-noscale
base_config = 'recipe_char_sigma.py'  # the recipe described above
out_dir = 'out-ablation-char-sigma'
seeds = 5

# The rates stage of the GPT-2-small verdict (docs/gpt2-small.md), the grid's config with these changes:
#   bash config/gpt2_small.sh rates   # = python ablate.py config/gpt2_small_rates.py
# The grid's rates are the ladder's prior from width 160; on an H200 the smoke stage (16 steps, a 5-step warmup)
# saw tied and shuffle at x100 diverge where untied learned. So before the grid's hours, each family around its
# prior and below it, 200 steps (105 M tokens) a run, one seed; then the grid with each family's best:
#   bash config/gpt2_small.sh run --modes=UNTIED_BEST,TIED_BEST,SHUFFLE_BEST
base_config = 'gpt2_small_verdict.py'
max_iters = 200
warmup_iters = 20              # the grid's tenth
eval_interval = 50
seeds = 1
modes = ('untied_e100_h10,untied_e300_h3,untied_e300_h10,tied_e10,tied_e30,tied_e100,'
         'shuffle_e10,shuffle_e30,shuffle_e100')
out_dir = 'out-gpt2-small-rates'

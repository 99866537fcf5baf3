# Experiment 7's follow-up: width 160 at the depth of w96, 4 layers of 5 heads 32 wide, to tell depth from width
# in AdamW's cost of tying at w160 (20 layers).
#   bash config/experiment7.sh shallow   # its own rate sweep under AdamW, then five seeds at its best
#   python ablate.py config/ladder_w160_shallow.py --optimizer=adamw   # untied and tied at the default rates, one seed
base_config = 'recipe_ladder.py'
n_embd = 160
n_head = 5
out_dir = 'out-exp7-w160_shallow'

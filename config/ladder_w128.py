# Experiment 7's ladder, width 128: 8 layers of 4 heads 32 wide (docs/experiment7.md has every size's counts).
#   python ablate.py config/ladder_w128.py   # untied and tied at the default rates, one seed
base_config = 'recipe_ladder.py'  # width 128 and 4 heads are experiment 5's, from there
n_layer = 8
out_dir = 'out-exp7-w128'

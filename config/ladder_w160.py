# Experiment 7's ladder, width 160: 20 layers of 5 heads 32 wide (docs/experiment7.md has every size's counts).
#   python ablate.py config/ladder_w160.py   # untied and tied at the default rates, one seed
base_config = 'recipe_ladder.py'
n_embd = 160
n_layer = 20
n_head = 5
out_dir = 'out-exp7-w160'

# Experiment 7's ladder, width 64: 2 layers of 2 heads 32 wide (docs/experiment7.md has every size's counts).
#   python ablate.py config/ladder_w64.py   # untied and tied at the default rates, one seed
base_config = 'recipe_ladder.py'
n_embd = 64
n_layer = 2
n_head = 2
out_dir = 'out-exp7-w64'

# Experiment 7's ladder, width 96: 4 layers of 3 heads 32 wide (docs/experiment7.md has every size's counts).
#   python ablate.py config/ladder_w96.py   # untied and tied at the default rates, one seed
base_config = 'recipe_ladder.py'  # 4 layers are experiment 5's, from there
n_embd = 96
n_head = 3
out_dir = 'out-exp7-w96'

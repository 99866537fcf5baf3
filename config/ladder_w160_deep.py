# Experiment 7, claim 19 at the top of the ladder: config/ladder_w160.py tied, 30 layers instead of 20, the deepest
# with no more parameters than the 20-layer untied model (within 2 % of it: tests/test_experiment7.py), as MobileLLM
# spends what sharing saves on depth. docs/experiment7.md gives both counts and what the layers cost per token.
#   python ablate.py config/ladder_w160_deep.py   # tied at the default rates, one seed
base_config = 'ladder_w160.py'
n_layer = 30
modes = 'tied'
out_dir = 'out-exp7-w160-deep'

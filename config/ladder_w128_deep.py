# Experiment 7, claim 19 at width 128: tied, with the parameters an untied head would take spent on layers instead.
# 20 layers is the deepest tied model with no more parameters than config/ladder_w128.py untied (8 layers); the
# two counts agree within 2 % (tests/test_experiment7.py; docs/experiment7.md has both, and the compute per token).
#   python ablate.py config/ladder_w128_deep.py   # tied at the default rates, one seed
base_config = 'ladder_w128.py'
n_layer = 20
modes = 'tied'
out_dir = 'out-exp7-w128-deep'

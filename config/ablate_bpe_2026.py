# Experiment 5, BPE: the 2026 claims (rows 10-13 of the verdict table) and claims 5 and 7 on five seeds, in
# experiment 4's setting (config/ablate_bpe_overfit.py: GPT-2 BPE on tiny shakespeare with the 11,706 ids
# it uses, GPT-2's init, no sqrt(d) input scaling), shortened to fit a CPU session: tied, untied,
# pseudo-inverse tying (pit), and tied with its input-side gradient scaled by 4, 5 seeds each (the
# character-level grid, config/ablate_char_2026.py, has the scales 2 and 4).
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   python ablate.py config/ablate_bpe_2026.py
# (add tied_igs2 to modes for the second scale: five runs more, about 9 minutes on 2 cores.)
# Sizing, on a 2-core AMD EPYC with native bf16 (bfloat16 autocast), two one-thread runs side by side:
# about 0.28 s an iteration (experiment 4's 761-955 s for 2500 iterations and 26 evaluations), so
# experiment 4's length for 25 runs would take over 2.5 hours. 700 iterations (716,800 tokens, 2.4
# epochs of the 304,222 training tokens) with 10 + 10 evaluation batches every 100 make a run about
# 3.5 minutes and the grid about 36. The best point is kept as best.pt and scored on the whole
# validation split, so the cheaper evaluation only picks it; at this length the validation loss may
# not have passed its minimum yet (experiment 4's untied runs passed it near 4.7 epochs).
base_config = 'recipe_bpe.py'  # the recipe, at the length and evaluation sized above
out_dir = 'out-ablation-bpe-2026'
modes = 'untied,tied,pit,tied_igs4'
seeds = 5

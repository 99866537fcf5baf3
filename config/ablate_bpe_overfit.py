# Experiment 4: the weight-sharing claims of Press & Wolf (arXiv:1608.05859) on data small enough to overfit: does tying
# lower the best validation loss, overfit less, help rare tokens, spike less? GPT-2 BPE on tiny shakespeare, only the
# 11,706 GPT-2 ids the text uses (304,222 training tokens), tied against untied with GPT-2's own init, three seeds.
#   python prepare.py --dataset=shakespeare_compact --tokenizer=gpt2 --compact_vocab=true --input=tinyshakespeare.txt
#   python ablate.py config/ablate_bpe_overfit.py
#   python ablate.py config/ablate_bpe_overfit.py --emb_scale=true --out_dir=out-ablation-bpe-overfit-embscale  # claim 8
# (--input: tiny shakespeare anywhere on disk, e.g. data/_sources/tinyshakespeare.txt once `python prepare.py`
# has fetched it. The full 50257 vocabulary would work too, but its head is 4.3x larger, and at this
# width the head is most of a CPU step: the compact one keeps a run within the budget below.)
base_config = 'recipe_bpe.py'  # the data, GPT-2's init and the shape chosen here; experiment 5 shortened the run
modes = 'untied,tied'
seeds = 3

# Sizing, measured on this project's 2-core AMD EPYC while another run used both cores (how ablations run here, two side
# by side), OMP_NUM_THREADS=1: 253 ms/iteration tied, 233 untied (about 4,000 tokens/s), and one evaluation of 20 + 20
# fixed batches 5.5 s. The validation loss has to pass its minimum for claims 6 and 7, and 400 iterations (1.35 epochs)
# is too early for that; 2500 iterations are 2,560,000 tokens, 8.4 epochs of the 304,222 training tokens:
# 2500 x 0.24 s + 26 evaluations x 5.5 s = about 12.5 minutes a run on one thread. Measured (the README's experiment 4,
# two one-thread processes side by side, bfloat16 autocast): 761-955 s a run, 41-46 minutes for the three seeds of one
# mode; untied's validation loss is lowest near iteration 1400 and rises after.
max_iters = 2500
eval_iters = 20        # 20 fixed batches per split: 20,480 tokens, about 60 % of the validation split
out_dir = 'out-ablation-bpe-overfit'

# The README's quick start: train.py's default model and init (identity blocks, sqrt(d) input scaling, sigma =
# 1/sqrt(d): the setting where plain tying starts as a copier) for 200 steps instead of 2000, so that plain tying
# and a remedy both run in under two minutes on the slowest CPU measured, evaluated every 50 steps so that the
# copy probe is seen falling while the tied head unlearns copying.
#   python train.py config/first_run.py --out_dir=out-tied          # plain tying: starts near 10.9, log n is 4.17
#   python train.py config/first_run.py --tie_mode=shuffle          # a remedy: starts near log n
max_iters = 200
eval_interval = 50
eval_iters = 10        # 10 fixed batches a split: the start and the copy probe read clearly, and the evaluations
                       # cost a twentieth of the run, so both runs fit two minutes on the slowest CPU measured

"""How long AdamW's moments keep the token table's update along the head's after an untie (docs/training.md).
The table's moments were built from both gradient sources. Experiment 5's BPE model (config/recipe_bpe.py's shape),
tied at the recipe's rate for 200 steps, untied, then 120 steps: the cosine between the table's update and the
head's, and the size of each, at a few steps after the untie. From the repository root, after experiment 5's
prepare.py command: python lab/untie_moments.py"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch
import train
from lib.training_run import make_model_config
from lib.optimizers import build_optimizer, set_rates, untie_head
from lib.prepared_data import load_splits
from model import GPT
torch.set_num_threads(1)
cfg = train.parse_train_args(['config/recipe_bpe.py', '--device=cpu', '--dtype=float32'])
splits, meta = load_splits(cfg)
cfg['vocab_size'] = meta['vocab_size']
torch.manual_seed(1337)
model = GPT(make_model_config(cfg))
opt = build_optimizer(model, cfg, 'cpu')
gen = torch.Generator().manual_seed(1337)
ctx, scaler = torch.autocast('cpu', enabled=False), torch.amp.GradScaler('cpu', enabled=False)
U = 200
for it in range(U + 120):
    if it == U:
        untie_head(model, opt)
    set_rates(opt, cfg, train.get_lr(it, cfg))
    x, y, _ = train.get_batch(splits['train'], cfg['batch_size'], cfg['block_size'], gen)
    table, head = model.token_embedding_table.weight, model.lm_head.weight
    before_t, before_h = table.detach().clone(), head.detach().clone()
    train.training_step(model, opt, scaler, [(x, y)], ctx, cfg['grad_clip'])
    if it - U in (0, 1, 2, 5, 10, 20, 40, 80, 119):
        dt, dh = table.detach() - before_t, head.detach() - before_h
        cos = torch.nn.functional.cosine_similarity(dt.flatten(), dh.flatten(), dim=0).item()
        print(f"step {it - U:3d} after the untie: cos(table update, head update) = {cos:+.3f}, "
              f"|table update| = {dt.norm():.4f}, |head update| = {dh.norm():.4f}", flush=True)

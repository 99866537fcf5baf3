"""The tuned lens (Belrose et al. 2023, arXiv 2303.08112): how much of the final prediction each layer holds.

Layer 0 is the residual stream as the embedding leaves it (the first block's input), layer l the output of
block l. For each layer below the last, an affine translator T_l(h) = A_l h + b_l, starting at the identity,
is trained with the model frozen so that the model's own final norm and head read the translated state as
the model's final distribution: minimise KL(final || head(ln_f(T_l(h_l)))), all layers at once, on training
windows. Then a layer's lens loss is the cross-entropy of head(ln_f(T_l(h_l))) over the whole validation
split. The last layer needs no translator: its lens loss is the model's own loss.

The plain logit lens is the same with every translator left at the identity; on a tied model it reads layer 0
through W's own rows, the copy machine of docs/initial-loss.md's (*), which is why the translators are trained
(docs/optimizers.md, "The tuned lens"). Both are reported (tuned_lens.json in a run's folder,
lab/run_results.lens_numbers).

For one finished run (about a minute for experiment 5's BPE model on one thread):

    from lab.tuned_lens import tuned_lens_of_run
    print(tuned_lens_of_run('out-ablation-bpe-2026/tied-seed1337'))  # {'tuned': [...], 'logit': [...], ...}
"""

import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib import run_files
from lib.prepared_data import load_splits
from train import get_batch

LENS_STEPS = 300           # translator training steps (Adam, rate decayed linearly to 0)
LENS_BATCH = 4             # training windows of the model's block_size per step
LENS_LR = 1e-2
LENS_SEED = 0              # the training windows: the same for every run, whatever its seed
SETTLED = 1e-6             # nats of KL below which a layer already reads as the final one
LENS_MAX_TARGETS = 1 << 18  # the validation split scored, up to this many targets (as the frequency buckets)
EVAL_BATCH = 32            # windows per forward pass when scoring


def whole_split_batches(tokens, block_size, max_targets):
    """Every target of tokens[1:n + 1] (n = min(len(tokens) - 1, max_targets)) predicted once, in non-overlapping
    windows of block_size: (x, y) batches of up to EVAL_BATCH full windows, then, if some are left, one shorter one."""
    n = min(len(tokens) - 1, max_targets)
    full = n // block_size
    x, y = tokens[:full * block_size].view(full, block_size), tokens[1:full * block_size + 1].view(full, block_size)
    for i in range(0, full, EVAL_BATCH):
        yield x[i:i + EVAL_BATCH], y[i:i + EVAL_BATCH]
    if n > full * block_size:
        yield tokens[full * block_size:n].view(1, -1), tokens[full * block_size + 1:n + 1].view(1, -1)


def residual_states(model, idx):
    """([layer 0, ..., layer n_layer] states, each (B, T, C)), logits): the residual stream entering the first
    block and leaving each block, taken by hooks from the model's own forward pass."""
    states = []
    hooks = [model.blocks[0].register_forward_pre_hook(lambda module, args: states.append(args[0]))]
    hooks += [block.register_forward_hook(lambda module, args, out: states.append(out)) for block in model.blocks]
    try:
        logits, _ = model(idx)
    finally:
        for hook in hooks:
            hook.remove()
    return states, logits


def train_translators(model, tokens, device, steps):
    """Translators fitted to the frozen model on windows of tokens (its training split)."""
    cfg = model.config
    translators = nn.ModuleList(nn.Linear(cfg.n_embd, cfg.n_embd) for _ in range(cfg.n_layer)).to(device)
    for layer in translators:  # one affine map per layer below the last, each starting as the identity (the logit lens)
        nn.init.eye_(layer.weight)
        nn.init.zeros_(layer.bias)
    # Adam: the embedding's translator (a linear map from token vectors to the final distribution) is far from
    # the identity, and SGD crawls there (docs/optimizers.md: layer 0 of a tied BPE run at 6.31 after 300 SGD
    # steps, 5.01 after 300 of Adam). A layer that already reads as the final one (KL below SETTLED at the first step: the
    # blocks above it are the identity) keeps the identity: its gradient is float32 noise, which Adam would
    # turn into steps the size of the rate.
    optimizer = torch.optim.Adam(translators.parameters(), lr=LENS_LR)
    fit, last, settled = {}, max(1, steps // 10), set()  # fit: the mean KL of each layer over the last tenth
    generator = torch.Generator().manual_seed(LENS_SEED)
    needs_grad = [p.requires_grad for p in model.parameters()]
    model.requires_grad_(False)  # frozen: gradients reach the translators only
    try:
        for step in range(steps):
            for group in optimizer.param_groups:
                group['lr'] = LENS_LR * (1 - step / steps)
            x, _, _ = get_batch(tokens, LENS_BATCH, cfg.block_size, generator)
            with torch.no_grad():
                states, logits = residual_states(model, x.to(device))
                final = F.log_softmax(logits.float().flatten(0, 1), dim=-1)  # (B*T, n)
            for translator, h in zip(translators, states):  # one layer's graph at a time: less memory
                if translator in settled:
                    continue
                lens = F.log_softmax(model.head(model.ln_f(translator(h))).float().flatten(0, 1), dim=-1)
                kl = F.kl_div(lens, final, log_target=True, reduction='sum') / len(final)
                if step == 0 and kl.item() < SETTLED:
                    settled.add(translator)
                    continue
                kl.backward()
                if step >= steps - last:
                    fit[translator] = fit.get(translator, 0.0) + kl.item() / last
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    finally:
        for p, flag in zip(model.parameters(), needs_grad):
            p.requires_grad_(flag)
    translators.fit = [fit.get(layer, 0.0) for layer in translators]
    return translators


@torch.no_grad()
def lens_losses(model, translators, tokens, device):
    """{'tuned': [loss per layer], 'logit': [...], 'targets': count}: mean cross-entropy over the first
    min(len(tokens) - 1, LENS_MAX_TARGETS) targets of tokens, each predicted once, through each layer's
    translator (tuned) and through none (logit); the last entry of both is the model's own loss."""
    layers = model.config.n_layer + 1
    sums, count = dict(tuned=[0.0] * layers, logit=[0.0] * layers), 0
    for x, y in whole_split_batches(tokens, model.config.block_size, LENS_MAX_TARGETS):
        y = y.to(device).flatten()
        states, logits = residual_states(model, x.to(device))
        for layer, h in enumerate(states):
            last = layer == layers - 1
            tuned = logits if last else model.head(model.ln_f(translators[layer](h)))
            logit = logits if last else model.head(model.ln_f(h))
            for kind, out in (('tuned', tuned), ('logit', logit)):
                sums[kind][layer] += F.cross_entropy(out.float().flatten(0, 1), y, reduction='sum').item()
        count += len(y)
    return dict(tuned=[s / count for s in sums['tuned']], logit=[s / count for s in sums['logit']], targets=count)


def tuned_lens(model, splits, device='cpu', steps=LENS_STEPS):
    """Train the translators on splits['train'], score every layer on splits['val']: lens_losses' dict plus
    'log_n' (a uniform guess), 'layers' (their names) and 'fit_kl' (each translator's KL at the end of training)."""
    model = model.to(device).eval()  # no dropout, in the fit and in the scoring
    translators = train_translators(model, splits['train'], device, steps)
    return dict(lens_losses(model, translators, splits['val'], device), fit_kl=translators.fit,
                layers=['embedding'] + [f'block {l + 1}' for l in range(model.config.n_layer)],
                log_n=math.log(model.config.vocab_size))


def tuned_lens_of_run(run_dir, data_dir=None, device='cpu'):
    """tuned_lens() of a run's final checkpoint (run_dir/ckpt.pt) on the dataset it was trained on (its recorded
    data_dir and dataset, or data_dir instead)."""
    path = os.path.join(run_dir, 'ckpt.pt')
    ckpt = run_files.load_checkpoint(path, 'cpu')
    model = run_files.model_from_checkpoint(ckpt, path)
    cfg = ckpt['config']
    splits, _ = load_splits(dict(cfg, data_dir=data_dir or cfg['data_dir'], block_size=model.config.block_size))
    return tuned_lens(model, splits, device)

"""The floor under a language model's loss: what counting alone scores on the same validation split.

    python lab/floor.py [--data_dir=data] [--dataset=shakespeare_works_compact] [--iters=200 --batch_size=16
                        --block_size=64 --seed=1337]

prints the cross-entropy (nats a token) on the dataset's validation split of
- a unigram model: how often each token occurs, nothing of its context;
- an interpolated Kneser-Ney bigram (Kneser and Ney 1995; Chen and Goodman 1998's interpolated form): the previous
  token's counts discounted by D = 0.75, the mass freed given to each token's "continuation" probability (in how
  many contexts it follows), which in turn keeps D of its mass for a uniform guess, so no token gets zero;
each fitted twice: on the whole training split, and on a sample the size of what one training run reads (the
windows of its batches, drawn by the same generator train.py uses for --seed: iters x batch_size windows of
block_size + 1 tokens, bigrams within a window only). Nothing is tuned on the validation split.

A model at or above the bigram floor has learned no more than which token tends to follow which; the ablations'
summaries and the experiments' tables print the floor beside their losses (lab/ablation_report.py)."""
import json
import os
import sys

import numpy as np

DISCOUNT = 0.75


def unigram_loss(train_ids, val_ids, vocab_size, discount=DISCOUNT):
    """Cross-entropy of val_ids under absolutely discounted unigram counts of train_ids, with a uniform guess below."""
    counts = np.bincount(train_ids, minlength=vocab_size).astype(np.float64)
    seen = np.count_nonzero(counts)
    p = np.maximum(counts - discount, 0) / counts.sum() + discount * seen / counts.sum() / vocab_size
    return float(-np.log(p[val_ids]).mean())


def kneser_ney_bigram_loss(pairs, val_ids, vocab_size, discount=DISCOUNT):
    """Cross-entropy of val_ids[1:] given val_ids[:-1] under an interpolated Kneser-Ney bigram of pairs (an (N, 2)
    array of (previous, next) training bigrams)."""
    V = vocab_size
    keys, counts = np.unique(pairs[:, 0].astype(np.int64) * V + pairs[:, 1], return_counts=True)
    prev, nxt = keys // V, keys % V
    context_total = np.bincount(prev, weights=counts, minlength=V)      # c(v)
    context_types = np.bincount(prev, minlength=V).astype(np.float64)  # N1+(v .): distinct tokens after v
    follows = np.bincount(nxt, minlength=V).astype(np.float64)         # N1+(. w): distinct tokens before w
    # the continuation distribution, itself discounted towards a uniform guess
    continuation = (np.maximum(follows - discount, 0) + discount * np.count_nonzero(follows) / V) / follows.sum()

    v, w = val_ids[:-1].astype(np.int64), val_ids[1:].astype(np.int64)
    found = np.minimum(np.searchsorted(keys, v * V + w), len(keys) - 1)
    pair_count = np.where(keys[found] == v * V + w, counts[found], 0)
    total = context_total[v]
    seen = total > 0
    safe = np.where(seen, total, 1)
    p = np.where(seen, np.maximum(pair_count - discount, 0) / safe + discount * context_types[v] / safe * continuation[w],
                 continuation[w])
    return float(-np.log(p).mean())


def floors(data_dir, iters=200, batch_size=16, block_size=64, seed=1337):
    """{'unigram', 'bigram'} x {'whole', 'run'}: the four cross-entropies, and how many training tokens each read."""
    import torch
    from lib.prepared_data import load_meta  # here: lab/floor.py also runs as a script, lib/ then found in main
    from train import get_batch
    meta = load_meta(data_dir)
    read = lambda split: np.fromfile(os.path.join(data_dir, f'{split}.bin'), dtype=np.dtype(meta['dtype']))  # noqa: E731
    train_ids, val_ids, V = read('train'), read('val'), meta['vocab_size']
    # the bigrams of the windows one training run reads: train.py's data generator for this seed
    tokens, generator = torch.from_numpy(train_ids.astype(np.int64)), torch.Generator().manual_seed(seed)
    windows = [get_batch(tokens, batch_size, block_size, generator) for _ in range(iters)]
    x = torch.cat([x for x, _, _ in windows]).numpy()
    y = torch.cat([y for _, y, _ in windows]).numpy()
    pairs = np.stack([x.reshape(-1), y.reshape(-1)], axis=1)
    sample_tokens = np.concatenate([x[:, :1].reshape(-1), y.reshape(-1)])
    whole_pairs = np.stack([train_ids[:-1], train_ids[1:]], axis=1)
    return dict(
        unigram_whole=unigram_loss(train_ids, val_ids, V), bigram_whole=kneser_ney_bigram_loss(whole_pairs, val_ids, V),
        unigram_run=unigram_loss(sample_tokens, val_ids, V), bigram_run=kneser_ney_bigram_loss(pairs, val_ids, V),
        train_tokens=int(len(train_ids)), run_tokens=int(iters * batch_size * (block_size + 1)),
        val_tokens=int(len(val_ids)), vocab_size=int(V), iters=iters, batch_size=batch_size, block_size=block_size,
        seed=seed, discount=DISCOUNT)


def floor_lines(floor):
    """The floor as a few lines of Markdown, for a summary."""
    return [f"Floor (lab/floor.py): on the same validation split, counting alone scores a unigram "
            f"{floor['unigram_whole']:.3f} and an interpolated Kneser-Ney bigram {floor['bigram_whole']:.3f} fitted to "
            f"the whole training split ({floor['train_tokens']:,} tokens); fitted to what one run reads "
            f"({floor['iters']} x {floor['batch_size']} windows of {floor['block_size'] + 1} tokens, seed "
            f"{floor['seed']}), {floor['unigram_run']:.3f} and {floor['bigram_run']:.3f}."]


def main(argv):
    from lib.command_line import parse_config
    cfg = parse_config(dict(data_dir='data', dataset='shakespeare_works_compact', iters=200, batch_size=16,
                            block_size=64, seed=1337), argv)
    floor = floors(os.path.join(cfg['data_dir'], cfg['dataset']), cfg['iters'], cfg['batch_size'], cfg['block_size'],
                   cfg['seed'])
    print(*floor_lines(floor))
    print(json.dumps(floor, indent=1))


if __name__ == '__main__':
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from lib.command_line import run_cli
    run_cli(main)

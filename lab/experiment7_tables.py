"""Experiment 7's plan: its ladder and grids, and the rows config/experiment7.sh trains, computed from its configs
rather than typed.

    python lab/experiment7_tables.py                 # the ladder and claim 19's models
    python lab/experiment7_tables.py sizes [adamw|deep]      # the ladder's sizes, those AdamW trains, claim 19's
    python lab/experiment7_tables.py flags half|horizon  # ablate.py flags: the sweeps' half length, the horizon
                                                     # stage's one epoch
    python lab/experiment7_tables.py grid OPTIMIZER [tied]   # a sweep's first rows
    python lab/experiment7_tables.py widen OUT_DIR   # a sweep's rows, and any neighbour of its best not yet trained
    python lab/experiment7_tables.py best OUT_DIR    # a sweep's best rows (from docs/results/ where OUT_DIR is
                                                     # gone); an error while a best lies on its edge
    python lab/experiment7_tables.py select OUT_DIR ROWS ABLATE_ARGS...  # the select rule (docs/experiments.md):
                                                     # ROWS, the sweep's best cells, and their neighbours at full
                                                     # length, trained in OUT_DIR until every pick is confirmed
    python lab/experiment7_tables.py untrained OUT_DIR ROWS  # those of ROWS that OUT_DIR's stage has not committed
    python lab/experiment7_tables.py top N OUT_DIR   # untied's N best cells and tied's, best first
    python lab/experiment7_tables.py lower ROWS      # each row's neighbours one rung below on every rate it tunes
    python lab/experiment7_tables.py rungs_won PICK_DIR RUNGS_DIR  # the rungs confirmed, and those that beat the best
                                                     # so far by more than its seed spread (one seed against three)
    python lab/experiment7_tables.py horizon_best PICK_DIR RUNGS_DIR  # each arm's lowest rung that won, else its pick
    python lab/experiment7_tables.py remedy_top N CELLS OUT_DIR...  # the remedy select stage's rows, a line a
                                                     # sweep: untied, plain tied and the N best remedies, CELLS each
    python lab/experiment7_tables.py remedy_picks OUT_DIR...  # each of those families' best cell, a line a dir
    python lab/experiment7_tables.py curves OUT_DIR  # a horizon stage's evaluations, OUT_DIR/curves.csv

config/experiment7.sh runs all but the first. Parameters are counted on models built on torch's meta device (no
memory, no data needed), FLOPs per token by lib/throughput.flops_per_token, and Muon's Newton-Schulz steps beside them.
"""

import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from lab.rate_selection import (best_cells, best_rows, committed_rows, horizon_best_rows, inside, load,  # noqa: E402
                                 missing_neighbours, neighbours, row_name, run_select, rungs_below, rungs_that_won,
                                 sweep_cells)

# What `python prepare.py` prints for config/recipe_ladder.py's dataset (its command is in that file's header);
# tests/test_experiment7.py compares them with data/ where the corpus is prepared, so that no table needs data/.
CORPUS = dict(vocab_size=19_378, train_tokens=1_409_436, val_tokens=156_605)
SIZES = ('w64', 'w96', 'w128', 'w160')  # config/ladder_SIZE.py, smallest first
DEEP = ('w128', 'w160')                 # config/ladder_SIZE_deep.py: claim 19's tied models
OPTIMIZERS = {'muon': SIZES, 'adamw': (SIZES[0], SIZES[-1])}  # practice's optimizer at every size, AdamW at the ends

# Each sweep starts around experiment 6's optima at width 128 (Muon: table x10, head x3, tied x10; AdamW: table
# x100, x30 within 0.003 of it, head x3, tied x10) and reaches a rung lower for the tied matrix, which also serves as
# the head: a head's best Adam rate is expected to fall with width (muP: Yang et al. 2022, arXiv 2203.03466).
# widen() moves any edge out.
GRIDS = {'muon': dict(embed=(3, 10, 30), head=(1, 3, 10), tied=(1, 3, 10, 30)),
         'adamw': dict(embed=(30, 100, 300), head=(1, 3, 10), tied=(1, 3, 10, 30))}
# Each remedy under AdamW at w160 (config/experiment7.sh remedy_sweep): a family of rows that differ only in the shared
# matrix's rate, swept along it alone; untied keeps its two rates. Plain tied's best was x100 (the control stage), and
# a remedy that changes the input side's scale moves that best, so each family starts around it and widen() moves
# its edges; sqrt(d) input scaling multiplies what the lookup feeds the blocks by 12.6 at width 160, so its sweep
# starts at x1. --emb_scale is a flag of the command, not of a row: its rows have a sweep (an out dir) of their own.
REMEDY_RATES = (30, 100, 300)
# pit has two rates, its orthonormal U's (the table's) and its S's (the head's: GPT.optimizer_groups), swept as untied's
# are: at x30-x1000 with S at the blocks' rate its loss stayed near log n, S grown 2 % in 100 steps, with the logits'
# whole scale to grow from U's rows, sqrt(d/n) long. U's entries are 1/sqrt(n) ~ 0.007, so its rate starts low.
PIT_ROWS = [f'pit_e{e:g}_h{h:g}' for e in (0.1, 0.3, 1) for h in (10, 30, 100)]
UNTIED_ROWS = [f'untied_e{e:g}_h{h:g}' for e in (100, 300, 1000) for h in (3, 10, 30)]  # around its AdamW best, x300 x10
REMEDY_FAMILIES = ('tied', 'shuffle', 'proj', 'pit', 'tied_untie', 'tied_igs4', 'tied_igs16')
REMEDY_GRIDS = {'remedies': [f'{family}_e{e:g}' for family in REMEDY_FAMILIES if family != 'pit'
                             for e in REMEDY_RATES] + PIT_ROWS,
                # the best two remedies of the first sweep combined (proj and sqrt(d), each about half of plain tying's
                # cost on one seed): proj's rows in the sqrt(d) sweep, around proj's own best (x300) and tied sqrt(d)'s
                'remedies_emb_scale': [f'tied_e{e:g}' for e in (1, 3, 10, 30, 100)] + UNTIED_ROWS
                + [f'proj_e{e:g}' for e in REMEDY_RATES],
                'remedies_untied': UNTIED_ROWS}
# The horizon stage: one epoch of the works' training split (1,376 windows of 16 x 64 tokens), the schedule's shape kept
# (warmup an eighth of the run, cosine over all of it), and an evaluation every eighth on 50 fixed batches of each
# split (51,200 tokens, a third of the validation split; all 153 batches would add half again to a run's time).
EPOCH_ITERS = CORPUS['train_tokens'] // (16 * 64)
HORIZON_FLAGS = (f'--max_iters={EPOCH_ITERS}', f'--warmup_iters={EPOCH_ITERS // 8}',
                 f'--eval_interval={EPOCH_ITERS // 8}', '--eval_iters=50')

TUTORIAL_VOCAB = 11_706  # experiment 5's BPE on tiny shakespeare: claim 19's table shows its shape on both corpora
NS_STEPS = 5  # torch.optim.Muon's Newton-Schulz iterations a step


def config_path(name):
    return os.path.join(ROOT, 'config', name if name.endswith('.py') else f'ladder_{name}.py')


def resolve(name, *flags):
    """The settings ablate.py runs config NAME (a size such as 'w64', 'w128_deep', or a file name) with."""
    import ablate
    return ablate.parse_args([config_path(name), *flags])


def build(cfg, tie_mode, vocab_size=CORPUS['vocab_size']):
    """The run's model, on the meta device: its shapes and counts without its memory, nor its init (on meta each
    normal_ is a Python decomposition, ms apiece: 10 of the tables' 13 s)."""
    import torch
    import model
    from lab.ablation_grid import model_config

    class Shapes(model.GPT):
        def init_weights(self):
            pass
    with torch.device('meta'):
        return Shapes(model_config(dict(cfg, tie_mode=tie_mode), vocab_size))


def newton_schulz_flops(gpt):
    """Muon's orthogonalisation a step: per map of m x n (m <= n), NS_STEPS of X X^T, its square and the product
    with X (4 m^2 n + 2 m^3). c_attn is three maps under muon_qkv='split', the default (lib/optimizers.py)."""
    total = 0
    for block in gpt.blocks:
        for p in (q for q in block.parameters() if q.dim() == 2):
            k = 3 if p is block.attn.c_attn.weight else 1
            m, n = sorted((p.shape[0] // k, p.shape[1]))
            total += k * NS_STEPS * (4 * m * m * n + 2 * m ** 3)
    return total


_COUNTED = {}


def counts(cfg, vocab_size=CORPUS['vocab_size']):
    """Parameters tied and untied, the token table's share of the tied model, the rest, and compute per token
    (kept per shape: the tables ask for the same few models many times over)."""
    from lib.throughput import flops_per_token
    from model import MODEL_KEYS
    key = (vocab_size, *(cfg[k] for k in MODEL_KEYS if k not in ('vocab_size', 'tie_mode')))
    if key not in _COUNTED:
        tied, untied = build(cfg, 'tied', vocab_size), build(cfg, 'untied', vocab_size)
        table = tied.token_embedding_table.weight.numel()
        positions = tied.position_embedding_table.weight.numel()
        _COUNTED[key] = dict(tied=tied.num_params(), untied=untied.num_params(), table=table,
                             share=table / tied.num_params(), non_embedding=tied.num_params() - table - positions,
                             flops=flops_per_token(tied), muon_step=newton_schulz_flops(tied))
    return _COUNTED[key]


def grid_rows(optimizer, tied_only=False):
    grid = GRIDS[optimizer]
    untied = [] if tied_only else [f'untied_e{e:g}_h{h:g}' for e in grid['embed'] for h in grid['head']]
    return untied + [f'tied_e{e:g}' for e in grid['tied']]


def half_flags():
    cfg = resolve('recipe_ladder.py')
    return [f'--{key}={max(1, cfg[key] // 2)}' for key in ('max_iters', 'warmup_iters', 'eval_interval')]


def ladder_table():
    lines = ['| size | width × layers (heads) | tied | untied | table share, tied | non-embedding | '
             'FLOPs per token | Muon\'s FLOPs per step | tokens a run (epochs) |',
             '|---|---|---:|---:|---:|---:|---:|---:|---:|']
    for size in SIZES:
        cfg = resolve(size)
        c = counts(cfg)
        tokens = cfg['max_iters'] * cfg['batch_size'] * cfg['block_size'] * cfg['gradient_accumulation_steps']
        lines.append(f"| `{size}` | {cfg['n_embd']} × {cfg['n_layer']} ({cfg['n_head']}) | {c['tied']:,} | "
                     f"{c['untied']:,} | {100 * c['share']:.1f} % | {c['non_embedding']:,} | {c['flops'] / 1e6:.1f} M | "
                     f"{c['muon_step'] / 1e9:.2f} G | {tokens:,} ({tokens / CORPUS['train_tokens']:.2f}) |")
    return lines


def depth_match(cfg, vocab_size=CORPUS['vocab_size']):
    """(layers, tied parameters, untied parameters): the deepest tied model of cfg's width with no more parameters
    than cfg's untied one, as MobileLLM spends what sharing saves on layers. No more, so that a deeper tied model
    that wins does not win by a larger count."""
    base = counts(cfg, vocab_size)
    per_layer = counts(dict(cfg, n_layer=cfg['n_layer'] + 1), vocab_size)['tied'] - base['tied']  # every block alike
    layers = cfg['n_layer'] + (base['untied'] - base['tied']) // per_layer
    return layers, counts(dict(cfg, n_layer=layers), vocab_size)['tied'], base['untied']


def depth_table():
    """Claim 19: each size's depth-matched tied model and the one a layer deeper (the depth stage trains DEEP's),
    and experiment 5's shape on both corpora (4 untied layers; on its own 11,706 ids 12 tied layers are the layer
    deeper)."""
    lines = ['| model | untied: layers, parameters, FLOPs per token | tied, as deep as fits | a layer deeper | '
             'FLOPs per token, tied as deep as fits | trained by |', '|---|---|---|---|---:|---|']
    cases = [(f'`{size}`', resolve(size), CORPUS['vocab_size'], f'`config/ladder_{size}_deep.py`' if size in DEEP else '')
             for size in SIZES]
    cases += [(f"experiment 5's shape, {vocab:,} ids", resolve('recipe_bpe.py'), vocab, '')
              for vocab in (TUTORIAL_VOCAB, CORPUS['vocab_size'])]
    for name, cfg, vocab, trained in cases:
        layers, _, untied = depth_match(cfg, vocab)
        deep = [(n, counts(dict(cfg, n_layer=n), vocab)) for n in (layers, layers + 1)]
        tied = [f"{n}, {c['tied']:,} ({100 * (c['tied'] / untied - 1):+.2f} %)" for n, c in deep]
        lines.append(f"| {name} | {cfg['n_layer']}, {untied:,}, {counts(cfg, vocab)['flops'] / 1e6:.1f} M | {tied[0]} | "
                     f"{tied[1]} | {deep[0][1]['flops'] / 1e6:.1f} M | {trained} |")
    return lines


def ranked_families(out_dirs, sweeps=True):
    """Across the remedy stages' out dirs (plain, sqrt(d), untied): untied's best family, plain tying's, and the
    remedy families best first, each (best loss, index of its out dir, row prefix, {rate or (e, h): loss}). A family
    is named by its out dir too (sqrt(d) tied is not plain tied). sweeps=False reads out dirs that hold only the
    cells picked (the select and fresh stages'), so no edge is checked."""
    families = []
    for k, out_dir in enumerate(out_dirs):
        _, untied, tied, others = sweep_cells(out_dir, committed=True)
        if sweeps:
            inside(out_dir, (untied, tied, others))
        families += [(rates[best], k, name, rates) for name, (rates, best) in best_cells(untied, tied, others).items()]
    untied = min((f for f in families if f[2] == 'untied'), default=None)
    tied = min((f for f in families if f[2] == 'tied' and f[1] == 0), default=None)
    return untied, tied, sorted(f for f in families if f[2] != 'untied' and f is not tied)


def remedy_top(count, out_dirs, cells_each=2, sweeps=True):
    """The select stage's rows, a line for each sweep in out_dirs: untied's best cells (over every sweep that has
    untied rows), plain tying's, and those of the `count` remedy families whose best cell is lowest, each family
    with its `cells_each` best cells (ranked_families)."""
    untied, tied, remedies = ranked_families(out_dirs, sweeps)
    lines = [[] for _ in out_dirs]
    for _, k, name, rates in [f for f in (untied, tied) if f] + remedies[:count]:
        lines[k] += [row_name(name, key) for key in sorted(rates, key=rates.get)[:cells_each]]
    return [','.join(rows) for rows in lines]


def write_curves(out_dir):
    """The evaluations along the way (metrics.csv's rows with a validation loss) of every run that OUT_DIR's summary
    reports, as one file, OUT_DIR/curves.csv: mode, seed, iter, val_loss. It is committed beside the summary, which
    keeps only the end; a run folder the summary leaves out (a row dropped from the stage part-way) stays out."""
    from lib.atomic_files import atomic_write_bytes
    path = os.path.join(out_dir, 'summary.json')
    if not os.path.exists(path):
        raise SystemExit(f"curves: {out_dir} has no summary.json (run its ablate.py command first, or name another "
                         f"folder)")
    info = load(path)
    rows = []
    for mode in info['modes']:
        for seed in info['seeds']:
            with open(os.path.join(out_dir, f'{mode}-seed{seed}', 'metrics.csv'), encoding='utf-8') as f:
                rows += [(mode, str(seed), r['iter'], r['val_loss']) for r in csv.DictReader(f) if r['val_loss']]
    atomic_write_bytes(os.path.join(out_dir, 'curves.csv'),
                       ('mode,seed,iter,val_loss\n' + ''.join(','.join(r) + '\n' for r in rows)).encode())


# The arguments each command needs (the docstring's usage): too few is a one-line error, not an IndexError.
NEEDS = dict(flags=1, grid=1, widen=1, best=1, select=2, untrained=2, top=2, lower=1, rungs_won=2, horizon_best=2,
             remedy_top=3, remedy_picks=1, remedy_best=1, remedy_neighbours=1, curves=1)


def main(argv):
    command = argv[0] if argv else ''
    if command in NEEDS and len(argv) - 1 < NEEDS[command]:
        raise SystemExit(f"error: {command} needs {NEEDS[command]} argument(s): python lab/experiment7_tables.py "
                         f"--help gives each command's")
    if command == 'sizes':
        print(' '.join({'': SIZES, 'adamw': OPTIMIZERS['adamw'], 'deep': DEEP}[argv[1] if argv[1:] else '']))
    elif command == 'flags':
        print(' '.join({'half': half_flags(), 'horizon': HORIZON_FLAGS}[argv[1]]))
    elif command == 'grid':
        print(','.join(REMEDY_GRIDS[argv[1]] if argv[1] in REMEDY_GRIDS else grid_rows(argv[1], argv[2:] == ['tied'])))
    elif command == 'widen':  # OUT_DIR [ROWS]: its rows, the grid's ROWS it lacks, the neighbours its bests lack
        rows, *cells = sweep_cells(argv[1])  # dict.fromkeys: each row once, where it first appears
        print(','.join(dict.fromkeys(rows + (argv[2].split(',') if argv[2:] else []) + missing_neighbours(*cells))))
    elif command == 'best':
        _, *cells = sweep_cells(argv[1], committed=True)
        inside(argv[1], cells)
        print(','.join(best_rows(*cells)))
    elif command == 'select':  # OUT_DIR ROWS ABLATE_ARGS...: the select stage (run_select)
        run_select(argv[1], [row for row in argv[2].split(',') if row], argv[3:])
    elif command == 'untrained':  # OUT_DIR ROWS: those of ROWS that OUT_DIR's stage has not committed
        print(','.join(row for row in argv[2].split(',') if row and row not in committed_rows(argv[1])))
    elif command == 'top':  # N OUT_DIR: untied's N best cells and tied's, best first, as one line of rows
        print(remedy_top(0, [argv[2]], int(argv[1]), sweeps=False)[0])
    elif command == 'lower':  # ROWS: each row's neighbours one rung below on every rate it tunes
        print(','.join(rungs_below(argv[1].split(','))))
    elif command == 'rungs_won':  # PICK_DIR RUNGS_DIR: the rungs confirmed, and those beating the best so far
        print(','.join(rungs_that_won(argv[1], argv[2])))
    elif command == 'horizon_best':  # PICK_DIR RUNGS_DIR: each arm's rung that won, else its pick
        print(','.join(horizon_best_rows(argv[1], argv[2])))
    elif command == 'remedy_top':  # N CELLS OUT_DIR...: a line of rows for each sweep
        print(*remedy_top(int(argv[1]), argv[3:], int(argv[2])), sep='\n')
    elif command == 'remedy_picks':  # OUT_DIR...: each family's better cell of the select stage, a line a dir
        print(*remedy_top(len(REMEDY_FAMILIES) + 2, argv[1:], 1, sweeps=False), sep='\n')
    elif command == 'remedy_best':  # OUT_DIR...: of the fresh seeds, untied's best, plain tied's, the best remedy
        print(*remedy_top(1, argv[1:], 1, sweeps=False), sep='\n')
    elif command == 'remedy_neighbours':  # OUT_DIR...: "K ROWS": the best remedy's out dir, its best rate's rungs
        _, k, name, rates = ranked_families(argv[1:], sweeps=False)[2][0]
        best = min(rates, key=rates.get)
        print(k, ','.join(f'{name}_e{a:g}_h{b:g}' for a in neighbours(best[0]) for b in neighbours(best[1]))
              if isinstance(best, tuple) else ','.join(f'{name}_e{rate:g}' for rate in neighbours(best)))
    elif command == 'curves':
        write_curves(argv[1])
    elif command == '':
        print('### The ladder', '', *ladder_table(), '', '### Claim 19: depth-matched tied models', '',
              *depth_table(), sep='\n')
    else:
        raise SystemExit(__doc__)


if __name__ == '__main__':
    main(sys.argv[1:])

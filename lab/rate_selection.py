"""The select rule and the horizon's rungs: which rows a stage trains and reads together.

Each arm is read at its own best rates, confirmed at the length it is read at (docs/experiments.md, "How each arm's
rates are chosen"). config/experiment6.sh, 7 and 8 call it through lab/experiment7_tables.py's command line."""

import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, 'docs', 'results')  # the committed summaries: experiment7-STAGE-OPTIMIZER-SIZE/
sys.path.insert(0, ROOT)

# A rate is a multiple of learning_rate, on a ladder of half decades (experiment 6's steps of sqrt(10)).
# From x0.01 to x10,000: the top was x1,000 until the sweep under Muon at w160 put untied's table there (5.127 at
# x1000 against 5.140 at x300), where no rung above was left to try and the best passed for one inside its grid.
RUNGS = tuple(round(10 ** (k // 2) * (3 if k % 2 else 1), 6) for k in range(-4, 9))


def summary_path(out_dir):
    """out_dir's summary.json, or where it is gone (out-*/ is not committed) its copy under docs/results/, if any."""
    path, kept = os.path.join(out_dir, 'summary.json'), committed_path(out_dir)
    return kept if not os.path.exists(path) and os.path.exists(kept) else path


def committed_path(out_dir):
    """Where out_dir's stage keeps its summary under docs/results/ (out-exp7-X is experiment7-X, and so on)."""
    name = re.sub(r'^out-exp(\d+)-', r'experiment\1-', os.path.basename(os.path.normpath(out_dir)))
    return os.path.join(RESULTS, name, 'summary.json')


def load(path, first='run the sweep first (bash config/experiment7.sh sweep)'):
    """The JSON at path (a summary: its modes); where it is missing, SystemExit saying what to run first, and where
    it is not a summary, SystemExit saying so."""
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: {first}")
    try:
        with open(path, encoding='utf-8') as f:
            info = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SystemExit(f"cannot read {path}: {e}") from None
    if not (isinstance(info, dict) and isinstance(info.get('modes'), dict)):
        raise SystemExit(f"{path} is not an ablation's summary (no modes); write it again with ablate.py")
    return info


def sweep_cells(out_dir, committed=False):
    """A sweep's rows and its (untied, tied) cells; committed=True: from docs/results/ where out_dir is gone."""
    from lab.ablation_figure import rate_cells
    path = summary_path(out_dir) if committed else os.path.join(out_dir, 'summary.json')
    info = load(path)
    if committed and path == os.path.join(out_dir, 'summary.json') and committed_rows(out_dir):
        # with the rows its stage committed under docs/results/ and did not train again: a stage taken up again on
        # another machine trains only the rows it lacks, where they were trained alike (unlike)
        kept = load(committed_path(out_dir))
        if differ := unlike(kept, info):
            what, theirs, ours = differ[0]
            raise SystemExit(f"{out_dir}: its runs' {what} ({ours}) are not its committed record's ({theirs}); "
                             f"their rows cannot be read together: take the stage up on a machine that trains as "
                             f"the record's did, with its settings, or move the record aside")
        info = dict(info, modes=kept['modes'] | info['modes'])
    return list(info['modes']), *rate_cells(info), family_cells(info)


# Settings of a stage that do not change what its runs compute, or that trained_on says better (dtype 'auto').
# (log_interval is not one: the summary's loss at each fraction of the run is the mean of the logged steps near it.)
RUN_ONLY_KEYS = ('modes', 'seeds', 'seed', 'quick', 'versus', 'jobs', 'tuned_lens', 'data_dir', 'device', 'dtype')


def cpu_named(summary):
    """The CPU of a summary's machine line: its name and, in records written since the line gave them, its x86
    family and model and whether its bf16 runs in hardware (lab/ablation_report.cpu_kind)."""
    cpu = re.search(r' CPUs \((.*)\), python', summary.get('machine') or '')
    name, _, kind = (cpu.group(1) if cpu else '').partition('; ')
    return name, kind


def cpu_differences(cpu, other):
    """(what, cpu's, other's) where two CPUs, each (name, kind) as cpu_named gives them, differ: the name, and the
    kind, each compared where both are named."""
    return [(what, a, b) for what, a, b in (('CPU', cpu[0], other[0]), ('CPU kind', cpu[1], other[1]))
            if a and b and a != b]


def unlike(kept, info):
    """(what, kept's, info's) for each way two summaries' runs were not trained alike, so that their rows cannot be
    read together: other seeds; another dtype (a CPU without native bf16 trains in float32); another CPU kind,
    whose kernels differ (a run at a high rate moves by more than the rows differ, in float32 too); other settings.
    A setting newer than a summary counts with the value its runs were made with (LEGACY_RUN_KEYS, as ablate.py
    reads a run); another it predates, or a field, is not compared, nor a CPU or its kind where one does not name it."""
    from lab.ablation_grid import LEGACY_RUN_KEYS, MUON_KEYS
    pairs = [('seeds', kept.get('seeds'), info.get('seeds')), *cpu_differences(cpu_named(kept), cpu_named(info))]
    if None not in (kept.get('vocab_size'), info.get('vocab_size')):
        pairs.append(('vocab_size', kept['vocab_size'], info['vocab_size']))
    if None not in (kept.get('trained_on'), info.get('trained_on')):  # summaries from before the field
        pairs.append(('trained_on', kept['trained_on'], info['trained_on']))
    theirs, ours = ({**{k: v for k, v in LEGACY_RUN_KEYS.items() if k not in config}, **config} if config else {}
                    for config in (kept.get('config'), info.get('config')))
    unused = MUON_KEYS if ours.get('optimizer', 'adamw') == 'adamw' else ()
    pairs += [(f'--{key}', theirs[key], ours[key]) for key in ours
              if key in theirs and key not in RUN_ONLY_KEYS + unused]
    return [(what, a, b) for what, a, b in pairs if a != b]


def family(row):
    """A row's family: its name without its rates (_eX, _hY), e.g. shuffle, tied_igs4, tied_untie."""
    return re.sub(r'_[eh][0-9.e+-]+(?=_|$)', '', row)


def family_cells(info, key='val_loss_all'):
    """{family(row): {shared matrix's rate: loss}}, mean over seeds, of a sweep's rows but plain untied and tied
    (rate_cells'): the family is the row's name without its rates, so untied_igs4 and untied_zero are arms of their
    own. A family with a head rate (pit's S, the zero head's) is keyed (table rate, head rate) as untied is; x1 if
    unnamed."""
    from lab.ablation_figure import row_loss
    from lab.ablation_grid import parse_row
    families = {}
    for mode, cells in info['modes'].items():
        row, loss, name = parse_row(mode), row_loss(cells, key), family(mode)
        if loss is not None and name not in ('untied', 'tied'):
            families.setdefault(name, {})[(row.embed_mult or 1.0, row.head_mult)] = loss
    return {name: {(e, h or 1.0) if any(h for _, h in cells) else e: loss for (e, h), loss in cells.items()}
            for name, cells in families.items()}


def rung_index(rate):
    """The index in RUNGS of the rate; a rate off the ladder has no rung below or above it to step to: an error."""
    if not any(math.isclose(rate, rung) for rung in RUNGS):
        raise SystemExit(f"x{rate:g} is not on the rate ladder ({', '.join(f'x{r:g}' for r in RUNGS)}): the select "
                         f"rule steps a rung at a time, so its rows' rates must be rungs")
    return min(range(len(RUNGS)), key=lambda k: abs(math.log(RUNGS[k] / rate)))


def neighbours(rate):
    """The rate and the rungs either side of it."""
    i = rung_index(rate)
    return RUNGS[max(0, i - 1):i + 2]


def best_cells(untied, tied, families=None):
    """{family: (its cells, its best cell)} of a sweep: untied's first (cells keyed (table rate, head rate)), then
    tied's and each other family's (keyed by the shared matrix's rate); a family without cells is left out."""
    every = {'untied': untied, 'tied': tied} | (families or {})
    return {name: (cells, min(cells, key=cells.get)) for name, cells in every.items() if cells}


def missing_neighbours(untied, tied, families=None):
    """Rows a best lacks to lie inside its sweep: the 3 x 3 block of rungs around untied's best (and any family's
    with a head rate); tied's, and each other family's, either side."""
    rows = []
    for name, (cells, best) in best_cells(untied, tied, families).items():
        if isinstance(best, tuple):
            rows += [f'{name}_e{a:g}_h{b:g}' for a in neighbours(best[0]) for b in neighbours(best[1])
                     if not any(math.isclose(a, x) and math.isclose(b, y) for x, y in cells)]
        else:
            rows += [f'{name}_e{a:g}' for a in neighbours(best) if not any(math.isclose(a, x) for x in cells)]
    return rows


def best_rows(untied, tied, families=None):
    """Each family's best cell as the confirmation's rows: a rate at x1 is the default, left unwritten."""
    return [name + ''.join(f'_{side}{rate:g}' for side, rate in zip('eh', best if isinstance(best, tuple) else (best,))
                           if rate != 1) for name, (_, best) in best_cells(untied, tied, families).items()]


def inside(out_dir, cells):
    """Refuse (SystemExit) a sweep whose best cells are not yet inside its grid or its ladder of rates (a best rate
    that is RUNGS' first or last has no neighbour beyond it to try)."""
    if missing := missing_neighbours(*cells):
        raise SystemExit(f"{out_dir}: a best lies on its grid's edge ({', '.join(missing)} not trained); "
                         f"run its sweep stage again, which widens the grid")
    rates = [rate for _, best in best_cells(*cells).values() for rate in (best if isinstance(best, tuple) else (best,))]
    if ends := [f'x{rate:g}' for rate in rates if any(math.isclose(rate, end) for end in (RUNGS[0], RUNGS[-1]))]:
        raise SystemExit(f"{out_dir}: a best lies at the end of the rate ladder ({', '.join(ends)}), so its "
                         f"optimum may lie beyond it; extend RUNGS in lab/rate_selection.py, then run its "
                         f"sweep stage again")


def row_name(name, key):
    """A family's cell as a row: untied's (and pit's) _eX_hY; another's _eX, left unwritten at x1."""
    return f"{name}_e{key[0]:g}_h{key[1]:g}" if isinstance(key, tuple) else name + (f'_e{key:g}' if key != 1 else '')


def neighbour_keys(pick, steps=(-1, 1)):
    """The cells one rung from a pick along each rate its family tunes, the others held at the pick's: below (-1)
    and above (+1). A pick at the end of the rate ladder has no neighbour there to try: an error."""
    at = pick if isinstance(pick, tuple) else (pick,)
    keys = []
    for axis, rate in enumerate(at):
        i = rung_index(rate)
        for step in steps:
            if not 0 <= i + step < len(RUNGS):
                raise SystemExit(f"a pick at x{rate:g} lies at the end of the rate ladder; extend RUNGS in "
                                 f"lab/rate_selection.py")
            key = at[:axis] + (RUNGS[i + step],) + at[axis + 1:]
            keys.append(key if isinstance(pick, tuple) else key[0])
    return keys


def beyond_the_pick(cells, pick):
    """The select rule's test of a pick: the neighbours one rung below and above it on every rate it tunes that
    have no full-length run yet (an empty list: confirmed). A sweep at half length prefers higher rates, and by
    another amount for each arm, so a pick is confirmed only against its neighbours at the length it is read at."""
    have = [k if isinstance(k, tuple) else (k,) for k in cells]  # every key as a tuple of rates
    return [key for key in neighbour_keys(pick)
            if not any(all(map(math.isclose, k, key if isinstance(key, tuple) else (key,))) for k in have)]


def row_key(row):
    """(family, key) of a row: the key as in cells, (table rate, head rate) for untied and pit, else the rate."""
    from lab.ablation_grid import check_row, parse_row
    from lib.command_line import UserError
    parsed = parse_row(row)
    if parsed is None:  # a row typed by hand (lower, untrained), or a message fed where a row was meant
        raise SystemExit(f"error: {row!r} is not a row of ablate.py's --modes (e.g. tied_e30, untied_e100_h3)")
    try:
        check_row(row)  # one ablate.py would refuse to train (a head rate where the head is the token table)
    except UserError as e:
        raise SystemExit(f"error: {e}") from None
    embed = parsed.embed_mult or 1.0  # a head rate is tuned too where one is named (tied_untie's after the untying)
    tunes_head = parsed.tie_mode in ('untied', 'pit') or parsed.head_mult is not None
    return family(row), (embed, parsed.head_mult or 1.0) if tunes_head else embed


def rungs_below(rows):
    """Each row's neighbours one rung below on every rate it tunes, as rows."""
    return [row_name(name, key) for name, best in map(row_key, rows) for key in neighbour_keys(best, steps=(-1,))]


def rungs_that_won(pick_dir, rungs_dir, key='val_loss_all'):
    """The rungs below the picks that go on to (or have been on) the picks' other seeds: those already confirmed
    there (rungs_dir's summary-confirmed.json), and the rungs of rungs_dir (one seed) that beat their family's best
    so far (its pick, or a confirmed rung with a lower mean) on that seed by more than its spread over its seeds
    (their standard deviation). The best's run on that seed is rungs_dir's where it has one (trained beside the rungs,
    on their machine), else pick_dir's. Reading against the best, not the pick, spares the seeds of a rung that beats
    the pick but not the rung it lies below."""
    return _rungs(pick_dir, rungs_dir, key)[0]


def _rungs(pick_dir, rungs_dir, key):
    """rungs_that_won's rows, every row's end on the rungs' seed (its run in rungs_dir, else in the summary
    that holds it), and the picks' rows in their order."""
    from lab.ablation_figure import row_loss
    pick, rungs = load(summary_path(pick_dir)), load(summary_path(rungs_dir))
    if not rungs.get('seeds') or not pick.get('seeds'):
        raise SystemExit(f"{rungs_dir if pick.get('seeds') else pick_dir}: its summary names no seeds")
    seed = rungs['seeds'][0]
    if len(pick['seeds']) < 3 or seed not in pick['seeds']:  # a spread over fewer says little of the next seed
        raise SystemExit(f"{pick_dir} needs its three seeds, {seed} among them, before the rungs are read")
    # the rungs run on a machine of their own, the picks' run again beside them: the same recipe, dtype and length
    if differ := [d for d in unlike(pick, rungs) if d[0] not in ('seeds', 'CPU', 'CPU kind')]:
        what, theirs, ours = differ[0]
        raise SystemExit(f"{rungs_dir}: its runs' {what} ({ours}) are not {pick_dir}'s ({theirs}): the rungs "
                         f"must train as the picks did")
    path = os.path.join(rungs_dir, 'summary-confirmed.json')
    path = path if os.path.exists(path) else committed_path(os.path.normpath(rungs_dir) + '-confirmed')
    confirmed = load(path) if os.path.exists(path) else {'seeds': pick['seeds'], 'modes': {}}
    if sorted(confirmed['seeds']) != sorted(pick['seeds']):
        raise SystemExit(f"{path}: its seeds {confirmed['seeds']} are not the picks' {pick['seeds']}: its means "
                         f"cannot be set against theirs")

    def finite(value, otherwise):  # a run that diverged (None, NaN) ends above any other; its spread is no bar
        return value if value is not None and math.isfinite(value) else otherwise

    def end(summary, row):
        return finite(summary['modes'][row][key]['per_seed'][summary['seeds'].index(seed)], math.inf)

    def mean(summary, row):  # over the pick's seeds; inf where a seed diverged or none has a loss
        loss = row_loss(summary['modes'][row], key)
        return math.inf if loss is None else loss

    arms = [row_key(row)[0] for row in pick['modes']]
    if len(set(arms)) < len(arms):
        raise SystemExit(f"{pick_dir} holds two picks of one arm ({', '.join(pick['modes'])}): which one the rungs "
                         f"lie below is not said")
    if strays := [row for row in [*confirmed['modes'], *rungs['modes']] if row_key(row)[0] not in arms]:
        raise SystemExit(f"{rungs_dir} holds {strays[0]}, a rung of no arm in {pick_dir}")
    bests = {}  # each arm's best so far, by its mean: (row, its summary)
    for summary in (pick, confirmed):
        for row in summary['modes']:
            arm = row_key(row)[0]
            if arm not in bests or mean(summary, row) < mean(*reversed(bests[arm])):
                bests[arm] = row, summary
    bars = {arm: (end(rungs, row) if row in rungs['modes'] else end(summary, row))
            - finite(summary['modes'][row][key]['std'], 0) for arm, (row, summary) in bests.items()}
    ends = {row: end(summary, row) for summary in (confirmed, rungs) for row in summary['modes']}
    won = list(confirmed['modes']) + [row for row in rungs['modes'] if row not in confirmed['modes']
                                      and row not in pick['modes'] and end(rungs, row) < bars[row_key(row)[0]]]
    return won, ends, list(pick['modes'])


def horizon_best_rows(pick_dir, rungs_dir, key='val_loss_all'):
    """Each arm's rate for the horizon's length, as rows in the picks' order: the lowest on the rungs' seed of its
    rungs that won (rungs_that_won), else its pick."""
    won, ends, picks = _rungs(pick_dir, rungs_dir, key)
    rows = []
    for pick in picks:
        theirs = [row for row in won if row_key(row)[0] == row_key(pick)[0]]
        rows.append(min(theirs, key=ends.get) if theirs else pick)
    return rows


def committed_rows(out_dir):
    """The rows of out_dir's stage committed under docs/results/ (trained before, kept as records)."""
    path = committed_path(out_dir)
    return list(load(path)['modes']) if os.path.exists(path) else []


def select_rows(out_dir, first_rows):
    """The select rule, as the rows still to train in out_dir at full length: first_rows (the sweep's best cells
    of each family, best first), the neighbours one rung below each family's sweep best, every row trained there
    before, and the neighbours each family's pick of all of these lacks (beyond_the_pick), less the rows its stage
    committed. The stage trains them and asks again; the same rows twice mean every pick is confirmed."""
    bests = {}
    for row in first_rows:
        bests.setdefault(*row_key(row))
    rows = list(dict.fromkeys(first_rows + [row_name(name, key) for name, best in bests.items()
                                            for key in neighbour_keys(best, steps=(-1,))]))
    if os.path.exists(summary_path(out_dir)):
        trained, untied, tied, others = sweep_cells(out_dir, committed=True)
        rows += trained + [row_name(name, key) for name, (cells, best) in best_cells(untied, tied, others).items()
                           for key in beyond_the_pick(cells, best)]
    here = os.path.join(out_dir, 'summary.json')
    trained_here = load(here)['modes'] if os.path.exists(here) else {}
    # one row a cell, whatever its spelling (tied and tied_e1, pit_e1 and pit_e1_h1), the first spelling kept
    cells = {row_key(row) for row in committed_rows(out_dir) if row not in trained_here}  # the record holds them
    wanted = []
    for row in rows:
        if (cell := row_key(row)) not in cells:
            cells.add(cell)
            wanted.append(row)
    return wanted


def unconfirmed(out_dir):
    """The rows each family's pick in out_dir (with its committed rows) lacks one rung below or above it."""
    _, untied, tied, others = sweep_cells(out_dir, committed=True)
    return [row_name(name, key) for name, (cells, best) in best_cells(untied, tied, others).items()
            for key in beyond_the_pick(cells, best)]


def refuse_unlike_record(out_dir, ablate_args, cpu=None):
    """Before a stage trains rows beside the ones it committed: what it would train must be what the record was
    trained as (unlike: its CPU and kind, from this machine's line; its settings, from ABLATE_ARGS as ablate.py reads
    them), or the rows it trains here would be refused only once trained. The rows name every rate the rule tunes,
    so a setting of those rates (--embed_lr, --head_lr, on the command line or in a config file) is refused too.
    cpu stands in for this machine's (name, kind) in the tests."""
    import ablate
    from lab.ablation_grid import BOOKKEEPING_KEYS
    from lib.command_line import UserError
    try:
        cfg = ablate.parse_args(ablate_args)
    except UserError as e:
        raise SystemExit(f"error: {e}") from None
    if fixed := [key for key in ('embed_lr', 'head_lr') if cfg.get(key) is not None]:
        raise SystemExit(f"select: --{fixed[0]}={cfg[fixed[0]]} sets a rate the rule tunes; the rows name it (_eX, "
                         f"_hY, multiples of --learning_rate): leave it out")
    path = committed_path(out_dir)
    if not os.path.exists(path):
        return
    kept = load(path)
    if cpu is None and cpu_named(kept)[0]:
        from lab.ablation_report import machine_line
        cpu = cpu_named({'machine': machine_line()})
    settings = {'config': {k: v for k, v in cfg.items() if k not in BOOKKEEPING_KEYS}}  # as the summary keeps them
    if differ := cpu_differences(cpu_named(kept), cpu or ('', '')) + [d for d in unlike(kept, settings)
                                                                       if d[0] != 'seeds']:
        what, theirs, ours = differ[0]
        raise SystemExit(f"{out_dir}: this stage would train with {what} {ours}, its committed record was trained "
                         f"with {theirs}: their rows cannot be read together. Take the stage up as the record was "
                         f"trained, or train it whole under another --out_dir")


def run_select(out_dir, first_rows, ablate_args, train=None, rounds=6, cpu=None):
    """The select stage: train select_rows at full length (ablate.py ABLATE_ARGS --modes=ROWS --out_dir=OUT_DIR)
    until asking again names the same rows, every pick then confirmed; an error after `rounds` rounds. train and
    cpu stand in for ablate.py and this machine's CPU in the tests."""
    import subprocess
    def ablate(rows):
        done = subprocess.run([sys.executable, os.path.join(ROOT, 'ablate.py'), *ablate_args,
                               f'--modes={",".join(rows)}', f'--out_dir={out_dir}'])
        if done.returncode:  # ablate.py has said why, in one line or in its runs' logs
            raise SystemExit(f"{out_dir}: ablate.py stopped (exit code {done.returncode}) before the select rule "
                             f"could read its rows; run the stage again once it trains")
    train = train or ablate
    rows = select_rows(out_dir, first_rows)
    for _ in range(rounds):
        if rows:
            refuse_unlike_record(out_dir, ablate_args, cpu)
            train(rows)
        if (again := select_rows(out_dir, first_rows)) == rows:
            if lacking := unconfirmed(out_dir):  # asked for again, yet trained: runs without a full-length loss
                raise SystemExit(f"{out_dir}: a pick lacks {', '.join(lacking)} at full length, though its runs "
                                 f"are there: they end without a whole-split loss; delete their run folders and "
                                 f"run the stage again")
            return rows
        rows = again
    raise SystemExit(f"{out_dir}: a pick still lacks a full-length neighbour after {rounds} rounds; see its summary.md")

"""Experiment 6's figures, as the README and docs/experiment6.md quote them, are the ones that
lab/experiment6_tables.py computes from the committed summaries (docs/results/experiment6-*/, experiment5-bpe):
a summary replaced, or a number typed by hand, fails here."""

import contextlib
import importlib.util
import io
import os

from conftest import as_prose

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tables_module():
    spec = importlib.util.spec_from_file_location('experiment6_tables', os.path.join(ROOT, 'lab', 'experiment6_tables.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(*path):
    with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
        return f.read()


def test_readme_rows_14_to_16_quote_the_five_seed_summaries():
    tables = tables_module()
    sources = tables.confirm_sources()
    assert {'adamw', 'muon'} <= set(sources)  # and Muon with q, k, v apart, where its summary is committed
    # rows 14, 15 and 16: tied against untied at the default rates and each at its best, untied at 2/3 against tied
    quoted = [(label, a, b) for label, a, b in tables.COMPARISONS if b in ('untied', 'untied_best') and a.startswith('tied')
              or a == 'tied_untie_best']
    assert len(quoted) == 3
    readme, doc = (' '.join(read(*path).split()) for path in (('README.md',), ('docs', 'experiment6.md')))  # as read
    for label, a, b in quoted:
        for optimizer, rows in sources.items():
            if a not in rows or b not in rows:
                continue  # a setting not trained there
            interval = as_prose(tables.diff(rows[a], rows[b], 'val_loss_all'))
            assert interval in readme, f"README does not quote {label} under {optimizer}: {interval}"
            assert interval in doc, f"docs/experiment6.md does not quote {label} under {optimizer}: {interval}"


def test_readme_row_17_quotes_the_lens_gap_after_block_1_and_no_layer_differs_where_it_says_so():
    tables = tables_module()
    pairs = tables.lens_pairs(tables.confirm_sources())
    assert len(pairs) == 6  # default and best rates under AdamW, Muon, and Muon with q, k, v apart
    readme, doc = (' '.join(read(*path).split()) for path in (('README.md',), ('docs', 'experiment6.md')))
    for optimizer, rates, tied, untied in pairs:
        gaps = [tables.diff(tied, untied, f'lens_gap_{layer}') for layer in range(tied[0]['config']['n_layer'])]
        if optimizer == 'adamw' and rates != 'default rates':  # "no layer differs under AdamW"
            assert not any(gap.startswith('**') for gap in gaps), gaps
            continue
        for text, name in ((readme, 'README'), (doc, 'docs/experiment6.md')):
            assert as_prose(gaps[1]) in text, f"{name} does not quote block 1's gap under {optimizer}, {rates}"


def test_every_table_row_of_the_doc_is_the_scripts_output():
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        tables_module().main()
    rows = [line for line in printed.getvalue().splitlines() if line.startswith('| ') and '---' not in line]
    assert len(rows) > 40  # the sweeps, the base rates, the five-seed tables and the lens: not an empty run
    doc = read('docs', 'experiment6.md')
    missing = [row for row in rows if row not in doc]
    assert not missing, f"docs/experiment6.md lacks {len(missing)} of the script's rows, e.g. {missing[0]}"

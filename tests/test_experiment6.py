"""Experiment 6's figures, as the README and docs/experiment6.md quote them, are what the committed summaries give
(docs/results/experiment6-*/, experiment5-bpe), each in its claim's row or verdict beside its setting's label: a
summary replaced, a number typed by hand, or one set beside another setting's label, fails here. The experiment is
finished; its tables were printed by lab/experiment6_tables.py, retired after commit c72d8a3 (docs/experiment6.md)."""

import os

import pytest

from conftest import as_prose, assert_quotes, committed_summary, findings_row, findings_text, interval, markdown_block
from lab.rate_selection import family

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def confirm_sources():
    """{setting: {arm: (summary, row)}} of stage 2, the rows its tables compare; AdamW's default rates are
    experiment 5's runs. Muon as experiment 6 ran it (q, k, v orthogonalised as one matrix), then with each apart
    (the controls stage: --muon_qkv=split, the default since)."""
    adamw, default = committed_summary('experiment6-confirm-adamw'), committed_summary('experiment5-bpe')
    sources = dict(adamw=dict(untied=(default, 'untied'), tied=(default, 'tied'), untied_best=(adamw, 'untied_e10_h3'),
                              tied_best=(adamw, 'tied_e10'), tied_untie_best=(adamw, 'tied_untie_e10')))
    for setting, name in (('muon', 'experiment6-confirm-muon'), ('split', 'experiment6-confirm-muon-split')):
        muon = committed_summary(name)
        sources[setting] = dict(untied=(muon, 'untied'), tied=(muon, 'tied'), untied_best=(muon, 'untied_e10_h3'),
                                tied_best=(muon, 'tied_e10'), tied_untie_best=(muon, 'tied_untie_e10'))
    return sources


# rows 14, 15 and 16: tied against untied at the default rates and each at its best, untied at 2/3 against tied
RATES = {'default': ('tied', 'untied'), 'best': ('tied_best', 'untied_best'), 'untie': ('tied_untie_best', 'tied_best')}

# Where each number stands and what stands beside it: (file, block's start) -> [(phrase, clause, sentence)]; the
# phrase with its numbers must be in the block, and clause (sentence), where given, in the phrase's clause
# (sentence). README's blocks are rows of the findings table (conftest.findings_row), the doc's its verdicts.
COST_QUOTES = {
    14: [('at the default rates {adamw_default}', None, '(AdamW, 4 layers, BPE'),
         ('each at its best, coupled decay, {adamw_best}', None, '(AdamW, 4 layers, BPE')],
    15: [('at the default rates {muon_default}', None, 'Muon, q, k, v one matrix'),
         ('first pass {muon_best}', None, 'Muon, q, k, v one matrix'),
         ('q, k and v apart: at the default rates {split_default}', None, None),
         ('q, k and v apart: at the default rates {split_default}; first pass {split_best}; each at its best '
          '(re-selected) {float32_best}', None, None)],
    16: [('{adamw_untie} (AdamW)', "untied at 2/3 minus tied, at tied's best rate", None),
         ('{muon_untie} (Muon)', "untied at 2/3 minus tied, at tied's best rate", None),
         ('{split_untie} (Muon, q, k, v apart)', "untied at 2/3 minus tied, at tied's best rate", None)],
}
DOC = os.path.join('docs', 'experiment6.md')
DOC_COST_QUOTES = {
    '**14. ': [('{adamw_default} (AdamW)', 'at the default rates', None),
               ('{muon_default} (Muon)', 'at the default rates', None),
               ('each at its best rates {adamw_best} and {muon_best}', None, None)],
    '**15. ': [('{muon_default} at the default rates', None, 'Under Muon'),
               ('{muon_best} each at its best', None, 'Under Muon'),
               ("tied − untied at the first pass's picks is {split_best}", None, 'q, k and v orthogonalised apart'),
               ('re-selected in float32, {float32_best}: level', None, 'q, k and v apart')],
    '* **Claims 15 and 16 keep their verdicts.**': [('{split_default} at the default rates', None, 'Tied − untied'),
                                                    ('{split_best} each at its best', None, 'Tied − untied')],
    "**Muon's picks, re-selected.**": [('tied − untied {float32_best}', None, 'Both picks on the five seeds')],
    '**16. ': [('{adamw_untie} (AdamW)', "untied at 2/3 minus tied", None),
               ('{muon_untie} (Muon)', "untied at 2/3 minus tied", None),
               ('{split_untie} (Muon with q, k, v apart)', "untied at 2/3 minus tied", None)],
}
# claim 17: the tuned lens's gap after block 1, tied - untied; at the first pass's rates (the lens runs kept the
# picks the select rule later moved) no layer differs under AdamW
LENS_QUOTES = [('after block 1, tied − untied: {adamw_default} (AdamW)', 'at the default rates', None),
               ('{muon_default} (Muon)', 'at the default rates', None),
               ('{split_default} (Muon, q, k, v apart)', 'at the default rates', None),
               ('no layer differs under AdamW', "at the first pass's rates", None),
               ('{muon_best} (Muon)', "at the first pass's rates", None),
               ('{split_best} (q, k, v apart)', "at the first pass's rates", None)]
DOC_LENS_QUOTES = [('after block 1, tied − untied: {adamw_default} (AdamW)', 'at the default rates', None),
                   ('{muon_default} (Muon)', 'at the default rates', None),
                   ('{split_default} (Muon, q, k, v apart)', 'at the default rates', None),
                   ('no interval excluding zero under AdamW', "at the first pass's rates", None),
                   ('{muon_best} under Muon', "at the first pass's rates", None),
                   ('{split_best} with q, k, v apart', "at the first pass's rates", None)]


# Muon's picks by the select rule (q, k, v apart), both trained again in float32 on the same five seeds: a CPU
# without native bf16 does not reproduce the bf16 confirmation, so the pair is read on its own
FLOAT32 = 'experiment6-confirm-muon-float32', 'tied_e3', 'untied_e1_h3'


def cost_numbers():
    """{'muon_best': interval, ...}: every five-seed difference of rows 14-16 that the committed summaries give."""
    numbers = {f'{setting}_{rates}': interval(rows[a], rows[b])
               for setting, rows in confirm_sources().items() for rates, (a, b) in RATES.items()}
    name, tied, untied = FLOAT32
    pair = committed_summary(name)
    return numbers | {'float32_best': interval((pair, tied), (pair, untied))}


def test_readme_rows_14_to_16_and_the_verdicts_quote_each_five_seed_difference_beside_its_setting():
    numbers = cost_numbers()
    assert_quotes(COST_QUOTES, numbers, findings_row, 'README row')
    assert_quotes(DOC_COST_QUOTES, numbers, lambda start: markdown_block(DOC, start), DOC)


def test_readme_row_17_quotes_the_lens_gap_after_block_1_and_no_layer_differs_where_it_says_so():
    """Claim 17's pairs, tied and untied at the default rates and each at its best, under each setting; AdamW's
    default rates are experiment 5's untied and tied trained again with the lens (experiment6-lens-adamw)."""
    sources = confirm_sources()
    again, adamw = committed_summary('experiment6-lens-adamw'), sources['adamw']['tied_best'][0]
    # the lens ran at untied's first-pass pick under AdamW (x30, x3); the select rule's x10, x3 was trained without it
    sources['adamw'] = dict(sources['adamw'], untied=(again, 'untied'), tied=(again, 'tied'),
                            untied_best=(adamw, 'untied_e30_h3'))
    numbers = {}
    for setting, rows in sources.items():
        for rates, (tied, untied) in (('default', ('tied', 'untied')), ('best', ('tied_best', 'untied_best'))):
            layers = rows[tied][0]['config']['n_layer']
            gaps = [interval(rows[tied], rows[untied], f'lens_gap_{layer}') for layer in range(layers)]
            if setting == 'adamw' and rates == 'best':  # "no layer differs under AdamW"
                assert not any(gap.startswith('**') for gap in gaps), gaps
                continue
            numbers[f'{setting}_{rates}'] = gaps[1]
    assert_quotes({17: LENS_QUOTES}, numbers, findings_row, 'README row')
    assert_quotes({'**17. ': DOC_LENS_QUOTES}, numbers, lambda start: markdown_block(DOC, start), DOC)


# The controls of the ends' decay, tied − untied each at its best rates with the ends' decay per step held at ×1's
# (or none): row 14 quotes AdamW's; row 15 leaves Muon's (q, k, v apart) to the verdict it links to, ('details', 15).
DECAY_QUOTES = {
    14: [("the ends' decay held at ×1's {adamw_per_step}", None, '(AdamW, 4 layers, BPE')],
    ('details', 14): [("{adamw_per_step} with the ends' decay per step held at ×1's", None, None)],
    ('details', 15): [("{split_per_step} with the ends' decay per step held at ×1's ({split_none} with none)", None,
                       'q, k and v orthogonalised apart')],
}


def test_rows_14_and_15_and_the_verdicts_they_link_to_quote_the_decay_controls():
    """The controls ran each setting's best rows again with the ends' decay per step held at x1's (per_step) or none
    (experiment6-decay-OPTIMIZER-FORM), against the same default rows of stage 2."""
    sources, numbers = confirm_sources(), {}
    for setting, prefix in (('adamw', 'experiment6-decay-adamw'), ('split', 'experiment6-decay-muon')):
        for form in ('per_step', 'none'):
            control = committed_summary(f'{prefix}-{form}')
            tied, untied = ((control, sources[setting][arm][1]) for arm in ('tied_best', 'untied_best'))
            numbers[f'{setting}_{form}'] = interval(tied, untied)
    quoted = {key: numbers[key] for key in ('adamw_per_step', 'split_per_step', 'split_none')}
    assert_quotes(DECAY_QUOTES, quoted, findings_text, 'findings')


def test_a_number_beside_another_setting_fails_the_check():
    """The check itself: README row 16 with its AdamW and Muon labels swapped, row 15 with its default and best
    intervals swapped, and a number moved out of its row, each fail."""
    numbers = cost_numbers()
    row16, row15 = findings_row(16), findings_row(15)
    swapped = row16.replace('(AdamW)', '(X)').replace('(Muon)', '(AdamW)').replace('(X)', '(Muon)')
    default, best = (as_prose(numbers[key]) for key in ('muon_default', 'muon_best'))
    rows = {16: swapped, 15: row15.replace(default, 'X').replace(best, default).replace('X', best)}
    for claim in (16, 15):
        with pytest.raises(AssertionError, match='does not say'):
            assert_quotes({claim: COST_QUOTES[claim]}, numbers, rows.get, 'README row')
    # a number whose phrase is still there, but in another sentence than its label's
    moved = row15.replace('Muon, q, k, v one matrix:', 'Muon. Q, k, v one matrix:')
    with pytest.raises(AssertionError, match='not in the sentence'):
        assert_quotes({15: COST_QUOTES[15]}, numbers, {15: moved}.get, 'README row')


def test_muons_re_selection_is_its_records_and_each_pick_the_lowest_of_its_rows():
    """The paragraph on Muon's picks quotes the select stage's whole-split means and the pair's on the five seeds;
    each pick is its family's lowest row of the select record, and the pair is trained at those picks."""
    select = committed_summary('experiment6-select-muon')['modes']
    name, tied, untied = FLOAT32
    fresh = committed_summary(name)['modes']

    def mean(modes, row):
        return f"{modes[row]['val_loss_all']['mean']:.3f}"

    for arm, pick in (('untied', untied), ('tied', tied)):
        rows = [row for row in select if family(row) == arm]
        assert min(rows, key=lambda row: select[row]['val_loss_all']['mean']) == pick, (arm, rows)
    assert set(fresh) == {tied, untied}
    m = {row: mean(select, row) for row in select}
    block = markdown_block(DOC, "**Muon's picks, re-selected.**")
    for phrase in (f"×10, ×3 ({m['untied_e10_h3']})", f"×1, ×3 ({m['untied_e1_h3']};", f"×0.3: {m['untied_e0.3_h3']}",
                   f"×3: {m['untied_e3_h3']}", f"head ×1: {m['untied_e1_h1']}", f"head ×10: {m['untied_e1_h10']}",
                   f"tied ×10 ({m['tied_e10']})", f"to ×3 ({m['tied_e3']};", f"×1: {m['tied']})",
                   f"untied {mean(fresh, untied)}, tied {mean(fresh, tied)}"):
        assert phrase in block, phrase

"""docs/findings.md reads in a minute: each claim's verdict in at most 25 words and its key number in at most 60
(whitespace-separated tokens of the cell's Markdown). What a row is too short to hold goes to the section of its
experiment's page that the row links to (conftest.findings_section), where the tests of its numbers read it."""
import math
import os

from conftest import FINDINGS, REPO_ROOT

LIMITS = {'verdict': 25, 'the key number': 60}


def claim_rows(text):
    """[(first cell, {column: cell})] of the findings table: the table whose header starts '| # | claim |'."""
    rows, header = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith('|'):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip('|').split(' | ')]
        if line.startswith('| # | claim |'):
            header = cells
        elif header and not set(line) <= set('|-: '):
            assert len(cells) == len(header), f'{FINDINGS}: a row of {len(cells)} cells under {len(header)}: {line}'
            rows.append((cells[0], dict(zip(header, cells))))
    return rows


def long_cells(text):
    """'row 18: verdict 138 words (at most 25)' for every cell of the findings table over its limit."""
    return [f'row {claim}: {column} {len(cells[column].split())} words (at most {limit})'
            for claim, cells in claim_rows(text) for column, limit in LIMITS.items()
            if len(cells[column].split()) > limit]


def test_every_verdict_and_key_number_of_the_findings_table_is_short():
    with open(os.path.join(REPO_ROOT, FINDINGS), encoding='utf-8') as f:
        text = f.read()
    assert len(claim_rows(text)) >= 19  # the table itself, not an empty parse
    assert long_cells(text) == []


def test_the_check_sees_a_long_cell():
    header = '| # | claim | source | verdict | the key number |\n|---|---|---|---|---|\n'
    short = '| 1 | a claim | a source | **holds** | +0.1 [+0.0, +0.2] |\n'
    long = f"| 2 | a claim | a source | **{' '.join(['word'] * 26)}** | {' '.join(['+0.1'] * 61)} |\n"
    assert long_cells(header + short) == []
    assert long_cells(header + short + long) == ['row 2: verdict 26 words (at most 25)',
                                                 'row 2: the key number 61 words (at most 60)']
    assert long_cells('| # | regime | verdict | the key number |\n' + long) == []  # another table is not read


# Every number of the README's short answer and its Why section, with the row that holds it: (what the README says,
# the start of the row, what that row says). A number moved in either place, or quoted from another row, fails.
QUOTED = [
    ('+0.079 [+0.055, +0.103] nats under AdamW', '| 14 |', '+0.079 [+0.055, +0.103] at the default rates'),
    ('+0.047 [+0.033, +0.062] under Muon', '| 15 |', '+0.047 [+0.033, +0.062] at the default rates'),
    ('each at its best, +0.017 [−0.008, +0.042]', '| 14 |', '+0.017 [−0.008, +0.042] each at its best'),
    ('and −0.015 [−0.035, +0.005] (2.3 M', '| 15 |', '−0.015 [−0.035, +0.005] each at its best'),
    ('2.3 M parameters, 0.3 tokens per parameter', '| 5 and 6, BPE (rows 5, 7, 10-17) |', '| 2.29 M | 0.72 M | 0.31 |'),
    ('from 1.3 M to 9.3 M parameters', '| 18 (Muon) |', '1.3-9.3 M parameters tied, 200 steps'),
    ('no trend in size; none after one pass.', '| 18 (Muon) |', 'with no trend in size; gone after one epoch'),
    ('plain tying cost +0.334 [+0.308, +0.361] nats', '| 18 (AdamW) |', 'plain tied +0.334 [+0.308, +0.361]'),
    ('+0.143 [+0.087, +0.200] after one pass', '| 18 (AdamW) |', 'one epoch: plain tied +0.143 [+0.087, +0.200]'),
    ('`proj` with √d input scaling −0.010 [−0.019, +0.000] and −0.023 [−0.071, +0.024]', '| 18 (AdamW) |',
     '`proj` with √d −0.010 [−0.019, +0.000]; one epoch: plain tied +0.143 [+0.087, +0.200], `proj` with √d −0.023 '
     '[−0.071, +0.024]'),
    ('(9.3 M parameters, each at its own rate)', '| 7, the ladder (rows 18, 19) |', '| 1.34-9.26 M |'),
    ('(0.02-1.9 tokens per parameter)', '| 5, character level (rows 5, 7, 10-13) |', '| 1.9 |'),
]


def readme_short_answer():
    with open(os.path.join(REPO_ROOT, 'README.md'), encoding='utf-8') as f:
        readme = f.read()
    short = readme.split('## Should you tie? The short answer', 1)[1].split('\n## ', 1)[0]
    why = readme.split('## Why plain tying starts above log n', 1)[1].split('\n## ', 1)[0]
    return ' '.join(short.split()), ' '.join(why.split())


def row_of(text, start):
    (row,) = [line for line in text.splitlines() if line.startswith(start)]
    return row


def test_every_number_of_the_short_answer_is_its_rows():
    short, _ = readme_short_answer()
    with open(os.path.join(REPO_ROOT, FINDINGS), encoding='utf-8') as f:
        findings = f.read()
    for said, start, held in QUOTED:
        assert ' '.join(said.split()) in short, said
        assert held in row_of(findings, start), (start, held)
    # the Muon range: the least and the most of row 18 (Muon)'s costs after 200 steps, each at its best
    import re
    muon = row_of(findings, '| 18 (Muon) |').split(' | ')[-1].split('after one epoch')[0]  # the key number
    costs = [float(value.replace('−', '-')) for value in re.findall(r'([+−]\d\.\d{3}) \[', muon)]
    assert f"+{min(costs):.3f} to +{max(costs):.3f} nats after 200 steps" in short


def test_every_number_of_the_why_section_is_the_initial_loss_tables():
    """'within 0.17 of log n' is the largest measured − log n of the remedies (every mode but tied and small_init) at
    GPT-2 small's shape with identity blocks and sqrt(d) input scaling; tied's and small_init's numbers are theirs."""
    _, why = readme_short_answer()
    with open(os.path.join(REPO_ROOT, 'docs', 'initial-loss.md'), encoding='utf-8') as f:
        table = [[cell.strip(' *') for cell in line.strip('|').split('|')] for line in f
                 if line.startswith('| ') and '| true | zero |' in line]
    rows = {cells[0]: cells for cells in table}
    tied, predicted = float(rows['tied'][3].split(' ±')[0]), float(rows['tied'][4])
    assert f"tied starts at {tied:.2f} with √d scaling (prediction {predicted:.2f})" in why
    remedies = [float(cells[5]) for mode, cells in rows.items() if mode not in ('tied', 'small_init')]
    assert len(remedies) >= 7 and f"within {math.ceil(max(remedies) * 100) / 100:.2f} of log n" in why
    assert f"`small_init`, built to start near log 2n, {float(rows['small_init'][5]):+.2f})" in why
    assert float(rows['untied, zero head'][5]) == 0 and 'at log n exactly' in why

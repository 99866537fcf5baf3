"""docs/findings.md reads in a minute: each claim's verdict in at most 25 words and its key number in at most 60
(whitespace-separated tokens of the cell's Markdown). What a row is too short to hold goes to the section of its
experiment's page that the row links to (conftest.findings_section), where the tests of its numbers read it."""
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

"""docs/findings.md reads in a minute: each claim's verdict in at most 25 words and its key number in at most 60
(whitespace-separated tokens of the cell's Markdown). What a row is too short to hold goes to the section of its
experiment's page that the row links to (conftest.findings_section), where the tests of its numbers read it."""
import math
import os
import re

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


# The README's short answer is a table whose every number links to its findings row (docs/findings.md#claim-N) beside
# the setting it holds in: optimizer and depth, the model's training (its horizon), the baseline and the rate regime.
# A findings row's key number keeps one regime to a ';' clause, so each qualifier is read from the clause that holds
# the number (or, for the settings a row states once, from the nearest clause before it or the row as a whole).
LINKED = re.compile(r'\[([^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*)\]\(' + re.escape(FINDINGS) + r'#(claim-[\w-]+)\)')
NUMBER = re.compile(r'[+−-]\d\.\d{3}(?: \[[+−-]\d\.\d{3}, [+−-]\d\.\d{3}\])?')
DEPTH_OF_WIDTH = {'w64': 2, 'w96': 4, 'w128': 8, 'w160': 20}  # the ladder of experiment 7
# a family of qualifiers: its words as the README writes them -> as a findings clause writes them
RATES = {'one rate for every matrix': 'default rates', 'the default rates': 'default rates',
         'each at its own best rate': 'at its best', "the ends' decay held": 'decay held',
         'the 200-step picks': '200-step picks', "the sweep's best rates": "sweep's best"}
QKV = ('q, k and v apart', 'one matrix')


def readme_short_answer():
    with open(os.path.join(REPO_ROOT, 'README.md'), encoding='utf-8') as f:
        readme = f.read()
    # the advice and the table of its numbers, the section after it
    short = readme.split('## Should you tie? The short answer', 1)[1].split('\n## Quick start', 1)[0]
    why = readme.split('## What tying is, and the trap it sets', 1)[1].split('\n## ', 1)[0]  # (*) and its numbers
    return short, ' '.join(why.split())


def row_by_anchor(findings, anchor):
    (row,) = [line for line in findings.splitlines() if line.startswith('| ') and f'<a id="{anchor}"></a>' in line]
    return row


def clauses_to(row, number):
    """The key-number cell's ';' clauses up to and including the one that holds `number` (brackets keep theirs)."""
    cell = row.rstrip(' |').rsplit(' | ', 1)[1]
    clauses, depth, current = [], 0, ''
    for char in cell:
        depth += (char in '[(') - (char in '])')
        if char == ';' and depth == 0:
            clauses.append(current)
            current = ''
        else:
            current += char
    clauses.append(current)
    held = [k for k, clause in enumerate(clauses) if number in clause]
    assert held, f'{number} is not in its row: {row[:60]}'
    return clauses[:held[0] + 1]


def nearest(clauses, words):
    """Of `words`, the one named last in the clauses up to the number's (None if none is)."""
    named = [(clause.rfind(word), k, word) for k, clause in enumerate(clauses) for word in words if word in clause]
    return max(named, key=lambda found: (found[1], found[0]))[2] if named else None


def depths(text):
    """The depths a text names: '4 layers', '2-20 layers', '8 and 20 layers', or a ladder width such as 'w160'."""
    named = re.findall(r'\b(\d+)(?:(?:-| and )(\d+))? layers', text)
    return {int(n) for pair in named for n in pair if n} | {d for w, d in DEPTH_OF_WIDTH.items()
                                                           if re.search(rf'\b{w}\b', text)}


def qualifier_mismatches(readme_short, findings):
    """'claim-N: NUMBER: what differs' for every linked number of the short answer's table whose findings clause
    holds another optimizer, depth, baseline, horizon, q/k/v form or rate regime than the README's row says."""
    mismatches = []
    for line in readme_short.splitlines():
        if not line.startswith('| ') or 'findings.md#' not in line:
            continue
        setting, training, baseline, numbers = [cell.strip() for cell in line.strip('| ').split(' | ')]
        optimizer = 'Muon' if 'Muon' in setting else 'AdamW'
        for text, anchor in LINKED.findall(numbers):
            row, before = row_by_anchor(findings, anchor), numbers.split(f'[{text}]')[0].rsplit(';', 1)[-1]
            for number in NUMBER.findall(text):
                clauses = clauses_to(row, number)
                clause, said = clauses[-1], f'{anchor}: {number}'
                if optimizer not in row or ({'Muon', 'AdamW'} - {optimizer}) & set(re.findall(r'\w+', clause)):
                    mismatches.append(f'{said}: not {optimizer}')
                if not depths(setting) <= (depths(clause) or depths(row)):
                    mismatches.append(f'{said}: depth {sorted(depths(setting))} not in the row')
                if ('zero head' in baseline) != ('zero head' in clause):
                    mismatches.append(f'{said}: baseline {baseline!r}')
                read = ' '.join(clauses) if '√d' in baseline else clause  # named once for the clauses after it
                if ('√d' in baseline) != ('untied with √d' in read):
                    mismatches.append(f'{said}: baseline {baseline!r} (√d)')
                if ('one epoch' in training) != ('one epoch' in clause):
                    mismatches.append(f'{said}: horizon {training!r}')
                if optimizer == 'Muon' and nearest(clauses, QKV) != QKV[0]:  # the README's Muon: q, k and v apart
                    mismatches.append(f'{said}: q, k, v not apart')
                regime = [held for words, held in RATES.items() if words in before]
                if regime and nearest(clauses, set(RATES.values())) != regime[-1]:
                    mismatches.append(f'{said}: rates {regime[-1]!r}')
    return mismatches


def findings_text():
    with open(os.path.join(REPO_ROOT, FINDINGS), encoding='utf-8') as f:
        return f.read()


def test_every_number_of_the_short_answer_is_its_rows_in_its_setting():
    short, findings = readme_short_answer()[0], findings_text()
    linked = [number for text, _ in LINKED.findall(short) for number in NUMBER.findall(text)]
    assert len(linked) >= 14  # the table itself, not an empty parse
    assert qualifier_mismatches(short, findings) == []
    # every number of the advice above the table is one of the table's, in a row of the same optimizer and depth
    advice = short.split('\n| ', 1)[0].split('\n* ')[1:]
    table = [line for line in short.splitlines() if line.startswith('| ') and 'findings.md#' in line]
    for bullet in advice:
        lead = bullet.split(':', 1)[0]
        optimizer = re.findall(r'AdamW|Muon', lead)
        same = ' '.join(line for line in table if optimizer and optimizer[0] in line.split(' | ')[0]
                        and depths(line.split(' | ')[0]) & depths(lead))
        for number in re.findall(r'\d\.\d{3}', bullet):
            assert number in same, (lead, number)


def test_the_qualifier_check_sees_a_sentence_that_differs_from_its_row():
    findings = findings_text()
    row = row_by_anchor(findings, 'claim-14')
    short = ('| AdamW, 4 layers | 700 steps | zero head | each at its own best rate '
             '[+0.023 [+0.001, +0.045]](docs/findings.md#claim-14) |')
    assert qualifier_mismatches(short, findings) == []
    for planted, says in [(short.replace('zero head', 'normal head'), 'baseline'),
                          (short.replace('AdamW', 'Muon'), 'not Muon'),
                          (short.replace('4 layers', '20 layers'), 'depth'),
                          (short.replace('700 steps', 'one epoch'), 'horizon'),
                          (short.replace('each at its own best rate', 'the default rates'), 'rates')]:
        assert any(says in found for found in qualifier_mismatches(planted, findings)), planted
    moved = findings.replace(row, row.replace('against a zero head, each', 'each'))
    assert any('baseline' in found for found in qualifier_mismatches(short, moved))


# A figure quoted on two pages with two values: an interval is its own label (one point estimate for each bracket,
# wherever it is quoted), and the counts a reader meets on several pages are labelled by their words.
PAGES = ['README.md'] + [os.path.join('docs', name) for name in sorted(os.listdir(os.path.join(REPO_ROOT, 'docs')))
                         if name.endswith('.md')]
INTERVAL = re.compile(r'([+−-]?\d+(?:\.\d+)?)\s*\**\s*\[([+−-]?\d+(?:\.\d+)?), ([+−-]?\d+(?:\.\d+)?)\]')
COUNT_WORDS = r'(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|nineteen|twenty|\d{1,3})'
LABELS = {'experiments': rf'\b({COUNT_WORDS}) experiments\b', 'claims': rf'\b({COUNT_WORDS}) claims\b',
          "experiment 3's runs": r"experiment 3's (\d+) runs"}


def figures_with_two_values(texts):
    """'LABEL: {values} (pages)' for every labelled figure the pages quote with more than one value."""
    values, pages = {}, {}
    for page, text in texts.items():
        text = ' '.join(text.split()).replace('−', '-')
        found = [(f'[{low}, {high}]', point.lstrip('+')) for point, low, high in INTERVAL.findall(text)]
        found += [(label, value.lower()) for label, pattern in LABELS.items()
                  for value in re.findall(pattern, text, flags=re.I)]
        for label, value in found:
            values.setdefault(label, set()).add(value)
            pages.setdefault(label, set()).add(page)
    return [f'{label}: {sorted(found)} ({", ".join(sorted(pages[label]))})' for label, found in values.items()
            if len(found) > 1]


def test_a_figure_has_one_value_on_every_page():
    texts = {}
    for page in PAGES:
        with open(os.path.join(REPO_ROOT, page), encoding='utf-8') as f:
            texts[page] = f.read()
    assert sum(len(INTERVAL.findall(text)) for text in texts.values()) > 100  # the pages, not an empty parse
    assert figures_with_two_values(texts) == []


def test_the_figure_check_sees_two_values():
    assert figures_with_two_values({'a.md': 'tied costs +0.161 [+0.146, +0.176] in eight experiments',
                                    'b.md': 'and +0.161 [+0.146, +0.176] from Eight experiments'}) == []
    assert figures_with_two_values({'a.md': 'costs +0.161 [+0.146, +0.176]', 'b.md': 'costs +0.195 [+0.146, +0.176]'}
                                   ) == ['[+0.146, +0.176]: [\'0.161\', \'0.195\'] (a.md, b.md)']
    assert figures_with_two_values({'a.md': 'Seven experiments', 'b.md': 'the eight experiments'}) == [
        "experiments: ['eight', 'seven'] (a.md, b.md)"]


def test_every_number_of_the_first_section_is_the_initial_loss_tables():
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

"""The docs a reader opens stay a size a reader holds and answer first: README.md and docs/*.md within a word budget
(words as `wc -w` counts them), each docs page opening with its answer in at most five lines and the command that
reproduces it, in the present tense (no diary of sessions and worktrees: that lives beside the figures' records under
docs/results/, which docs/results/README.md indexes, one row a record)."""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md')))
READER_FACING = [os.path.join(ROOT, 'README.md'), *PAGES]
TOTAL_WORDS, PAGE_WORDS = 30_000, 6_000
PAGE_CAPS = {'performance.md': 2_000, 'findings.md': 3_500}
ANSWER_LINES, LINE_WIDTH = 5, 120  # five lines as the pages wrap them
DIARY = ('this work', 'a later session', 'this session', 'worktree', 'paused', 'the experiment grid')


def words(path):
    with open(path, encoding='utf-8') as f:
        return len(f.read().split())


def test_the_reader_facing_docs_stay_within_their_word_budget():
    counts = {os.path.relpath(p, ROOT): words(p) for p in READER_FACING}
    assert sum(counts.values()) <= TOTAL_WORDS, (sum(counts.values()), counts)
    for page, count in counts.items():
        assert count <= PAGE_CAPS.get(os.path.basename(page), PAGE_WORDS), (page, count)


@pytest.mark.parametrize('page', [os.path.basename(p) for p in PAGES])
def test_each_page_opens_with_its_answer_in_five_lines_then_the_command(page):
    with open(os.path.join(ROOT, 'docs', page), encoding='utf-8') as f:
        lines = f.read().splitlines()
    assert lines[0].startswith('# '), f"{page} does not open with its title"
    fence = next((k for k, line in enumerate(lines) if line.startswith('```')), None)
    assert fence is not None, f"{page} has no command block"
    answer = [line for line in lines[1:fence] if line.strip()]
    assert 1 <= len(answer) <= ANSWER_LINES and not any(line.startswith('#') for line in answer), \
        f"{page}: {len(answer)} lines between the title and the first command block"
    assert max(len(line) for line in answer) <= LINE_WIDTH, f"{page}: an answer line over {LINE_WIDTH} characters"


@pytest.mark.parametrize('page', [os.path.relpath(p, ROOT) for p in READER_FACING])
def test_no_reader_facing_page_keeps_a_diary(page):
    with open(os.path.join(ROOT, page), encoding='utf-8') as f:
        text = f.read().lower()
    assert not [phrase for phrase in DIARY if phrase in text]


def test_every_record_is_in_the_results_index():
    with open(os.path.join(ROOT, 'docs', 'results', 'README.md'), encoding='utf-8') as f:
        linked = set(re.findall(r'\]\(([^)/.][^)/]*)/[^)]*\)', f.read()))  # not ../, the pages
    folders = {os.path.basename(p.rstrip('/')) for p in glob.glob(os.path.join(ROOT, 'docs', 'results', '*/'))}
    assert folders - linked == set(), "records missing from docs/results/README.md"
    assert linked - folders == set(), "docs/results/README.md links folders that are not there"

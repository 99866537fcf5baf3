"""Nothing cited that a reader cannot open: every relative link in the Markdown resolves to a file of the
repository (and an #anchor to one of its headings), every repository path that a comment, a docstring, a script
or a doc names exists, a section named in quotes after its file ("docs/x.md, "Heading"") is a heading there, and
nothing cites notes outside the repository (DESIGN.md) or an issue by its number (an external project's issue
names its project: owner/name issue #N). What the project needs as design notes it writes in docs/. Run outputs (out*/, data/, the run records under docs/results/) are not checked: they are written by
the commands, not kept in the repository; nor are placeholders a reader fills in (config/ladder_SIZE.py, DIR/FILE)."""
import functools
import glob
import os
import re

import pytest

from conftest import REPO_ROOT, slug  # slug: GitHub's anchor for a heading

# The Markdown a reader opens: the README and docs/ (docs/results/ holds the runs' own summaries).
MARKDOWN = ['README.md', *sorted(os.path.relpath(p, REPO_ROOT) for p in glob.glob(os.path.join(REPO_ROOT, 'docs', '*.md')))]
# Everything else that names repository files in its comments, docstrings and commands.
# (This file's own examples of broken paths are left out.)
SOURCES = sorted({os.path.relpath(p, REPO_ROOT) for pattern in ('*.py', 'lib/*.py', 'lab/*.py', 'config/*', 'tests/*.py',
                                                                 'docs/*.sh', '.ci/run', 'pytest.ini', 'requirements.txt')
                  for p in glob.glob(os.path.join(REPO_ROOT, pattern)) if os.path.isfile(p)} - {'tests/test_links.py'})
FOLDERS = ('lib', 'lab', 'docs', 'config', 'tests', '.ci')  # the repository's own; out*/ and data/ are outputs

LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
PATH = re.compile(r'(?<![\w./-])((?:%s)/[\w./*{},$<>-]*[\w*}/>])' % '|'.join(re.escape(f) for f in FOLDERS))
BARE_NAME = re.compile(r'(?<![\w./$}-])([\w-]+\.(?:py|md|sh))\b')
# Notes a reader of the repository cannot open, and issues cited by number (or as "the issue") without their project.
UNOPENABLE = re.compile(r"(?-i:\bDESIGN\b)(?:\.md\b)?|\(?\bissues? ?#?\d+|#\d+ issue|\bissue-\d+|\(issue\b|\bthe issue's\b", re.I)
SECTION = re.compile(r'(?<![\w./-])((?:[\w-]+/)*[\w-]+\.md|README)\)?,\s+"([^"]+)"')
# A word in capitals (SIZE, DIR, FILE), path/to, or a value a script fills in: $size, <size>, f'{size}'.
PLACEHOLDER = re.compile(r'(?:^|[/_.<-])(?:[A-Z][A-Z0-9]*)(?:$|[/_.>-])|path/to|[$<]|\{[^{},]*(?:\}|$)')


def read(path):
    with open(os.path.join(REPO_ROOT, path), encoding='utf-8') as f:
        return f.read()


def prose(text):
    """The Markdown without its fenced code blocks and inline code spans (no links live there)."""
    text = re.sub(r'^(```|~~~).*?^\1[^\n]*$', '', text, flags=re.S | re.M)
    return re.sub(r'`[^`\n]*`', '', text)


def headings(path):
    """The headings of a Markdown file, outside its code blocks, as (text, anchor), duplicates numbered as GitHub does."""
    found, seen = [], {}
    for line in re.sub(r'^(```|~~~).*?^\1[^\n]*$', '', read(path), flags=re.S | re.M).splitlines():
        match = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
        if match:
            text, anchor = match.group(1), slug(match.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.append((text, anchor if count == 0 else f'{anchor}-{count}'))
        found += [(anchor, anchor) for anchor in re.findall(r'<a id="([\w-]+)"></a>', line)]  # a table row's own
    return found


def broken_links(path, text=None):
    """Every relative link of a Markdown file whose file or heading is missing, as 'target (why)'."""
    broken = []
    for target in LINK.findall(prose(read(path) if text is None else text)):
        if re.match(r'[a-z][a-z0-9+.-]*:', target, re.I):  # https:, mailto: ...: not the repository's
            continue
        file, _, anchor = target.partition('#')
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(os.path.join(REPO_ROOT, resolved)):
            broken.append(f'{target} (no {resolved})')
        elif anchor and resolved.endswith('.md') and anchor not in [a for _, a in headings(resolved)]:
            broken.append(f'{target} (no heading #{anchor} in {resolved})')
    return broken


def expansions(path):
    """a/{b,c}.py -> [a/b.py, a/c.py]; no braces -> [path]."""
    match = re.search(r'\{([^{}]*)\}', path)
    if not match:
        return [path]
    return [e for part in match.group(1).split(',')
            for e in expansions(path[:match.start()] + part + path[match.end():])]


def exists(path):
    """A repository path as text names it: a file or folder, a glob with a match, a module without .py
    (lab/ablation_report), or a module's attribute (lib/throughput.flops_per_token) that the module defines."""
    full = os.path.join(REPO_ROOT, path)
    if '*' in path:
        return bool(glob.glob(full))
    if os.path.exists(full) or os.path.exists(full + '.py'):
        return True
    module, dot, attribute = path.rpartition('.')
    while dot and not os.path.exists(os.path.join(REPO_ROOT, module + '.py')):
        module, dot, rest = module.rpartition('.')  # lib/optimizers.Muon.step: the module is lib/optimizers
        attribute = f'{rest}.{attribute}'
    if not dot:
        return False
    name = attribute.split('.')[0]
    return re.search(rf'^\s*(?:def|class)\s+{name}\b|^{name}\s*[:=]', read(module + '.py'), re.M) is not None


# A commit a text names (a finished experiment's record: "lab/experiment7_results.py at c72d8a3").
COMMIT = re.compile(r'\b[0-9a-f]{7,40}\b')


def git(*args):
    import subprocess
    return subprocess.run(['git', *args], cwd=REPO_ROOT, capture_output=True, text=True)


@functools.cache
def shallow_clone():
    """Whether this clone lacks the history (git clone --depth), where no named commit can be read."""
    return git('rev-parse', '--is-shallow-repository').stdout.strip() == 'true'


def at_a_named_commit(path, nearby):
    """Whether a path gone from the tree exists at a commit named near it (within its paragraph); in a shallow clone,
    which lacks the history, a named commit is taken at its word."""
    commits = COMMIT.findall(nearby)
    if commits and shallow_clone():
        return True
    return any(git('cat-file', '-e', f'{commit}:{path}').returncode == 0 for commit in commits)


def missing_paths(text):
    """The repository paths named in a text that do not exist, at HEAD or at a commit named beside them
    (placeholders and outputs left out)."""
    missing = []
    for match in PATH.finditer(text):
        named = match.group(1).rstrip('.').removesuffix('/')
        if PLACEHOLDER.search(named):
            continue
        start, end = text.rfind('\n\n', 0, match.start()), text.find('\n\n', match.end())
        nearby = text[start + 1:end if end >= 0 else len(text)]
        missing += [e for e in expansions(named) if not exists(e) and not at_a_named_commit(e, nearby)]
    return missing


def missing_sections(path, text):
    """'file.md, "Heading"' where the file has no heading that starts so, resolved as the text's own folder would."""
    missing = []
    for file, section in SECTION.findall(text):
        file = 'README.md' if file == 'README' else file
        candidates = [os.path.normpath(os.path.join(os.path.dirname(path), file)), file]
        target = next((c for c in candidates if os.path.isfile(os.path.join(REPO_ROOT, c))), None)
        if target is None:
            missing.append(f'{file} (no such file)')
            continue
        wanted = ' '.join(section.replace('`', '').lower().split())
        if not any(' '.join(text_.replace('`', '').lower().split()).startswith(wanted) for text_, _ in headings(target)):
            missing.append(f'{file}, "{section}"')
    return missing


def unopenable_citations(text):
    """DESIGN.md, 'issue 39', '(issue: ...)' and the like; an issue of a named project (owner/name issue #N) opens."""
    return [match.group() for match in UNOPENABLE.finditer(text)
            if not re.search(r'[\w.-]+/[\w.-]+ $', text[max(0, match.start() - 80):match.start()])]


def repository_names():
    """The file names the repository holds (outputs and caches left out)."""
    names = set()
    for folder, subfolders, files in os.walk(REPO_ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith(('.git', 'out', 'data', '__pycache__', '.pytest'))]
        names.update(files)
    return names


@pytest.mark.parametrize('path', MARKDOWN)
def test_every_relative_link_in_the_markdown_opens(path):
    assert broken_links(path) == []


@pytest.mark.parametrize('path', MARKDOWN + SOURCES)
def test_every_repository_path_named_exists(path):
    assert missing_paths(read(path)) == []


@pytest.mark.parametrize('path', MARKDOWN + SOURCES)
def test_every_section_named_after_its_file_is_a_heading_there(path):
    assert missing_sections(path, read(path)) == []


@pytest.mark.parametrize('path', MARKDOWN)
def test_every_file_the_markdown_names_by_its_bare_name_is_in_the_repository(path):
    # "experiment6.md", "recipe_bpe.py" without their folder: a file of that name must still exist somewhere here
    assert sorted(set(BARE_NAME.findall(read(path))) - repository_names()) == []


@pytest.mark.parametrize('path', MARKDOWN + SOURCES)
def test_nothing_cites_notes_outside_the_repository_or_an_issue_number(path):
    assert unopenable_citations(read(path)) == []


def test_the_checks_see_what_they_check():
    # Each pattern finds what the tree names (so an empty list above is not a pattern that finds nothing) ...
    assert ('The knobs', 'the-knobs') in headings('README.md')
    assert slug('A rate for each end: `--embed_lr`, `--head_lr`') == 'a-rate-for-each-end---embed_lr---head_lr'
    assert slug('Stage 2: tying\'s cost at each size (claim 18)') == 'stage-2-tyings-cost-at-each-size-claim-18'
    assert 'lab/experiment7_tables.py' in PATH.findall(read('config/experiment7.sh'))
    assert LINK.findall(prose(read('README.md')))
    # ... and a renamed file, a lost heading, a gone attribute or section are each caught.
    assert broken_links('docs/training.md', '[a](experiments.md) [b](experiment99.md) [c](../README.md#the-knobs)'
                        ' [d](../README.md#no-such-heading) [e](#sampling) [f](https://example.com/x.md)') == [
        'experiment99.md (no docs/experiment99.md)', '../README.md#no-such-heading (no heading #no-such-heading in README.md)']
    assert missing_paths('lib/device.py lab/run_results.lens_numbers docs/results/experiment7-* lib/ '
                         'docs/exp6_rates_{adamw,muon}.png config/ladder_SIZE.py DIR/FILE out-x/lib.py data/x') == []
    assert missing_paths('lib/tuned_lens.py, docs/experiment7_tables.py. lib/device.no_such_function '
                         'docs/exp6_rates_{adamw,sgd}.png') == [
        'lib/tuned_lens.py', 'docs/experiment7_tables.py', 'lib/device.no_such_function', 'docs/exp6_rates_sgd.png']
    # a retired file named at a commit that holds it passes; at one that does not (afaee28, the first) it does not
    if not shallow_clone():
        assert missing_paths('lab/experiment7_results.py printed it at c72d8a3.') == []
        assert missing_paths('lab/experiment7_results.py printed it at afaee28.\n\nAt c72d8a3 too.') == [
            'lab/experiment7_results.py']
    assert missing_sections('lib/device.py', '(docs/performance.md, "A padded vocabulary") '
                            '(docs/experiment6.md, "Wall time") (README, "The knobs")') == ['docs/experiment6.md, "Wall time"']
    assert unopenable_citations("DESIGN's section 1") == ["DESIGN"]  # the notes named without their file name too
    assert unopenable_citations("a design of its own") == []
    assert unopenable_citations("(DESIGN.md 2c) (issue 39) issue #12 (issue: the 2026 probes) the issue's 6 hours "
                                '[karpathy/build-nanogpt issue #89](https://github.com/karpathy/build-nanogpt/issues/89) '
                                'modded-nanogpt PR #323') == ['DESIGN.md', '(issue 39', 'issue #12', '(issue', "the issue's"]
    assert 'initial-loss.md' in BARE_NAME.findall(read('docs/optimizers.md'))
    assert {'experiment6.md', 'recipe_bpe.py', 'train.py'} <= repository_names()
    assert 'experiment99.md' not in repository_names()

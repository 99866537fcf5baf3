"""A user has no ../shared beside the clone: no tiny shakespeare, no cached tiktoken files. The test modules whose
data or models come from there when it is there are listed in .ci/without_shared.txt, and .ci/run runs them again
in a fresh clone and venv with nothing beside them, as a user's are. The list must name every such module, or a
fallback that only a user meets goes untested."""
import os
import re

from conftest import REPO_ROOT

# ../shared's files named as a path (os.path.join(..., 'shared', 'data', ...)), or the fixture that skips without
# tiktoken's GPT-2 files, which the suite takes from ../shared's cache where it is there (conftest.py).
USES_SHARED = re.compile(r"""['"]shared['"],\s*['"](data|tiktoken_cache)['"]|\bgpt2_files\b""")


def listed():
    with open(os.path.join(REPO_ROOT, '.ci', 'without_shared.txt'), encoding='utf-8') as f:
        return [line.split('#')[0].strip() for line in f if line.split('#')[0].strip()]


def test_every_module_that_reads_shared_is_run_again_without_it():
    tests = os.path.join(REPO_ROOT, 'tests')
    modules = [name for name in os.listdir(tests) if name.startswith('test_') and name.endswith('.py')
               and name != os.path.basename(__file__)]
    readers = {f'tests/{name}' for name in modules
               if USES_SHARED.search(open(os.path.join(tests, name), encoding='utf-8').read())}
    assert 'tests/test_first_run.py' in readers and 'tests/test_corpus.py' in readers  # the pattern still sees them
    assert set(listed()) == readers


def test_ci_runs_the_list_in_a_clone_with_nothing_beside_it():
    script = open(os.path.join(REPO_ROOT, '.ci', 'run'), encoding='utf-8').read()
    assert 'without_shared.txt' in script and 'git clone' in script and 'venv' in script

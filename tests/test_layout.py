"""The house rules of the layout (rooms named by what they hold, imports one way, the lab apart from the
reading path), checked by parsing every module's imports, the lazy ones inside functions included, so they
stay true."""
import ast
import os
import re

import pytest

from conftest import REPO_ROOT

SCRIPTS = ('train', 'sample', 'prepare', 'init_loss', 'ablate', 'bench', 'export')
READING_PATH = ('train', 'sample', 'prepare')  # what a student reads top to bottom: never the lab's code
MISC_NAMES = ('common', 'utils', 'util', 'helpers', 'misc', 'plumbing', 'stuff', 'shared')


def our_modules():
    """{module name: path} for model.py, the scripts and every lib/ and lab/ module."""
    modules = {name[:-3]: os.path.join(REPO_ROOT, name) for name in os.listdir(REPO_ROOT) if name.endswith('.py')}
    for package in ('lib', 'lab'):
        folder = os.path.join(REPO_ROOT, package)
        modules.update({f'{package}.{name[:-3]}': os.path.join(folder, name) for name in os.listdir(folder)
                        if name.endswith('.py') and name != '__init__.py'})
    return modules


def imports_of(path, ours):
    """The modules of ours that the file imports anywhere (top level or inside a function)."""
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding='utf-8').read())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from lib import memory` imports lib.memory; `from lib.memory import x` imports lib.memory
            names = [node.module] + [f'{node.module}.{alias.name}' for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in ours)
    return found


def import_graph():
    ours = our_modules()
    return {name: imports_of(path, ours) for name, path in ours.items()}


def test_the_top_level_holds_the_scripts_and_model_py_only():
    assert set(name for name in our_modules() if '.' not in name) == set(SCRIPTS) | {'model'}


def test_model_py_imports_nothing_of_ours():
    assert import_graph()['model'] == set()


def test_no_support_module_imports_a_script():
    graph = import_graph()
    upward = {(name, target) for name, targets in graph.items() if name.startswith('lib.')
              for target in targets if target in SCRIPTS}
    assert upward == set()


def test_no_support_module_imports_the_lab():
    graph = import_graph()
    into_lab = {(name, target) for name, targets in graph.items() if name.startswith('lib.')
                for target in targets if target.startswith('lab.')}
    assert into_lab == set()


def reachable(graph, start):
    """Every module that importing start imports, directly or through others (start included)."""
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    return seen


@pytest.mark.parametrize('script', READING_PATH)
def test_the_reading_path_never_reaches_the_lab(script):
    graph = import_graph()
    assert 'lab.run_results' in reachable(graph, 'ablate')  # the walk does follow imports into lab/
    assert sorted(name for name in reachable(graph, script) if name.startswith('lab.')) == []


MAIN_JOB = tuple(script for script in SCRIPTS if script != 'ablate')  # ablate.py is the lab's own script


def test_the_support_folder_holds_only_what_the_main_job_needs():
    # Every lib/ module is reached from a main-job script; one that only ablate.py or a lab script reaches
    # belongs in lab/. And no main-job script reaches lab/: a lab module the main job needed would belong in lib/.
    graph = import_graph()
    main_job = set().union(*(reachable(graph, script) for script in MAIN_JOB))
    assert sorted(name for name in graph if name.startswith('lib.') and name not in main_job) == []
    assert sorted(name for name in main_job if name.startswith('lab.')) == []
    assert {'lab.grid_runner', 'lab.ablation_grid', 'lab.ablation_report', 'lab.ablation_figure', 'lab.run_results',
            'lab.tuned_lens', 'lab.floor', 'lab.experiment7_tables'} <= set(graph)



def test_every_name_lib_defines_is_used_by_the_main_job():
    # The same rule a name at a time: a function, class or constant that lib/ defines and only ablate.py, lab/ or
    # the tests use belongs in lab/ (a name found only in its own module's definition counts as unused).
    ours = our_modules()
    main_job = [open(ours[name], encoding='utf-8').read() for name in ('model', *MAIN_JOB)]
    lib = {name: open(path, encoding='utf-8').read() for name, path in ours.items() if name.startswith('lib.')}
    lab_only = []
    for module, text in lib.items():
        elsewhere = main_job + [other for name, other in lib.items() if name != module]
        for node in ast.parse(text).body:
            names = ([node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else
                     [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else [])
            for name in names:
                pattern = re.compile(rf'\b{name}\b')
                if not any(pattern.search(t) for t in elsewhere) and len(pattern.findall(text)) < 2:
                    lab_only.append(f'{module}.{name}')
    assert lab_only == []


def find_circle(graph):
    """A list of modules that import each other in a ring, closed (['a', 'b', 'a']), or None."""
    state = {}  # name -> 'open' while on the current path, 'done' after

    def visit(name, path):
        state[name] = 'open'
        for target in sorted(graph.get(name, ())):
            if state.get(target) == 'open':
                return path[path.index(target):] + [target]
            if target not in state:
                circle = visit(target, path + [target])
                if circle:
                    return circle
        state[name] = 'done'
        return None

    for name in sorted(graph):
        if name not in state:
            circle = visit(name, [name])
            if circle:
                return circle
    return None


def test_there_is_no_import_circle():
    assert find_circle(import_graph()) is None


def test_the_circle_finder_finds_a_circle_and_only_a_circle():
    assert find_circle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == ['a', 'b', 'c', 'a']
    assert find_circle({'a': {'b', 'c'}, 'b': {'c'}, 'c': set()}) is None
    # The old layout's circle, model.py <-> hf_gpt2.py, would be caught.
    assert find_circle({'model': {'hf_gpt2'}, 'hf_gpt2': {'model'}}) == ['hf_gpt2', 'model', 'hf_gpt2']


def test_no_module_has_a_miscellaneous_name_and_each_says_what_it_holds():
    for name, path in our_modules().items():
        assert name.split('.')[-1] not in MISC_NAMES, name
        doc = ast.get_docstring(ast.parse(open(path, encoding='utf-8').read()))
        assert doc and len(doc.split()) >= 8, f'{name} needs a docstring saying what it holds'


# model.py: NanoGPT's is about 330 lines; this one has nine tie modes, pit, the padded head and, as NanoGPT's
# configure_optimizers, which optimizer each parameter gets, beside their reasons: 400 is where it must stop growing
# (train.py's cap is in test_reading_path.py); the README is a front door of at most 160 lines.
@pytest.mark.parametrize('path, most', [('model.py', 400), ('ablate.py', 550),
                                        ('lab/ablation_report.py', 550), ('README.md', 160)])
def test_the_files_a_reader_starts_with_stay_short(path, most):
    with open(os.path.join(REPO_ROOT, path), encoding='utf-8') as f:
        assert len(f.read().splitlines()) <= most


def test_prepare_py_starts_without_importing_torch():
    # lib/memory.py's docstring promises it: prepare.py (and --help) must not wait a second or two for torch.
    import subprocess
    import sys
    code = "import sys, prepare; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, '-c', code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'False'


@pytest.mark.parametrize('command', [['lab/experiment7_tables.py'], ['lab/experiment7_tables.py', 'sizes']])
def test_the_lab_scripts_run_from_the_repository_root_as_the_docs_write_them(command):
    # `python lab/NAME.py` puts lab/ first on sys.path, not the root: each script finds lib/, lab/ and docs/results/
    # from its own location
    import subprocess
    import sys
    result = subprocess.run([sys.executable, *command], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


def first_sentence(doc):
    """A docstring's first sentence, whitespace collapsed: its opening paragraph up to the first full stop that ends a
    sentence (one followed by a space and no digit, and not an ellipsis: 'et al. 2023' and 'out-... folder' go on),
    without the full stop, or the colon that ends a paragraph introducing a list."""
    paragraph = ' '.join(doc.strip().split('\n\n', 1)[0].split())
    return re.split(r'(?<!\.)\.(?=\s+[^\s\d])', paragraph, maxsplit=1)[0].rstrip('.:')


def layout_cells(text):
    """{path: cell} of the layout page's tables of lib/ and lab/: the 'what it holds' column of each row."""
    rows = re.findall(r'^ *\| `((?:lib|lab)/\w+\.py)` \| (.*?) \|$', text, flags=re.M)
    return dict(rows)


def stale_cells(text):
    """Each lib/ and lab/ module whose cell in the layout page is not its docstring's first sentence: the path, the
    cell, and the row the page should have."""
    cells, stale = layout_cells(text), []
    for name, path in sorted(our_modules().items()):
        if name.split('.')[0] in ('lib', 'lab'):
            relative = os.path.relpath(path, REPO_ROOT)
            holds = first_sentence(ast.get_docstring(ast.parse(open(path, encoding='utf-8').read())))
            if cells.get(relative) != holds:
                stale.append((relative, cells.get(relative), f'| `{relative}` | {holds} |'))
    return stale


def test_the_layout_page_says_what_each_module_holds_in_its_docstrings_first_sentence():
    # docs/layout.md cannot go stale: each row's cell is the module's own opening sentence, word for word, so a
    # module that changes what it holds changes its docstring and the page with it (the message gives the new row).
    with open(os.path.join(REPO_ROOT, 'docs', 'layout.md'), encoding='utf-8') as f:
        layout = f.read()
    assert stale_cells(layout) == []
    assert len(layout_cells(layout)) == sum(name.split('.')[0] in ('lib', 'lab') for name in our_modules())
    # ... and a stale or missing cell is caught (a sentence, not a paragraph, is what a cell holds).
    assert [row[0] for row in stale_cells(layout.replace('| `lib/probes.py` | Probes', '| `lib/probes.py` | Pro'))] \
        == ['lib/probes.py']
    assert first_sentence('The lens (Belrose et al. 2023): each layer. More.\n\nNext.') == 'The lens (Belrose et al. 2023): each layer'
    assert first_sentence('A list, in two pieces:\n\nparse_settings   the settings.') == 'A list, in two pieces'


def test_prepare_py_reaches_no_device_code():
    # lib/device.py chooses the device and imports torch; prepare.py only needs memory's messages (lib/memory.py)
    graph = import_graph()
    assert 'lib.memory' in reachable(graph, 'prepare')  # the walk does follow prepare.py's imports
    assert sorted({'lib.device', 'lib.throughput'} & reachable(graph, 'prepare')) == []

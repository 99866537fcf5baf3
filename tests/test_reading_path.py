"""The reading path stays readable: train.py is one story in NanoGPT's shape, short enough to read in a sitting,
leaning on few of the project's names, with one optimizer step a reader can follow without opening anything else.
Checked by parsing the files, so a change that breaks the shape fails here, not in a reviewer's patience."""
import ast
import os

from conftest import REPO_ROOT

OURS = ('lib', 'model')  # the project's own modules: lib.* and model


def source(name):
    with open(os.path.join(REPO_ROOT, name), encoding='utf-8') as f:
        return f.read()


def our_imports(tree):
    """{module: [names]} of every `from <ours> import ...` at the top level."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split('.')[0] in OURS:
            found.setdefault(node.module, []).extend(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            assert not any(alias.name.split('.')[0] in OURS for alias in node.names), 'import a name, not a module'
    return found


def test_train_py_is_at_most_360_lines():
    # 300 after the reading path's rewrite; 310 with the first run's lesson on the console; 365 with the batch, the
    # autocast and the checkpoint dict brought in from lib/, so that one step and one checkpoint read in this file
    # (NanoGPT's train.py is 336 lines)
    assert len(source('train.py').splitlines()) <= 360


def test_one_step_reads_in_three_files_and_the_checkpoint_in_train_py():
    # The batch, the rate's schedule, the autocast, the forward and backward, the clip and the step: train.py, with
    # the model's forward and its optimizer groups in model.py (as NanoGPT's configure_optimizers) and the rates in
    # lib/optimizers.py, nothing else.
    tree = ast.parse(source('train.py'))
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {'get_batch', 'next_batches', 'get_lr', 'training_step', 'checkpoint', 'restore'} <= defined
    loop = function(tree, 'train')
    assert any(ast.unparse(node.func) == 'torch.autocast' for node in ast.walk(loop) if isinstance(node, ast.Call))
    step_names = {'build_optimizer', 'set_rates', 'get_batch', 'GPT'}
    sources = {name: module for module, names in our_imports(tree).items() for name in names if name in step_names}
    assert set(sources.values()) <= {'lib.optimizers', 'model'}, sources
    # which parameter goes to which optimizer is the model's to say, as in NanoGPT: no group is made in lib/
    assert function(ast.parse(source('model.py')), 'optimizer_groups')
    assert not [ast.unparse(node) for node in ast.walk(ast.parse(source('lib/optimizers.py')))
                if isinstance(node, ast.Call) and any(keyword.arg == 'role' for keyword in node.keywords)]
    # what ckpt.pt holds is the dict checkpoint() returns, each key a reader sees there; Run only writes it
    saved = function(tree, 'checkpoint')
    returned = next(node.value for node in ast.walk(saved) if isinstance(node, ast.Return))
    from lib.run_files import CHECKPOINT_KEYS
    assert set(CHECKPOINT_KEYS) <= {keyword.arg for keyword in returned.keywords}
    run = ast.parse(source('lib/training_run.py'))
    assert not [ast.unparse(node) for node in ast.walk(run) if isinstance(node, ast.Call)
                and ast.unparse(node.func).endswith(('.state_dict', 'get_rng_state', 'load_state_dict'))]


def test_train_py_takes_at_most_15_names_from_at_most_10_of_our_modules():
    # 8 modules until the machine module became lib/device.py, lib/memory.py and lib/throughput.py and the untie
    # left the probes for lib/interventions.py: the same names, each from a room named for what it holds
    imported = our_imports(ast.parse(source('train.py')))
    assert len(imported) <= 10, sorted(imported)
    assert sum(map(len, imported.values())) <= 15, imported


def function(tree, name):
    return next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name)


def test_one_optimizer_step_is_at_most_30_lines_that_call_nothing_of_ours():
    # forward to zero_grad in one function of train.py, calling only the model, the optimizer, the batch and torch:
    # none of the names train.py takes from lib/ or model.py, so a reader follows it without opening another file.
    tree = ast.parse(source('train.py'))
    step = function(tree, 'training_step')
    assert step.end_lineno - step.lineno + 1 <= 30
    ours = {name for names in our_imports(tree).values() for name in names}
    used = {node.id for node in ast.walk(step) if isinstance(node, ast.Name)}
    assert used & ours == set()
    calls = [ast.unparse(node.func) for node in ast.walk(step) if isinstance(node, ast.Call)]
    for needed in ('model', 'backward', 'clip_grad_norm_', 'step', 'zero_grad'):
        assert any(call == needed or call.endswith('.' + needed) for call in calls), needed


def test_the_loop_calls_the_step_and_nothing_trains_outside_it():
    # One training loop only: train() is the one place that steps an optimizer, through training_step.
    tree = ast.parse(source('train.py'))
    loop = function(tree, 'train')
    calls = [ast.unparse(node.func) for node in ast.walk(loop) if isinstance(node, ast.Call)]
    assert calls.count('training_step') == 1
    assert not any(call.endswith(('.backward', '.zero_grad')) for call in calls)
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert [name for name in functions if 'train' in name and name not in ('train', 'parse_train_args')] == \
        ['training_step']


def test_the_readme_gives_each_file_on_the_reading_path_its_true_length():
    readme = source('README.md')
    section = readme.split('## Read in this order', 1)[1].split('\n## ', 1)[0]
    rows = [line.split('|') for line in section.splitlines() if line.startswith('| `')]
    assert [row[1].strip(' `') for row in rows] == ['model.py', 'train.py', 'sample.py', 'prepare.py']
    for row in rows:
        assert int(row[2]) == len(source(row[1].strip(' `')).splitlines()), row[1]


def test_the_short_answer_comes_early_and_short_and_the_quick_start_shows_the_trap_and_a_remedy():
    lines = source('README.md').splitlines()
    assert any(line.startswith("## Should you tie?") for line in lines[:60])  # after the terms it uses are taught
    quick = source('README.md').split('## Quick start', 1)[1].split('\n## ', 1)[0]
    command = next(line.strip() for line in quick.splitlines() if line.strip().startswith('pip install'))
    # the trap and its remedy: plain tying (train.py's default mode) first, then shuffle, both of the first run's config
    runs = [part.strip() for part in command.split('&&') if part.strip().startswith('python train.py')]
    assert [('--tie_mode=shuffle' in run, 'config/first_run.py' in run) for run in runs] == [(False, True), (True, True)]
    assert 'python -m pytest -q tests/' in quick
    # the short answer in at most 200 words
    short = source('README.md').split('## Should you tie? The short answer', 1)[1].split('\n## ', 1)[0]
    assert len(short.split()) <= 200

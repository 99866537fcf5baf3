"""Every size a user gives is refused by the project's own estimate, before anything is allocated, whatever the
machine's memory: on a machine with more memory than a request asks for, an allocator that
overcommits (Linux's vm.overcommit_memory=1, usual on GPU servers) says yes to it, and the process grows until the
kernel's OOM killer ends it without a word. So these tests pretend the machine has 24 GiB, 2 TiB, or more than
any request here (lib.memory.device_memory), and fail the test if a model is built before the refusal.
docs/robustness.md, rows 41-46 and 97-103."""

import os
import re
import shutil
import types

import numpy as np
import pytest
import torch

import train
from conftest import TINY_TRAIN, assert_one_line_error, run_in_process, tiny_corpus, tiny_train_args, train_tiny_run
from lib import memory
from lib.device import autocast_context, pick_dtype
from model import GPT, GPTConfig
from sample import generate

GiB, TiB = 2 ** 30, 2 ** 40
# the tiny run's model (conftest.TINY_TRAIN on the tiny corpus)
MODEL = dict(vocab_size=53, block_size=16, n_layer=1, n_head=2, n_embd=32, tie_mode='tied')
MACHINES = {'laptop': 24 * GiB, 'server': 2 * TiB, 'more_than_asked': 2 ** 70}

# id: (script, arguments, [what the line names, the key whose largest value it offers]). {data} is the tiny dataset's
# data_dir, {run} a finished tiny run. Every request here asks for more than 128 TiB.
SIZES = {
    'sample_num_samples': ('sample.py', ['--out_dir={run}', '--device=cpu', '--num_samples=10000000000000',
                                         '--max_new_tokens=5'], ['--num_samples=10000000000000', 'num_samples']),
    'sample_max_new_tokens': ('sample.py', ['--out_dir={run}', '--device=cpu', '--max_new_tokens=10000000000000'],
                              ['--max_new_tokens=10000000000000', 'max_new_tokens']),
    'train_batch': ('train.py', ['--batch_size=10000000000000'], ['--batch_size=10000000000000', 'batch_size']),
    'train_depth': ('train.py', ['--n_layer=1000000000'], ['n_layer=1000000000', 'n_layer']),
    'train_width': ('train.py', ['--n_embd=10000000', '--n_head=1'], ['n_embd=10000000', 'n_embd']),
    'train_accumulation': ('train.py', ['--gradient_accumulation_steps=10000000000000'],
                           ['micro-batches of --batch_size=8 x --block_size=16 tokens', 'gradient_accumulation_steps']),
    'init_loss_batch': ('init_loss.py', ['--n_layer=1', '--n_embd=32', '--n_head=2', '--vocab_size=50', '--seeds=1',
                                         '--modes=tied', '--device=cpu', '--batch_size=100000000000'],
                        ['--batch_size=100000000000', 'batch_size']),
    'init_loss_plot_depth': ('init_loss.py', ['--plot={tmp}/fig.png', '--modes=tied', '--n_layer=10000000000',
                                              '--n_embd=32', '--n_head=2', '--vocab_size=50'],
                             ['--n_layer=10000000000', 'n_layer']),
    'bench_batch': ('bench.py', ['--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=16', '--vocab_size=50',
                                 '--device=cpu', '--batch_size=10000000000000'],
                    ['--batch_size=10000000000000', 'batch_size']),
}


@pytest.fixture(scope='module')
def finished_run(tiny_data, tmp_path_factory):
    return train_tiny_run(tiny_data, tmp_path_factory, 'run', max_iters=2, eval_interval=2)


def pretend_memory(monkeypatch, total):
    monkeypatch.setattr(memory, 'device_memory', lambda device: total)


def refuse_to_build(monkeypatch):
    """Building a model now fails the test: the refusal must come first."""
    def built(self, config):
        raise AssertionError(f"a model was built (n_layer={config.n_layer}, n_embd={config.n_embd}) before the size "
                             f"was refused")
    monkeypatch.setattr(GPT, '__init__', built)


def estimate(case, finished_run):
    """(need, step) for a case of SIZES: need(key, value) is what the project's estimate says the request needs
    with that one size changed, the others as the case gives them (what the line's 'the other sizes as they are'
    means), and step[key] the next value after one (a width the heads divide: n_head more). The estimates are the
    ones each script's check uses: sampling_floor for sample.py; for train.py and bench.py memory_floor of a training
    step, its weights alone for a model size, with the step's micro-batches (x and y, int64) for a batch or an
    accumulation; for init_loss.py memory_floor without gradients, the weights alone where it draws (--plot)."""
    import bench
    import init_loss
    import sample
    script, args, _ = SIZES[case]
    given = {arg[2:].split('=')[0]: int(arg.split('=')[1]) for arg in args if re.fullmatch(r'--\w+=\d+', arg)}
    if script == 'sample.py':
        shape = sample.model_shape(torch.load(os.path.join(finished_run, 'ckpt.pt'), weights_only=True), 'resume')
        sizes = {'num_samples': sample.DEFAULTS['num_samples'], 'max_new_tokens': sample.DEFAULTS['max_new_tokens'],
                 **given}
        dtype = pick_dtype(sample.DEFAULTS['dtype'], 'cpu')

        def need(key, value):  # the default prompt, '\n': one token
            changed = {**sizes, key: value}
            return memory.sampling_floor(shape, changed['num_samples'], 1, changed['max_new_tokens'], dtype)
        return need, {}
    if script == 'init_loss.py':
        settings = {**init_loss.DEFAULTS, 'tie_mode': 'tied', **given}
        dtype, training, micro_batches = 'float32', False, False
        if '--plot' in ' '.join(args):
            settings['batch_size'] = 0  # a drawing: one position of one sequence, the weights alone
    else:
        defaults = bench.DEFAULTS if script == 'bench.py' else {**train.DEFAULTS, **TINY_TRAIN, **MODEL}
        settings = {**defaults, **given}
        dtype, training, micro_batches = pick_dtype(settings['dtype'], 'cpu'), True, True

    def need(key, value):
        changed = {**settings, key: value}
        config = types.SimpleNamespace(**{k: changed[k] for k in MODEL})
        if key not in ('batch_size', 'gradient_accumulation_steps') and training:
            return memory.memory_floor(config, 0, dtype)  # the weights, their gradients and AdamW's moments
        batch = changed['batch_size']
        tokens = 16 * changed['gradient_accumulation_steps'] * batch * changed['block_size'] if micro_batches else 0
        return memory.memory_floor(config, batch, dtype, training=training) + tokens
    return need, {'n_embd': settings['n_head']}


@pytest.mark.parametrize('machine_size', MACHINES.values(), ids=MACHINES.keys())
@pytest.mark.parametrize('case', SIZES)
def test_a_size_too_large_is_refused_by_the_estimate_before_anything_is_built(case, machine_size, tiny_data,
                                                                             finished_run, tmp_path, monkeypatch):
    script, args, (given, offered) = SIZES[case]
    places = dict(data=tiny_data, run=finished_run, tmp=str(tmp_path))
    args = [arg.format(**places) for arg in args]
    if script == 'train.py':
        args = tiny_train_args(tiny_data, str(tmp_path / 'out')) + args
    pretend_memory(monkeypatch, machine_size)
    refuse_to_build(monkeypatch)
    line = assert_one_line_error(run_in_process(script, *args), given)
    assert re.search(rf'at most (--\w+=\d+ or )*--{offered}=\d+( or --\w+=\d+)* fits here', line), line
    # each size offered as a number: the largest that fits by the estimate, the next one not
    need, step = estimate(case, finished_run)
    limit = min(machine_size, memory.ADDRESS_SPACE)
    for key, value in re.findall(r'--(\w+)=(\d+)', line.split('at most ')[1].split(' fits here')[0]):
        most = int(value)
        assert need(key, most) <= limit < need(key, most + step.get(key, 1)), (key, most)
    limit = 'the 128.0 TiB one process can address' if machine_size > memory.ADDRESS_SPACE else \
        f'the {memory.format_bytes(machine_size)} of RAM and swap on cpu'
    assert f'more than {limit}' in line
    assert not os.path.exists(tmp_path / 'out') and not os.path.exists(tmp_path / 'fig.png')  # nothing written


def test_where_the_estimate_fits_sampling_goes_on(finished_run, monkeypatch):
    pretend_memory(monkeypatch, 2 * TiB)
    result = run_in_process('sample.py', f'--out_dir={finished_run}', '--device=cpu', '--num_samples=2',
                            '--max_new_tokens=5')
    assert result.returncode == 0, result.stderr
    assert result.stdout.count('-' * 15) == 2


def test_what_the_line_allows_is_the_largest_that_fits(finished_run, monkeypatch):
    """The value the line offers fits the estimate; one more does not."""
    import sample
    pretend_memory(monkeypatch, 24 * GiB)
    result = run_in_process('sample.py', f'--out_dir={finished_run}', '--device=cpu', '--num_samples=1000000000',
                            '--max_new_tokens=7', '--dtype=float32')
    most = int(re.search(r'at most --num_samples=(\d+)', assert_one_line_error(result)).group(1))
    ckpt = torch.load(os.path.join(finished_run, 'ckpt.pt'), weights_only=True)
    shape = sample.model_shape(ckpt, 'resume')
    need = lambda n: memory.sampling_floor(shape, n, 1, 7, 'float32')  # noqa: E731  (the prompt '\n': 1 token)
    assert need(most) <= 24 * GiB < need(most + 1)


@pytest.mark.parametrize('dtype', ['float32', 'bfloat16'])
@pytest.mark.parametrize('prompt, new', [(3, 12), (20, 30)], ids=['short', 'past_the_context'])
def test_sampling_floor_is_below_what_generate_holds(dtype, prompt, new):
    # What generate must hold at once, from the tensors themselves: the weights, the prompt batch and the whole
    # output, and at each step either a block's input (the residual stream) with its MLP hidden layer, or the
    # fp32 logits. The floor must stay below that, or sample.py would refuse sizes that fit.
    config = GPTConfig(vocab_size=300, block_size=24, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config).eval()
    batch = 16
    steps = []

    def block_input(module, inputs):
        steps.append(inputs[0].nbytes)

    def mlp_hidden(module, inputs, output):
        steps[-1] += output.nbytes

    def logits(module, inputs, output):
        steps.append(output[0].float().nbytes)
    hooks = [block.register_forward_pre_hook(block_input) for block in model.blocks]
    hooks += [block.mlp.c_fc.register_forward_hook(mlp_hidden) for block in model.blocks]
    hooks.append(model.register_forward_hook(logits))
    x = torch.randint(config.vocab_size, (batch, prompt))
    with autocast_context('cpu', dtype):
        out = generate(model, x, new)
    for hook in hooks:
        hook.remove()
    held = sum(p.nbytes for p in model.parameters()) + x.nbytes + out.nbytes + max(steps)
    floor = memory.sampling_floor(config, batch, prompt, new, dtype)
    assert floor <= held
    assert floor > held / 3  # and not vacuous
    assert memory.sampling_floor(config, batch, prompt, 0, dtype) < floor  # no step without new tokens


def test_prepared_data_or_a_text_too_large_is_refused_before_it_is_read(tiny_data, finished_run, tmp_path, monkeypatch):
    pretend_memory(monkeypatch, 100 * 2 ** 10)  # a machine of 100 KiB: the tiny corpus as int64 is more
    monkeypatch.setattr(np, 'memmap', lambda *a, **k: pytest.fail('read before the refusal'))
    line = assert_one_line_error(run_in_process('train.py', *tiny_train_args(tiny_data, str(tmp_path / 'out'))),
                                 f'the prepared data in {tiny_data}/tiny (', 'more than the 100.0 KiB of RAM and swap',
                                 'use less data or a machine with more memory')
    assert 'tokens' in line and not os.path.exists(tmp_path / 'out')
    book = tmp_path / 'book.txt'
    book.write_text(tiny_corpus(3000), encoding='utf-8')  # about 110 KB
    assert_one_line_error(run_in_process('prepare.py', f'--input={book}', f'--out_dir={tmp_path}/data'),
                          f'--input={book} has ', 'more than the 100.0 KiB of RAM and swap on cpu',
                          'use a smaller file or a machine with more memory')
    assert not os.path.exists(tmp_path / 'data')
    assert_one_line_error(run_in_process('sample.py', f'--out_dir={finished_run}', f'--start=FILE:{book}'),
                          f'--start=FILE:{book} has ', 'more than the 100.0 KiB of RAM and swap on cpu',
                          'use a shorter prompt')


def test_a_checkpoint_edited_to_an_absurd_size_is_refused_before_it_is_built(finished_run, tmp_path, monkeypatch):
    edited = tmp_path / 'edited'
    shutil.copytree(finished_run, edited)
    ckpt = torch.load(edited / 'ckpt.pt', weights_only=True)
    ckpt['model_args']['n_layer'] = 10 ** 10  # 447 TiB of weights: more than any machine
    torch.save(ckpt, edited / 'ckpt.pt')
    refuse_to_build(monkeypatch)
    assert_one_line_error(run_in_process('sample.py', f'--out_dir={edited}', '--device=cpu'),
                          'the model to sample (n_layer=10000000000, n_embd=32', 'for its weights alone')
    assert_one_line_error(run_in_process('export.py', f'--out_dir={edited}', f'--to={tmp_path}/hf'),
                          f'checkpoint {edited}/ckpt.pt does not fit', 'its model_args ask for at least',
                          'edited or written by another version')
    assert not os.path.exists(tmp_path / 'hf')


@pytest.mark.cuda_branch
def test_the_limit_on_the_device_is_its_own_memory(tiny_data, tmp_path, monkeypatch):
    # On CUDA where it is there: the GPU's total, read from the device, not the host's RAM.
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    total = torch.cuda.get_device_properties(0).total_memory if device == 'cuda' else memory.device_memory('cpu')
    kind = 'memory' if device == 'cuda' else 'RAM and swap'
    assert memory.memory_limit(device) == (total, f'the {memory.format_bytes(total)} of {kind} on {device}')
    # A batch between the device's memory and the address space: refused for this device alone, before building.
    # what a step holds by the estimate: memory_floor, and its one micro-batch of x and y (int64)
    need = lambda b: memory.memory_floor(GPTConfig(**MODEL), b, 'float32') + 16 * b * MODEL['block_size']  # noqa
    batch = memory.largest_that_fits(need, device, 10 ** 12) + 1
    assert need(batch) < memory.ADDRESS_SPACE
    refuse_to_build(monkeypatch)
    line = assert_one_line_error(run_in_process('train.py', *tiny_train_args(
        tiny_data, str(tmp_path / 'out'), device=device, dtype='float32', batch_size=batch)))
    assert f'more than the {memory.format_bytes(total)} of {kind} on {device}' in line
    assert f'at most --batch_size={batch - 1} fits here' in line

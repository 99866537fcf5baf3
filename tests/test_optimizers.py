"""--optimizer=muon, a learning rate for each end (--embed_lr, --head_lr) and the grid rows that sweep them:
which parameters each optimizer holds, Muon on a CPU against torch's own, each rate moving its own matrix
only, the schedule scaling every group alike, exact resumes, and every bad value as one line."""

import os

import pytest
import torch

import ablate
import train
from conftest import assert_one_line_error, run_in_process, tiny_train_args
from lab import ablation_grid
from lib import optimizers
from lib.command_line import UserError
from model import GPT, GPTConfig

SHAPE = dict(vocab_size=40, n_embd=32, n_layer=2, n_head=2, block_size=16)


def config(*args):
    return train.parse_train_args(list(args))


def built(tie_mode='tied', *args, seed=0):
    torch.manual_seed(seed)
    model = GPT(GPTConfig(tie_mode=tie_mode, **SHAPE))
    return model, optimizers.build_optimizer(model, config(f'--tie_mode={tie_mode}', *args), 'cpu')


def one_step(model, optimizer, cfg, it=0):
    """One train.py step at iteration it's rates, on a fixed batch: returns each parameter's update by name."""
    optimizers.set_rates(optimizer, cfg, train.get_lr(it, cfg))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    idx = torch.randint(SHAPE['vocab_size'], (4, SHAPE['block_size']), generator=torch.Generator().manual_seed(1))
    train.training_step(model, optimizer, torch.amp.GradScaler('cpu', enabled=False), [(idx, idx.roll(-1, 1))],
                        torch.autocast('cpu', enabled=False), grad_clip=0.0)
    return {name: p.detach() - before[name] for name, p in model.named_parameters()}


@pytest.mark.parametrize('tie_mode', ['tied', 'untied', 'pit', 'bert', 'proj'])
def test_muon_holds_exactly_the_block_matrices_and_adamw_the_rest_once(tie_mode):
    model, optimizer = built(tie_mode, '--optimizer=muon')
    block_matrices = [m.weight for block in model.blocks
                      for m in (block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj)]
    in_muon = [p for group in optimizer.muon.param_groups for p in group['params']]
    in_adamw = [p for group in optimizer.adamw.param_groups for p in group['params']]
    assert sorted(map(id, in_muon)) == sorted(map(id, block_matrices))
    assert sorted(map(id, in_adamw + in_muon)) == sorted(map(id, model.parameters()))  # each exactly once
    table = model.token_embedding_table.weight
    assert sum(p is table for p in in_adamw) == 1 and not any(p is table for p in in_muon)
    (embed,) = [group for group in optimizer.adamw.param_groups if group['role'] == 'embed']
    assert embed['params'] == [table]


def test_adamw_alone_is_one_optimizer_with_every_parameter_once_and_no_muon():
    model, optimizer = built('tied')
    assert optimizer.muon is None and isinstance(optimizer.adamw, torch.optim.AdamW)
    params = [p for group in optimizer.param_groups for p in group['params']]
    assert sorted(map(id, params)) == sorted(map(id, model.parameters()))
    assert [group['role'] for group in optimizer.param_groups] == ['embed', 'head', 'matrices', 'gains']
    assert optimizer.param_groups[1]['params'] == []  # tied: the head is the table, in 'embed'


def muon_pair(monkeypatch=None):
    """torch.optim.Muon and SlicedMuon in float32 on two copies of one matrix, with the same gradients three times."""
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(48, 16) * 0.1)
    b = torch.nn.Parameter(a.detach().clone())
    settings = dict(lr=0.02, momentum=0.9, weight_decay=0.1, adjust_lr_fn='match_rms_adamw')
    theirs, ours = torch.optim.Muon([a], **settings), optimizers.SlicedMuon([b], float32=True, **settings)
    start = a.detach().clone()
    for step in range(3):
        grad = torch.randn(48, 16, generator=torch.Generator().manual_seed(step))
        a.grad, b.grad = grad.clone(), grad.clone()
        theirs.step()
        ours.step()
    return start, a.detach(), b.detach(), theirs, ours


def test_float32_muon_steps_exactly_like_torchs_muon_but_for_the_newton_schulz_dtype(monkeypatch):
    # torch's iteration run in float32 instead of bfloat16: then the two must agree to float32 rounding, so
    # momentum, Nesterov, weight decay and the rate adjustment are torch's own
    from torch.optim import _muon
    monkeypatch.setattr(_muon, '_zeropower_via_newtonschulz',
                        lambda grad, coefficients, steps, eps: optimizers.newton_schulz(grad.float(), coefficients,
                                                                                        steps, eps))
    start, theirs, ours, torch_muon, our_muon = muon_pair()
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    assert (ours - start).abs().max() > 1e-3  # three steps of about lr * 0.2 * sqrt(48) each did move it
    assert torch.equal(our_muon.state[our_muon.param_groups[0]['params'][0]]['momentum_buffer'],
                       torch_muon.state[torch_muon.param_groups[0]['params'][0]]['momentum_buffer'])


def muon_steps(muon, params, steps=3):
    for step in range(steps):
        for i, p in enumerate(params):
            p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(10 * step + i))
        muon.step()


def test_sliced_muon_without_maps_in_bfloat16_is_torchs_muon_to_the_bit():
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(48, 16) * 0.1)
    b = torch.nn.Parameter(a.detach().clone())
    settings = dict(lr=0.02, momentum=0.9, weight_decay=0.1, adjust_lr_fn='match_rms_adamw')
    muon_steps(torch.optim.Muon([a], **settings), [a])
    muon_steps(optimizers.SlicedMuon([b], **settings), [b])
    assert torch.equal(a, b)


@pytest.mark.parametrize('float32', [False, True])
def test_a_stacked_matrix_steps_as_its_maps_would_apart(float32):
    # c_attn's q, k, v stacked (3d x d) under maps=3 must move exactly as three d x d matrices, each orthogonalised
    # with its own rate adjustment; as one matrix (no maps) it moves otherwise
    torch.manual_seed(0)
    stacked = torch.nn.Parameter(torch.randn(48, 16) * 0.1)
    apart = [torch.nn.Parameter(block.detach().clone()) for block in stacked.chunk(3)]
    fused = torch.nn.Parameter(stacked.detach().clone())
    settings = dict(lr=0.02, momentum=0.9, weight_decay=0.1, adjust_lr_fn='match_rms_adamw', float32=float32)
    for step in range(3):
        grad = torch.randn(48, 16, generator=torch.Generator().manual_seed(step))
        stacked.grad, fused.grad = grad.clone(), grad.clone()
        for p, g in zip(apart, grad.chunk(3)):
            p.grad = g.clone()
        if step == 0:
            sliced_muon = optimizers.SlicedMuon([stacked], maps={stacked: 3}, **settings)
            apart_muon = optimizers.SlicedMuon(apart, **settings)
            fused_muon = optimizers.SlicedMuon([fused], **settings)
        for muon in (sliced_muon, apart_muon, fused_muon):
            muon.step()
    assert torch.equal(stacked.detach(), torch.cat([p.detach() for p in apart]))
    assert (fused - stacked).abs().max() > 1e-3


@pytest.mark.parametrize('qkv, maps', [('split', 3), ('fused', 1)])
def test_muon_is_told_that_each_blocks_qkv_holds_three_maps(qkv, maps):
    model, optimizer = built('tied', '--optimizer=muon', f'--muon_qkv={qkv}')
    for block in model.blocks:
        assert optimizer.muon.maps.get(block.attn.c_attn.weight, 1) == maps
        assert optimizer.muon.maps.get(block.mlp.c_fc.weight, 1) == 1
    assert model.blocks[0].attn.c_attn.weight.shape == (3 * SHAPE['n_embd'], SHAPE['n_embd'])


@pytest.mark.parametrize('form, table, head', [('coupled', 0.1, 0.1), ('per_step', 0.1 / 10, 0.1 / 3),
                                               ('none', 0.0, 0.0)])
def test_ends_decay_sets_what_a_rate_sweep_holds_fixed(form, table, head):
    args = ('--embed_lr=1e-2', '--head_lr=3e-3', f'--ends_decay={form}')
    _, optimizer = built('untied', *args)
    decay = {group['role']: group['weight_decay'] for group in optimizer.adamw.param_groups}
    assert decay == pytest.approx(dict(embed=table, head=head, matrices=0.1, gains=0.0))
    _, optimizer = built('pit', '--embed_lr=1e-2', f'--ends_decay={form}')  # U is never decayed (the retraction)
    assert optimizer.adamw.param_groups[0]['weight_decay'] == 0.0


def test_per_step_decay_shrinks_an_unseen_row_as_much_at_x10_as_at_x1():
    # a token not in the batch has a zero gradient: on AdamW's first step its row only decays, by lr * decay
    cfg_1, cfg_10 = (config('--tie_mode=untied', '--ends_decay=per_step', *more) for more in ([], ['--embed_lr=1e-2']))
    shrink = []
    for cfg in (cfg_1, cfg_10):
        # untied: a tied table's every row gets the head's gradient; an untied one's unseen rows get none
        model, optimizer = built('untied', *(f'--{k}={cfg[k]}' for k in ('ends_decay', 'embed_lr') if cfg[k]))
        table = model.token_embedding_table.weight
        seen = torch.randint(SHAPE['vocab_size'], (4, SHAPE['block_size']), generator=torch.Generator().manual_seed(1))
        token = next(i for i in range(SHAPE['vocab_size']) if i not in seen)  # not in one_step's batch
        unseen = table[token].detach().clone()
        one_step(model, optimizer, cfg, it=100)
        shrink.append((table[token].detach().norm() / unseen.norm()).item())
    assert shrink[0] == pytest.approx(shrink[1], rel=1e-6) and shrink[0] < 1 - 5e-5


def test_float32_muon_is_within_bfloat16_rounding_of_torchs_muon():
    start, theirs, ours, _, _ = muon_pair()
    moved, apart = (theirs - start).abs(), (ours - theirs).abs()
    # bf16 keeps 8 bits: about 1 % of each update (measured 1.1 %, mean and largest alike)
    assert apart.mean() < 0.03 * moved.mean() and apart.max() < 0.03 * moved.max()


@pytest.mark.parametrize('key, tie_mode, own', [('embed_lr', 'untied', 'token_embedding_table.weight'),
                                                ('head_lr', 'untied', 'lm_head.weight'),
                                                ('embed_lr', 'tied', 'token_embedding_table.weight')])
def test_each_end_rate_moves_its_own_matrix_only_and_by_its_factor(key, tie_mode, own):
    plain_cfg = config(f'--tie_mode={tie_mode}')
    own_cfg = config(f'--tie_mode={tie_mode}', f'--{key}=1e-2')  # 10x learning_rate
    model, optimizer = built(tie_mode)
    plain = one_step(model, optimizer, plain_cfg)
    model, optimizer = built(tie_mode)
    faster = one_step(model, optimizer, own_cfg)
    for name in plain:
        if name == own:
            # AdamW's update, decay included, is proportional to the rate: ten times the step (rows of tokens not
            # in the batch only decay, by ~1e-7: differences of float32 rounding there)
            torch.testing.assert_close(faster[name], 10 * plain[name], rtol=1e-4, atol=1e-7)  # float32 p - decay
        else:
            assert torch.equal(faster[name], plain[name]), name


def test_the_schedule_scales_every_group_alike():
    cfg = config('--optimizer=muon', '--embed_lr=3e-3', '--muon_lr=2e-2', '--tie_mode=untied', '--head_lr=5e-4')
    _, optimizer = built('untied', '--optimizer=muon')
    peaks = dict(embed=3e-3, head=5e-4, matrices=1e-3, gains=1e-3, muon=2e-2)
    for it in (0, 50, 100, 1000, 1999, 2000):
        optimizers.set_rates(optimizer, cfg, train.get_lr(it, cfg))
        fraction = train.get_lr(it, cfg) / cfg['learning_rate']
        for group in optimizer.param_groups:
            assert group['lr'] == pytest.approx(peaks[group['role']] * fraction, rel=1e-12)
    optimizers.set_rates(optimizer, config(), train.get_lr(7, config()))
    assert {group['lr'] for group in optimizer.adamw.param_groups} == {train.get_lr(7, config())}  # exactly


def test_a_checkpoint_from_before_the_roles_is_one_line_on_resume_and_still_samples(tiny_data, tmp_path):
    # AdamW's state as train.py saved it before the groups had roles: decayed matrices, then the rest
    out = str(tmp_path / 'out')
    model = train.train(train.parse_train_args(tiny_train_args(tiny_data, out, max_iters=5)))['model']
    params = list(model.parameters())
    old = torch.optim.AdamW([{'params': [p for p in params if p.dim() >= 2], 'weight_decay': 0.1},
                             {'params': [p for p in params if p.dim() < 2], 'weight_decay': 0.0}], lr=1e-3)
    for p in params:
        p.grad = torch.randn_like(p)
    old.step()
    ckpt = torch.load(os.path.join(out, 'ckpt.pt'), weights_only=True)
    torch.save(dict(ckpt, optimizer=old.state_dict()), os.path.join(out, 'ckpt.pt'))
    assert_one_line_error(run_in_process('train.py', *tiny_train_args(tiny_data, out, max_iters=10), '--init_from=resume'),
                          f"checkpoint {os.path.join(out, 'ckpt.pt')} holds AdamW's state in groups without roles: "
                          f"it was written by an older version of this project")
    assert run_in_process('sample.py', f'--out_dir={out}', '--max_new_tokens=5').returncode == 0  # its weights read


@pytest.mark.parametrize('extra, first_half', [(dict(optimizer='muon'), {}),
                                               (dict(optimizer='muon', untie_at=0.5, embed_lr=3e-3, head_lr=1e-3),
                                                dict(untie_at=10 / 12)),  # untied at 10 in both, as straight
                                               (dict(untie_at=0.5, embed_lr=1e-2, ends_decay='per_step'),
                                                dict(untie_at=10 / 12))],
                         ids=['muon', 'muon-untie-own-rates', 'untie-own-rate-plain-resume'])
def test_a_muon_run_resumes_bit_exact_and_samples(extra, first_half, tiny_data, tmp_path):
    common = dict(lr_decay_iters=20, eval_interval=5, dropout=0.1)

    def args(out, **more):
        return train.parse_train_args(tiny_train_args(tiny_data, str(tmp_path / out), **dict(common, **more)))
    straight = train.train(args('a', max_iters=20, **extra))
    train.train(args('b', max_iters=12, **dict(extra, **first_half)))  # past the untie at 10: a 'head' group
    # the resume names only the optimizer: the rates, the decay form and the untie go on as the checkpoint has them
    resumed = train.train(args('b', max_iters=20, init_from='resume', optimizer=extra.get('optimizer', 'adamw')))
    for name, value in straight['model'].state_dict().items():
        assert torch.equal(resumed['model'].state_dict()[name], value), name
    ckpt = torch.load(tmp_path / 'b' / 'ckpt.pt', weights_only=True)
    if extra.get('optimizer') == 'muon':
        assert set(ckpt['optimizer']) == {'adamw', 'muon'} and ckpt['optimizer']['muon']['state']
    result = run_in_process('sample.py', f'--out_dir={tmp_path / "b"}', '--num_samples=1', '--max_new_tokens=20', '--seed=1')
    assert result.returncode == 0 and len(result.stdout.strip()) >= 20, result.stderr


def test_resuming_with_another_optimizer_is_one_line(tiny_data, tmp_path):
    out = str(tmp_path / 'out')
    train.train(train.parse_train_args(tiny_train_args(tiny_data, out, max_iters=5, optimizer='muon')))
    err = assert_one_line_error(run_in_process('train.py', *tiny_train_args(tiny_data, out, max_iters=10),
                                               '--optimizer=adamw', '--init_from=resume'), '--optimizer=adamw', 'muon')
    assert 'resume with --optimizer=muon' in err
    assert torch.load(os.path.join(out, 'ckpt.pt'), weights_only=True)['iter_num'] == 5  # left as it was
    # left out, the optimizer is the checkpoint's, as every setting a resume's command line leaves out
    train.train(train.parse_train_args(tiny_train_args(tiny_data, out, max_iters=10, init_from='resume')))
    assert torch.load(os.path.join(out, 'ckpt.pt'), weights_only=True)['config']['optimizer'] == 'muon'


@pytest.mark.parametrize('given', ['--ends_decay=none', '--muon_qkv=fused', '--weight_decay=0.01', '--beta2=0.95',
                                   '--muon_momentum=0.9'])
def test_a_resume_that_would_change_what_the_optimizer_state_keeps_is_one_line(given, tiny_data, tmp_path):
    # torch's load_state_dict puts the saved weight_decay, betas and momentum back into every group: a new value
    # on the command line would be ignored without a word
    out = str(tmp_path / 'out')
    train.train(train.parse_train_args(tiny_train_args(tiny_data, out, max_iters=5, optimizer='muon')))
    err = assert_one_line_error(run_in_process('train.py', *tiny_train_args(tiny_data, out, max_iters=10,
                                                                          optimizer='muon', init_from='resume'), given),
                                given.split('=')[0] + '=', 'disagrees with the checkpoint', 'optimizer state keeps')
    assert torch.load(os.path.join(out, 'ckpt.pt'), weights_only=True)['iter_num'] == 5, err  # left as it was


def test_a_resume_takes_a_new_rate_given_and_says_so(tiny_data, tmp_path, capsys):
    out = str(tmp_path / 'out')
    train.train(train.parse_train_args(tiny_train_args(tiny_data, out, max_iters=5, untie_at=0.5, embed_lr=1e-2)))
    cfg = train.parse_train_args(tiny_train_args(tiny_data, out, max_iters=10, init_from='resume') + ['--head_lr=2e-3'])
    capsys.readouterr()
    train.train(cfg)
    said = capsys.readouterr().out
    assert 'resume: --head_lr=0.002 from here on (the checkpoint was made with head_lr=None)' in said
    assert 'embed_lr' not in said.split('resume:')[1]  # left out: the checkpoint's 1e-2, nothing to say
    ckpt = torch.load(os.path.join(out, 'ckpt.pt'), weights_only=True)
    assert ckpt['config']['embed_lr'] == 1e-2 and ckpt['config']['head_lr'] == 2e-3 and ckpt['config']['untie_at'] == 0.5


def test_a_head_rate_for_a_tied_matrix_is_refused_and_allowed_once_it_unties(tiny_data, tmp_path):
    err = assert_one_line_error(run_in_process('train.py', *tiny_train_args(tiny_data, str(tmp_path / 'a'),
                                                                            tie_mode='tied', head_lr=1e-3)),
                                '--head_lr', 'use --embed_lr')
    assert 'one matrix' in err and not os.path.exists(tmp_path / 'a')
    for tie_mode in ('small_init', 'shuffle', 'proj'):
        with pytest.raises(UserError, match='one matrix has one rate'):
            optimizers.check_head_lr(dict(head_lr=1e-3, tie_mode=tie_mode, untie_at=None))
    optimizers.check_head_lr(dict(head_lr=1e-3, tie_mode='tied', untie_at=0.5))  # the head after the untie
    optimizers.check_head_lr(dict(head_lr=1e-3, tie_mode='pit', untie_at=None))  # pit's S, the head's transform
    assert optimizers.peak_rates(config('--embed_lr=4e-3', '--untie_at=0.5'))['head'] == 4e-3  # goes on at its rate


@pytest.mark.parametrize('arg, named', [('--optimizer=sgd', 'adamw, muon'), ('--embed_lr=0', '--embed_lr'),
                                        ('--embed_lr=-1e-3', '--embed_lr'), ('--head_lr=nan', '--head_lr'),
                                        ('--head_lr=inf', '--head_lr'), ('--embed_lr=fast', '--embed_lr'),
                                        ('--muon_lr=0', '--muon_lr'), ('--muon_lr=None', '--muon_lr'),
                                        ('--muon_momentum=1', '--muon_momentum'),
                                        ('--embed_lr=True', '--embed_lr')])
def test_a_bad_optimizer_value_is_one_line_naming_the_key(arg, named):
    with pytest.raises(UserError, match=named.replace('-', '\\-')) as caught:
        config(arg)
    assert '\n' not in str(caught.value)


def test_own_rates_need_a_learning_rate_to_follow():
    with pytest.raises(UserError, match='needs a positive --learning_rate'):
        config('--learning_rate=0', '--embed_lr=1e-3')
    config('--learning_rate=0')  # alone still allowed: every group at learning_rate's schedule


def test_bad_values_reach_the_user_as_one_line_with_exit_2():
    assert_one_line_error(run_in_process('train.py', '--optimizer=lion'), "--optimizer='lion'", 'adamw, muon')
    assert_one_line_error(run_in_process('ablate.py', '--modes=untied,untied_e10_e3'), "'untied_e10_e3'", 'MODE_eX')


def test_rate_rows_parse_plan_their_rates_and_are_labelled():
    Row = ablation_grid.Row
    assert ablation_grid.parse_row('untied_e10_h0.3') == Row('untied', embed_mult=10.0, head_mult=0.3)
    assert ablation_grid.parse_row('tied_untie_e3') == Row('tied', unties=True, embed_mult=3.0)
    assert ablation_grid.parse_row('tied_e3_igs2') == Row('tied', input_grad_scale=2.0, embed_mult=3.0)
    for bad in ('untied_e', 'untied_e0', 'untied_e10_e3', 'untied_x2', 'untied_e-1', 'untied_einf', 'untied_',
                'tied_untied', 'untied_h0.3e'):
        assert ablation_grid.parse_row(bad) is None, bad
    assert ablation_grid.row_label('untied_e10_h0.3', 2 / 3) == 'untied, embed lr ×10, head lr ×0.3'
    cfg = ablate.parse_args(['--modes=untied,untied_e10_h0.3,tied_e3,tied_untie_e3,pit_e0.3_h30',
                             '--learning_rate=2e-3', '--head_lr=1e-3'])
    rates = {mode: (run_cfg['embed_lr'], run_cfg['head_lr']) for mode, _, run_cfg in ablate.plan_runs(cfg)}
    assert rates == {'untied': (None, 1e-3), 'untied_e10_h0.3': (2e-2, 6e-4), 'tied_e3': (6e-3, None),
                     'tied_untie_e3': (6e-3, 1e-3), 'pit_e0.3_h30': (6e-4, 6e-2)}
    with pytest.raises(UserError, match='tied_h0.3, a head rate'):
        ablate.parse_args(['--modes=tied,tied_h0.3'])


def test_a_rate_typed_on_a_resume_is_taken_even_where_it_is_the_default(tiny_data, tmp_path, capsys):
    """--learning_rate=1e-3 (train.py's default) typed on the resume of a run started at 6e-4 is a change the user
    asked for: taken and said, not mistaken for a key left out (which takes the checkpoint's value)."""
    out = str(tmp_path / 'out')
    train.train(train.parse_train_args(tiny_train_args(tiny_data, out, max_iters=5, learning_rate=6e-4)))
    resume = [arg for arg in tiny_train_args(tiny_data, out, max_iters=10, init_from='resume')
              if not arg.startswith('--learning_rate=')]
    cfg = train.parse_train_args(resume + ['--learning_rate=1e-3'])
    assert 'learning_rate' in cfg.given and cfg['learning_rate'] == train.DEFAULTS['learning_rate']
    capsys.readouterr()
    train.train(cfg)
    assert 'resume: --learning_rate=0.001 from here on (the checkpoint was made with learning_rate=0.0006)' in \
        capsys.readouterr().out
    assert torch.load(os.path.join(out, 'ckpt.pt'), weights_only=True)['config']['learning_rate'] == 1e-3
    left_out = train.parse_train_args(resume)  # not typed: the checkpoint's rate goes on, in silence
    capsys.readouterr()
    train.train(dict(left_out, max_iters=15))
    assert 'learning_rate' not in capsys.readouterr().out
    assert torch.load(os.path.join(out, 'ckpt.pt'), weights_only=True)['config']['learning_rate'] == 1e-3

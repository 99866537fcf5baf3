"""The model and its tie modes: sharing, initialisation, gradients, initial loss, save/load, errors."""

import io
import math

import pytest
import torch

from init_loss import measure_initial_losses, predicted_initial_loss
from lib.device import autocast_context
from lib.memory import memory_floor
from lib.throughput import flops_per_token
from lib.training_run import param_breakdown
from model import GPT, GPTConfig, TIE_MODES
from lib.optimizers import build_optimizer
from sample import generate

TIED_MODES = [m for m in TIE_MODES if m != 'untied']
SMALL = dict(vocab_size=97, block_size=16, n_layer=2, n_head=4, n_embd=32, dropout=0.0)


def make(mode='tied', **overrides):
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**SMALL, 'tie_mode': mode, **overrides}))


@pytest.mark.parametrize('mode', TIED_MODES)
def test_tied_modes_share_one_parameter_with_the_head(mode):
    model = make(mode)
    assert model.lm_head.weight is model.token_embedding_table.weight
    assert model.lm_head.weight.data_ptr() == model.token_embedding_table.weight.data_ptr()
    assert model.is_tied


def test_untied_has_its_own_head_and_exactly_n_times_d_more_parameters():
    untied, tied = make('untied'), make('tied')
    assert not untied.is_tied
    assert untied.lm_head.weight.data_ptr() != untied.token_embedding_table.weight.data_ptr()
    assert untied.num_params() - tied.num_params() == SMALL['vocab_size'] * SMALL['n_embd']
    assert param_breakdown(untied)['head_extra'] == SMALL['vocab_size'] * SMALL['n_embd']


@pytest.mark.parametrize('mode', TIE_MODES)
def test_breakdown_adds_up_and_counts_the_shared_matrix_once(mode):
    model = make(mode)
    by_storage = {p.data_ptr(): p.numel() for p in model.state_dict().values()}
    assert sum(param_breakdown(model).values()) == model.num_params() == sum(by_storage.values())


@pytest.mark.parametrize('mode, extra', [('shuffle', 0), ('shufflenet', 0), ('small_init', 0), ('logit_scale', 0),
                                         ('proj', 32 * 32), ('bert', 32 * 32 + 32 + 2 * 32 + 97)])
def test_remedy_parameter_cost(mode, extra):
    assert make(mode).num_params() - make('tied').num_params() == extra


def test_small_init_std_is_log_n_over_d_whatever_the_order():
    n, d = 5000, 256
    for mode, expected in (('small_init', math.log(n) / d), ('tied', 0.02)):
        model = make(mode, vocab_size=n, n_embd=d)
        assert model.token_embedding_table.weight.std().item() == pytest.approx(expected, rel=0.02)
    # Re-running the initialiser (as a user calling init_weights() again would) must not change it.
    model = make('small_init', vocab_size=n, n_embd=d)
    model.init_weights()
    assert model.lm_head.weight.std().item() == pytest.approx(math.log(n) / d, rel=0.02)


def test_proj_starts_orthogonal():
    P = make('proj').tie_proj.weight.detach()
    assert torch.allclose(P @ P.T, torch.eye(P.size(0)), atol=1e-5)


@pytest.mark.parametrize('mode', ['shuffle', 'shufflenet'])
def test_shuffles_are_permutations_of_the_width(mode):
    model = make(mode, shuffle_groups=4)
    d = SMALL['n_embd']
    h = torch.arange(d, dtype=torch.float32).view(1, 1, d)
    # The head's input is lm_head(permuted h); read the permutation back through an identity head.
    model.lm_head.weight = torch.nn.Parameter(torch.eye(d))
    out = model.head(h).flatten().long()
    assert sorted(out.tolist()) == list(range(d))
    assert out.tolist() != list(range(d))
    if mode == 'shuffle':
        assert out.tolist() == list(range(d // 2, d)) + list(range(d // 2))


def test_gelu_is_exact_by_default_and_gpt2s_tanh_approximation_on_request():
    exact, approx = make(), make(gelu_approx='tanh')  # the same seed: the same weights
    mlp, mlp_tanh = exact.blocks[0].mlp, approx.blocks[0].mlp
    x = torch.randn(2, 3, SMALL['n_embd'])
    with torch.no_grad():
        assert torch.equal(mlp(x), mlp.c_proj(torch.nn.functional.gelu(mlp.c_fc(x))))
        assert torch.equal(mlp_tanh(x), mlp.c_proj(torch.nn.functional.gelu(mlp.c_fc(x), approximate='tanh')))
        assert not torch.equal(mlp(x), mlp_tanh(x))
    with pytest.raises(ValueError, match='gelu_approx'):
        make(gelu_approx='erf')


def test_zero_init_residual_makes_every_block_the_identity():
    model = make('tied', zero_init_residual=True)
    x = torch.randn(2, 8, SMALL['n_embd'])
    for block in model.blocks:
        assert torch.equal(block(x), x)
    assert not torch.equal(make('tied', zero_init_residual=False).blocks[0](x), x)


def test_shared_gradient_is_the_sum_of_the_input_and_output_gradients_of_an_untied_copy():
    tied = make('tied', zero_init_residual=False).double()
    untied = GPT(GPTConfig(**{**SMALL, 'tie_mode': 'untied'})).double()
    untied.load_state_dict(tied.state_dict())  # same values, two separate tensors in the copy
    assert not untied.is_tied
    idx = torch.randint(SMALL['vocab_size'], (3, 12))
    targets = torch.randint(SMALL['vocab_size'], (3, 12))
    tied(idx, targets)[1].backward()
    untied(idx, targets)[1].backward()
    expected = untied.token_embedding_table.weight.grad + untied.lm_head.weight.grad
    assert untied.token_embedding_table.weight.grad.abs().sum() > 0  # both ends really contribute
    assert untied.lm_head.weight.grad.abs().sum() > 0
    assert torch.allclose(tied.token_embedding_table.weight.grad, expected, atol=1e-12)


@pytest.mark.parametrize('mode', TIE_MODES)
def test_save_and_load_keep_the_tie(mode):
    model = make(mode)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    fresh = GPT(GPTConfig(**{**SMALL, 'tie_mode': mode}))
    fresh.load_state_dict(state)
    assert fresh.is_tied == (mode != 'untied')
    for name, value in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], value)
    if mode != 'untied':
        # One storage in the file, and one after loading: a step on one name moves the other.
        assert state['lm_head.weight'].data_ptr() == state['token_embedding_table.weight'].data_ptr()
        with torch.no_grad():
            fresh.token_embedding_table.weight[0, 0] += 1.0
        assert fresh.lm_head.weight[0, 0] == fresh.token_embedding_table.weight[0, 0]


# Initial loss against equation (*): the measured values must match the closed form.
SHAPES = [dict(vocab_size=65, n_embd=384, n_head=6), dict(vocab_size=1024, n_embd=512, n_head=8)]


@pytest.mark.parametrize('shape', SHAPES, ids=lambda s: f"n{s['vocab_size']}_d{s['n_embd']}")
def test_plain_tying_starts_where_equation_star_predicts(shape):
    cfg = GPTConfig(**shape, n_layer=2, block_size=64, tie_mode='tied', emb_scale=True, zero_init_residual=True)
    measured, _ = measure_initial_losses(cfg, seeds=3, batch_size=4)[True]
    predicted = predicted_initial_loss(cfg)
    d, sigma, n = cfg.n_embd, cfg.init_std, cfg.vocab_size
    assert predicted > math.log(n) + 1.0  # the shapes are ones where the problem is visible
    # (*) itself, up to the position embedding's small dilution of the self term under emb_scale
    assert predicted == pytest.approx(math.log(math.exp(d * sigma) + (n - 1) * math.exp(d * sigma ** 2 / 2)), rel=0.01)
    assert measured == pytest.approx(predicted, rel=0.05)


@pytest.mark.parametrize('shape', SHAPES, ids=lambda s: f"n{s['vocab_size']}_d{s['n_embd']}")
@pytest.mark.parametrize('mode', ['untied', 'proj', 'shuffle', 'shufflenet', 'bert', 'logit_scale'])
def test_every_remedy_starts_near_log_n(shape, mode):
    cfg = GPTConfig(**shape, n_layer=2, block_size=64, tie_mode=mode, emb_scale=True, zero_init_residual=True)
    measured, _ = measure_initial_losses(cfg, seeds=3, batch_size=4)[True]
    target = math.log(cfg.vocab_size) + cfg.n_embd * cfg.init_std ** 2 / 2
    assert measured == pytest.approx(target, rel=0.03)
    # and where (*) puts it, self term and all (every branch at a shape that tells them apart: test_init_loss.py)
    assert measured == pytest.approx(predicted_initial_loss(cfg), rel=0.03)


@pytest.mark.parametrize('shape', SHAPES, ids=lambda s: f"n{s['vocab_size']}_d{s['n_embd']}")
def test_a_zero_head_starts_at_log_n_exactly_and_moves_before_anything_else(shape):
    """--head_init=zero (nanochat's and modded-nanogpt's untied head): every logit 0, so the start is log n to float
    precision on any tokens, where a normal head's is d sigma^2 / 2 above it; and on the first step only the head has a
    gradient (dL/dh = W_head^T (p - y) = 0), the footgun model.py names."""
    cfg = GPTConfig(**shape, n_layer=2, block_size=64, tie_mode='untied', head_init='zero', emb_scale=True,
                    zero_init_residual=False, bias=False)
    measured, spread = measure_initial_losses(cfg, seeds=3, batch_size=4)[True]
    assert predicted_initial_loss(cfg) == pytest.approx(math.log(cfg.vocab_size), abs=1e-9)
    assert measured == pytest.approx(math.log(cfg.vocab_size), abs=1e-5) and spread < 1e-5
    torch.manual_seed(0)
    model = GPT(cfg)
    assert model.lm_head.weight.abs().max() == 0 and model.token_embedding_table.weight.std() > 0
    x = torch.randint(cfg.vocab_size, (2, 16))
    model(x, x.roll(1, 1))[1].backward()
    moved = {name for name, p in model.named_parameters() if p.grad is not None and p.grad.abs().max() > 0}
    assert moved == {'lm_head.weight'}


@pytest.mark.parametrize('mode', ['tied', 'shuffle', 'pit'])
def test_a_zero_head_is_refused_where_the_head_is_the_token_table(mode):
    with pytest.raises(ValueError) as error:
        GPTConfig(**SMALL, tie_mode=mode, head_init='zero')
    assert "head_init='zero' needs a head of its own (tie_mode='untied')" in str(error.value)
    assert f"tie_mode={mode!r}" in str(error.value) and '--untie_at' in str(error.value)


@pytest.mark.parametrize('shape', SHAPES, ids=lambda s: f"n{s['vocab_size']}_d{s['n_embd']}")
def test_small_init_starts_near_log_2n(shape):
    cfg = GPTConfig(**shape, n_layer=2, block_size=64, tie_mode='small_init', emb_scale=True, zero_init_residual=True)
    measured, _ = measure_initial_losses(cfg, seeds=3, batch_size=4)[True]
    assert predicted_initial_loss(cfg) == pytest.approx(math.log(2 * cfg.vocab_size), abs=0.1)
    assert measured == pytest.approx(predicted_initial_loss(cfg), rel=0.05)


@pytest.mark.parametrize('overrides, culprit, allowed', [
    (dict(tie_mode='shuffle', n_embd=27, n_head=3), 'n_embd', 'even'),
    (dict(tie_mode='shufflenet', n_embd=30, n_head=2, shuffle_groups=4), 'shuffle_groups', 'divisors of 30'),
    (dict(tie_mode='tide'), 'tie_mode', 'untied, tied, small_init, proj, shuffle, shufflenet, bert, logit_scale'),
    (dict(n_embd=30, n_head=4), 'n_head', 'divisible'),
    (dict(n_layer=0), 'n_layer', 'positive integer'),
    (dict(init_std=math.inf), 'init_std', 'positive finite number'),  # inf weights: a nan loss at iteration 0
    (dict(init_std=math.nan), 'init_std', 'positive finite number'),
])
def test_misconfiguration_names_the_key_and_what_is_allowed(overrides, culprit, allowed):
    with pytest.raises(ValueError) as error:
        GPTConfig(**{**SMALL, **overrides})
    assert culprit in str(error.value) and allowed in str(error.value)


def test_forward_shapes_and_generate_crops_the_context():
    model = make('shuffle').eval()
    idx = torch.randint(SMALL['vocab_size'], (2, 10))
    logits, loss = model(idx)
    assert logits.shape == (2, 10, SMALL['vocab_size']) and loss is None
    last, _ = model(idx, last_only=True)
    assert torch.allclose(last[:, 0], logits[:, -1], atol=1e-5)
    out = generate(model, idx, max_new_tokens=SMALL['block_size'] + 5, top_k=5)  # longer than block_size
    assert out.shape == (2, 10 + SMALL['block_size'] + 5)
    assert torch.equal(out[:, :10], idx)
    assert 0 <= out.min() and out.max() < SMALL['vocab_size']


def test_the_loss_of_a_last_only_forward_is_the_last_positions():
    # last_only with targets raised a shape error (logits of one position against targets of T)
    model = make('tied').eval()
    idx, targets = torch.randint(SMALL['vocab_size'], (2, 10)), torch.randint(SMALL['vocab_size'], (2, 10))
    logits, _ = model(idx)
    _, loss = model(idx, targets, last_only=True)
    expected = torch.nn.functional.cross_entropy(logits[:, -1], targets[:, -1])
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    _, whole = model(idx, targets)
    assert abs(whole.item() - loss.item()) > 1e-4  # not the mean over every position


def test_generate_with_top_k_0_keeps_every_token_and_refuses_a_negative_one():
    # top_k=0 raised IndexError (torch.topk of 0 values, then v[:, -1]); sample.py's 0 means "keep all"
    model = make('tied').eval()
    idx = torch.randint(SMALL['vocab_size'], (2, 5))
    torch.manual_seed(3)
    every = generate(model, idx, 8, top_k=0)
    torch.manual_seed(3)
    assert torch.equal(every, generate(model, idx, 8, top_k=None))
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match='top_k must be a positive integer'):
            generate(model, idx, 8, top_k=bad)


def test_generate_with_a_tiny_temperature_is_greedy():
    # Dividing the logits by 1e-40 overflowed to inf, and a softmax over inf - inf is nan: multinomial failed.
    model = make('tied').eval()
    idx = torch.randint(SMALL['vocab_size'], (2, 5))
    greedy = generate(model, idx, 8, temperature=0)
    assert torch.equal(generate(model, idx, 8, temperature=1e-40), greedy)
    assert torch.equal(generate(model, idx, 8, temperature=1e-40, top_k=3), greedy)


@pytest.mark.parametrize('mode, dtype', [('tied', 'float32'), ('untied', 'float32'), ('tied', 'bfloat16'),
                                         ('proj', 'bfloat16')])
def test_memory_floor_is_below_what_a_training_step_holds(mode, dtype):
    # A step holds at least the weights, their gradients and AdamW's two moments (16 bytes a parameter)
    # plus what autograd saves for the backward pass, counted here exactly (eager). The floor must stay
    # below that, or train.py would refuse a run that fits.
    model = make(mode)
    batch = 8
    idx = torch.randint(SMALL['vocab_size'], (batch, SMALL['block_size'] + 1))
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), autocast_context('cpu', dtype):
        model(idx[:, :-1], idx[:, 1:])
    held = 16 * model.num_params() + sum(saved.values())
    floor = memory_floor(model.config, batch, dtype)
    assert floor <= held
    assert floor > held / 20  # and not vacuous
    # the part that grows with the batch grows in proportion
    assert memory_floor(model.config, 2 * batch, dtype) - floor == floor - memory_floor(model.config, 0, dtype) > 0


def test_flops_count_the_head_once_and_the_proj_matmul():
    tied, untied, proj = make('tied'), make('untied'), make('proj')
    assert flops_per_token(tied) == flops_per_token(untied)
    assert flops_per_token(proj) - flops_per_token(tied) == 6 * SMALL['n_embd'] ** 2
    n, d, L, T = SMALL['vocab_size'], SMALL['n_embd'], SMALL['n_layer'], SMALL['block_size']
    assert flops_per_token(tied) == 6 * (n * d + L * 12 * d * d) + 12 * L * d * T


def test_cpu_bf16_autocast_runs_attention_in_fp32_and_the_rest_in_bf16(monkeypatch):
    # torch's CPU attention kernel is ~3x slower in bf16 (model.py), so it gets fp32 inputs there
    import model as model_module
    seen = []
    real_sdpa = model_module.F.scaled_dot_product_attention
    def spy(q, k, v, **kwargs):
        seen.append(q.dtype)
        return real_sdpa(q, k, v, **kwargs)
    monkeypatch.setattr(model_module.F, 'scaled_dot_product_attention', spy)
    model, idx = make(), torch.randint(SMALL['vocab_size'], (2, SMALL['block_size']))
    with torch.autocast('cpu', dtype=torch.bfloat16):
        logits, loss = model(idx, idx)
    assert seen == [torch.float32] * SMALL['n_layer']
    assert logits.dtype == torch.bfloat16          # the matmuls around it still run in bf16
    loss.backward()
    fp32_loss = make()(idx, idx)[1]
    assert abs(loss.item() - fp32_loss.item()) < 0.02 * fp32_loss.item()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    seen.clear()
    model(idx, idx)                                 # without autocast, nothing is converted
    assert seen == [torch.float32] * SMALL['n_layer']


def test_the_written_out_attention_computes_what_the_fused_kernel_does():
    # attend()'s plain lines (scores, causal mask, softmax) are the readable version of the fast path
    attn = make().blocks[0].attn
    q, k, v = (torch.randn(2, SMALL['n_head'], SMALL['block_size'], 8, generator=torch.Generator().manual_seed(i))
               for i in range(3))  # std 1: sharp softmaxes, so a wrong mask or scale would show
    fused = attn.attend(q, k, v)
    attn.fused = False
    torch.testing.assert_close(attn.attend(q, k, v), fused, rtol=1e-5, atol=1e-6)
    # and through a whole model: the same logits, loss and gradients
    models, idx = [make(), make()], torch.randint(SMALL['vocab_size'], (2, SMALL['block_size']))
    for block in models[1].blocks:
        block.attn.fused = False
    (logits, loss), (plain_logits, plain_loss) = (m(idx, idx) for m in models)
    torch.testing.assert_close(plain_logits, logits, rtol=1e-5, atol=1e-6)
    (loss + plain_loss).backward()
    for p, plain in zip(*(m.parameters() for m in models)):
        torch.testing.assert_close(plain.grad, p.grad, rtol=1e-4, atol=1e-7)


def test_the_optimizer_is_fused_on_cpu_and_steps_like_the_loop_version():
    models = [make(), make()]
    adamw = dict(weight_decay=0.1, learning_rate=1e-2, beta1=0.9, beta2=0.99)
    fused = build_optimizer(models[0], adamw, 'cpu').adamw
    loop = build_optimizer(models[1], adamw, 'cpu', fused=False).adamw
    assert fused.defaults['fused'] and not loop.defaults['fused']
    idx = torch.randint(SMALL['vocab_size'], (4, SMALL['block_size']))
    for model, optimizer in zip(models, (fused, loop)):
        for _ in range(3):
            model(idx, idx)[1].backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    # each step moves a weight by up to lr = 1e-2; the two differ only in rounding (the order of
    # operations), far below that, where a wrong beta or weight decay would differ by ~1e-3
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4)
    assert not torch.equal(models[0].lm_head.weight, make().lm_head.weight)  # it did move

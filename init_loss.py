"""The initial-loss table: for one model shape, every tie mode with emb_scale off/on and zero_init_residual off/on, the
cross-entropy measured at initialisation next to the value predicted by equation (*) of docs/initial-loss.md,
generalised below.

    python init_loss.py                                  # GPT-2 small shape, about a minute on 2 CPU cores
    python init_loss.py --vocab_size=65 --n_embd=384 --n_layer=6 --n_head=6
    python init_loss.py --json                           # one JSON object per row
    python init_loss.py --modes=tied --default_init=true # no init of ours: which way the line points
    python init_loss.py --init_from=gpt2 --text=FILE     # a pretrained GPT-2 on ordinary text instead
    python init_loss.py --plot=docs/initial_logits.png --modes=tied,shuffle --vocab_size=65 --n_embd=128 \
        --n_layer=4 --n_head=4 --init_std=0.0884        # the README's picture: one position's logits at init

The measurement: mean cross-entropy of the freshly initialised model (dropout 0) on batches of uniformly random tokens,
averaged over several seeds (each seed draws new weights and a new batch). Uniform tokens make log n the loss of a
perfect "know-nothing" model, and the next token equals the current one only 1/n of the time, as in (*).

--default_init=true adds rows for a shared matrix that keeps PyTorch's default init, which depends on the direction of
the tying line (see pytorch_default_init); their JSON objects carry init='default-embedding-owns' and so on, every other
row init='custom'.

With --init_from (a GPT-2 name or a transformers folder, see lib/hf_gpt2.py), the question is what became of the self
term after training: on the first --windows windows of --block_size tokens of a text file, the loss, the probability the
model gives to "the next token is this token" (copy_prob) next to how often it really is (repeat_rate), and how far the
current token's logit stands above the mean logit (self_margin; (*) puts it near d*sigma at init for a tied model)."""

import json
import math
import time

import torch

from lib.atomic_files import atomic_path, output_file
from lib.command_line import UserError, parse_config, parse_modes, run_cli
from lib.hf_gpt2 import from_pretrained, pretrained_meta
from lib.init_loss_formula import predicted_initial_loss
from lib.device import pick_device, pick_pad_vocab
from lib.memory import allowed_sizes, largest_that_fits, memory_floor, memory_shortfall, out_of_memory_is_user_error
from lib.probes import copy_probe
from model import GPT, TIE_MODES, GPTConfig
from lib.prepared_data import get_codec

MODEL_KEYS = ('vocab_size', 'n_embd', 'n_layer', 'n_head', 'block_size', 'init_std', 'shuffle_groups')
DEFAULTS = dict(
    vocab_size=50257,       # n (GPT-2 small's shape by default)
    n_embd=768,             # d, the width
    n_layer=12,             # blocks (identity blocks where zero_init_residual)
    n_head=12,              # attention heads per block
    block_size=64,          # context measured; short to keep the table near a minute on a CPU
    batch_size=2,           # sequences per seed
    seeds=3,                # weight draws averaged per row
    init_std=0.02,          # sigma, the std of every weight matrix at init
    shuffle_groups=4,       # g for tie_mode=shufflenet
    modes=','.join(TIE_MODES),  # the tie modes measured, comma separated
    device='cpu',           # where the models run: cpu, cuda, mps
    pad_vocab='auto',       # the head's matmul padded to a multiple of 64 rows, as train.py's; the table is the same
    json=False,             # one JSON object per row on stdout instead of the table
    default_init=False,     # add rows for plain tying with PyTorch's default init, each direction of the line
    init_from='',           # gpt2, gpt2-medium, gpt2-large, gpt2-xl or a transformers folder: measure it on --text
    text='',                # with init_from: a UTF-8 text file, measured from its start
    windows=16,             # with init_from: windows of block_size tokens measured
    plot='',                # a PNG path: draw one position's initial logits for each of --modes, and nothing else
)


# --default_init's rows, "which way the line points" (pytorch_default_init): the shared matrix as module X drew it,
# the rest as init_weights has it so that (*) can be checked; or, all-default, no init of ours at all.
DEFAULT_INITS = ('default-embedding-owns', 'default-linear-owns')
ALL_DEFAULT_INITS = ('all-default-embedding-owns', 'all-default-linear-owns')


@torch.no_grad()
def pytorch_default_init(model, init):
    """Re-initialise a tied model as if no init of ours had run on the shared matrix ('default-*')
    or on anything ('all-default-*'); init='custom' leaves init_weights' work alone.

    `self.lm_head.weight = self.token_embedding_table.weight` drops the Linear's own tensor, so the shared one keeps
    what nn.Embedding drew: N(0, 1). The reverse line keeps nn.Linear's kaiming_uniform_(a=sqrt(5)), i.e.
    U(-1/sqrt(d), 1/sqrt(d)) over fan_in = d. Calling the owner's own reset_parameters() runs the very code its
    constructor ran, so this follows PyTorch if its defaults ever change (a test checks the stds that
    default_init_stds assumes)."""
    if init == 'custom':
        return
    if init not in DEFAULT_INITS + ALL_DEFAULT_INITS or not model.is_tied:
        raise ValueError(f"init={init!r} needs a tied model and one of: custom, "
                         f"{', '.join(DEFAULT_INITS + ALL_DEFAULT_INITS)}")
    owner = model.token_embedding_table if init.endswith('embedding-owns') else model.lm_head
    if init in ALL_DEFAULT_INITS:
        # Everything else as its constructor left it: position embedding N(0, 1), every Linear in
        # the blocks kaiming-uniform with uniform biases (so no block is the identity), norms 1.
        for module in model.modules():
            if module not in (model.token_embedding_table, model.lm_head) and hasattr(module, 'reset_parameters'):
                module.reset_parameters()
    owner.reset_parameters()


def default_init_stds(init, n_embd):
    """(token_std, position_std) that pytorch_default_init leaves, for predicted_initial_loss; None means "as
    init_weights has it". U(-b, b) has std b/sqrt(3), so the Linear's is 1/sqrt(3d).

    What the self term a = d*t*s / sqrt(s^2 + (p/t)^2) becomes, with emb_scale off (s = 1):
    - embedding owns, t = 1, p = sigma = 0.02: p/t = 0.02, so a = d / sqrt(1.0004) = 0.9998 d. The token embedding
      is 50x the position embedding and nothing dilutes it: the self term is d itself (768 for GPT-2 small, 128 at
      the char shape), with or without emb_scale.
    - Linear owns, t = 1/sqrt(3d): as small as sigma (0.0208 at d = 768), so the position embedding dilutes it as in
      the plain tied row: a = sqrt(d/3) / sqrt(1 + 3d*sigma^2), 16 / 1.386 = 11.5 at d = 768 and 6.53 / 1.074 = 6.1
      at d = 128. The full sqrt(d/3) only with emb_scale, where s = sqrt(d) outweighs p.
    - all-default: the position embedding is N(0, 1) too (p = 1). Embedding owns: a = d/sqrt(2), the dilution by
      learned position embeddings (docs/initial-loss.md). Linear owns: p/t = sqrt(3d), a = d*t^2 / ~1 = 1/3: the
      self term is gone. The default blocks are not the identity, so (*) is not expected to hold exactly; the table
      shows by how much it misses."""
    if init == 'custom':
        return None, None
    token_std = 1.0 if init.endswith('embedding-owns') else 1.0 / math.sqrt(3 * n_embd)
    return token_std, (1.0 if init in ALL_DEFAULT_INITS else None)


@torch.inference_mode()
def measure_initial_losses(cfg, seeds, batch_size, device='cpu', init='custom'):
    """Cross-entropy at init on uniformly random tokens, as {emb_scale: (mean, std over seeds)}.

    emb_scale only changes the forward pass, so both settings are measured on the same weights
    and batches (a paired comparison), and each seed costs one initialisation, not two: the
    model is built once and re-initialised per seed (init_weights, then pytorch_default_init)."""
    model = GPT(cfg).to(device).eval()
    # model.config IS cfg, so the loop below flips the caller's cfg.emb_scale: keep it to put back.
    emb_scale_asked = cfg.emb_scale
    losses = {False: [], True: []}
    for seed in range(seeds):
        torch.manual_seed(seed)
        model.init_weights()
        pytorch_default_init(model, init)
        idx = torch.randint(cfg.vocab_size, (batch_size, cfg.block_size + 1), device=device)
        for emb_scale in losses:
            model.config.emb_scale = emb_scale
            _, loss = model(idx[:, :-1], targets=idx[:, 1:])
            losses[emb_scale].append(loss.item())
    cfg.emb_scale = emb_scale_asked
    losses = {emb_scale: torch.tensor(values, dtype=torch.float64) for emb_scale, values in losses.items()}
    return {emb_scale: (values.mean().item(), values.std().item() if seeds > 1 else 0.0)
            for emb_scale, values in losses.items()}


def memory_advice(args):
    return (f"--batch_size={args['batch_size']}, --block_size={args['block_size']}, --vocab_size={args['vocab_size']}, "
            f"--n_embd={args['n_embd']}, --n_layer={args['n_layer']}; use smaller values")


def check_memory(cfg, args, what='measuring'):
    """Refuse a shape that cannot fit in the device at all, before allocating anything (see lib.memory.check_memory),
    naming the largest value of each size that would fit with the others as they are."""
    need = lambda config, batch=args['batch_size']: memory_floor(config, batch, 'float32', training=False)  # noqa: E731
    if not (short := memory_shortfall(need(cfg), args['device'])):
        return
    sizes = dict(n_layer=cfg.n_layer, n_embd=cfg.n_embd, vocab_size=cfg.vocab_size, block_size=cfg.block_size)
    allowed = allowed_sizes(need, args['device'], cfg, sizes)
    if args['batch_size']:
        most = largest_that_fits(lambda b: need(cfg, b), args['device'], args['batch_size'])
        allowed = f"at most --batch_size={most} fits here, the other sizes as they are" if most else allowed
        raise UserError(f"{what} needs {short}, with {memory_advice(args)}" + (f"; {allowed}" if allowed else ""))
    raise UserError(f"{what} needs {short} for the weights of a model with --vocab_size={cfg.vocab_size}, --n_embd="
                    f"{cfg.n_embd}, --n_layer={cfg.n_layer}; use smaller values" + (f" ({allowed})" if allowed else ""))

@torch.inference_mode()
def measure_pretrained(model, ids, block_size, windows):
    """ids (N,) int64 of ordinary text -> dict of loss, copy_prob, repeat_rate, self_margin, tokens,
    over the first `windows` consecutive windows of block_size tokens."""
    n = min(windows, (len(ids) - 1) // block_size)
    if n < 1:
        raise UserError(f"--text has {len(ids)} tokens, fewer than one window of --block_size={block_size} plus one")
    x = ids[:n * block_size].view(n, block_size)                # (n, T)
    y = ids[1:n * block_size + 1].view(n, block_size)           # (n, T) the next tokens
    totals = dict(loss=0.0, copy_prob=0.0, self_margin=0.0)
    for i in range(n):  # one window at a time: the logits of a 1024-token window are 200 MB
        logits, loss = model(x[i:i + 1], y[i:i + 1])
        probe = dict(copy_probe(logits, x[i:i + 1], y[i:i + 1]), loss=loss.item())
        for key in totals:
            totals[key] += probe[key]
    return dict({key: value / n for key, value in totals.items()}, repeat_rate=(x == y).float().mean().item(),
                tokens=n * block_size)


def pretrained_main(args):
    """--init_from: one row (or JSON object) for a pretrained model on ordinary text."""
    if not args['text']:
        raise UserError("--init_from needs --text=FILE, a UTF-8 text file to measure the model on")
    try:
        with open(args['text'], encoding='utf-8') as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read --text={args['text']}: {getattr(e, 'strerror', None) or e}") from None
    encode, _ = get_codec(pretrained_meta(args['init_from']))
    model = from_pretrained(args['init_from'], block_size=args['block_size']).to(args['device']).eval()
    model.config.pad_vocab_to = pick_pad_vocab(args['pad_vocab'], args['device'])
    ids = torch.tensor(encode(text), dtype=torch.long, device=args['device'])
    row = measure_pretrained(model, ids, args['block_size'], args['windows'])
    row = dict(init_from=args['init_from'], text=args['text'], block_size=args['block_size'],
               log_n=math.log(model.config.vocab_size), **row)
    if args['json']:
        print(json.dumps({k: float(f'{v:.6g}') if isinstance(v, float) else v for k, v in row.items()}))
    else:
        print(f"{row['init_from']} on the first {row['tokens']:,} tokens of {row['text']}: loss {row['loss']:.3f} "
              f"(log n = {row['log_n']:.3f}), copy_prob {row['copy_prob']:.3g} against repeat_rate "
              f"{row['repeat_rate']:.3g}, self_margin {row['self_margin']:.2f}")


def plot_initial_logits(path, args, modes):
    """--plot: one panel per mode, the logits a freshly initialised model gives at one position,
    with identity blocks and sqrt(d) input scaling (the premise of (*)): the current token's own
    logit, the self term, against every other token's. Drawn from a real model, one seed."""
    try:  # the main job's scripts import nothing of lab/ (tests/test_layout.py)
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib, which is not installed: pip install matplotlib") from None
    n = args['vocab_size']
    fig, axes = plt.subplots(len(modes), 1, figsize=(7.5, 0.6 + 1.25 * len(modes)), sharex=True, squeeze=False)
    for ax, mode in zip(axes[:, 0], modes):
        cfg = GPTConfig(tie_mode=mode, zero_init_residual=True, emb_scale=True, dropout=0.0, bias=False,
                        **{k: args[k] for k in MODEL_KEYS})
        check_memory(cfg, dict(args, device='cpu', batch_size=0), what='drawing')  # drawn on the CPU: the weights
        torch.manual_seed(0)
        model = GPT(cfg).eval()
        idx = torch.randint(n, (1, min(cfg.block_size, 16)))             # (1, T) random tokens
        with torch.no_grad():
            logits = model(idx)[0][0, -1].float()                        # (n,) at the last position
        current = idx[0, -1].item()
        others = torch.cat((logits[:current], logits[current + 1:]))
        jitter = torch.rand(len(others), generator=torch.Generator().manual_seed(1)) - 0.5
        ax.scatter(others, jitter, s=6, color='0.55', alpha=0.6, linewidths=0, label=f'the other {n - 1:,} tokens')
        ax.scatter([logits[current].item()], [0.0], s=70, marker='D', color='C3', zorder=3,
                   label='the current token (the self term)')
        ax.set(yticks=[], ylim=(-1, 1))
        ax.set_title(f"tie_mode={mode}: loss at init {predicted_initial_loss(cfg):.2f} predicted by (*), "
                     f"log n = {math.log(n):.2f}", fontsize=9, loc='left')
    axes[0, 0].legend(loc='center', fontsize=8, frameon=False)
    axes[-1, 0].set_xlabel('logit at initialisation')
    fig.suptitle(f"One position's logits at init: vocab {n}, width {args['n_embd']}, {args['n_layer']} layers, "
                 f"sigma {args['init_std']:g}, identity blocks, sqrt(d) input scaling", fontsize=9)
    fig.tight_layout()
    with output_file(path, '--plot'), atomic_path(path) as tmp:
        fig.savefig(tmp, format='png', dpi=110)
    plt.close(fig)


def main(argv):
    args = parse_config(DEFAULTS, argv, dict(pad_vocab=('auto', 'true', 'false')))
    if args['init_from']:
        return pretrained_main(args)
    # --text and --windows belong to --init_from: without it they would be ignored, and the table measured
    # on random tokens instead of the text the user named.
    if ignored := [f"--{key}" for key in ('text', 'windows') if args[key] != DEFAULTS[key]]:
        raise UserError(f"{' and '.join(ignored)} measure a pretrained model on a text, so they need "
                        f"--init_from=gpt2 (or a folder); without it init_loss.py measures fresh models on random tokens")
    modes = parse_modes(args['modes'], 'modes', TIE_MODES)
    for key in ('seeds', 'batch_size'):
        if args[key] < 1:
            raise UserError(f"--{key} must be a positive integer, got {args[key]}")
    if args['vocab_size'] < 2:  # log(n - 1) in (*), and a loss that is 0 for any model
        raise UserError(f"--vocab_size must be at least 2, got {args['vocab_size']}")
    args['device'] = pick_device(args['device'])
    if args['plot']:
        try:
            return plot_initial_logits(args['plot'], args, modes)
        except ValueError as e:  # a shape GPTConfig refuses
            raise UserError(str(e)) from None
    log_n = math.log(args['vocab_size'])
    if not args['json']:
        print(f"initial loss at init: vocab {args['vocab_size']}, width {args['n_embd']}, {args['n_layer']} layers, "
              f"{args['n_head']} heads, sigma {args['init_std']}, {args['seeds']} seeds x {args['batch_size']} x "
              f"{args['block_size']} random tokens; log n = {log_n:.3f}")
        init_column = f"{'init':<26} " if args['default_init'] else ''
        print(f"{'tie_mode':<12} {init_column}{'emb_scale':<9} {'residual':<9} {'measured':>15} {'predicted':>9} "
              f"{'meas/pred':>9} {'meas-log n':>10}")
    started = time.time()
    # A group per residual init, each a list of (tie_mode, init) rows. The default-init rows are
    # plain tying only: the question they answer is which module's default the one tensor keeps.
    default_rows = [('tied', init) for init in DEFAULT_INITS] if args['default_init'] else []
    # The untied row twice: the head drawn N(0, sigma^2), GPT-2's, and zero (--head_init=zero), today's practice.
    custom_rows = [(mode, init) for mode in modes for init in ('custom', 'zero-head')[:2 if mode == 'untied' else 1]]
    groups = [(residual, zero_init_residual, custom_rows + default_rows)
              for residual, zero_init_residual in (('zero', True), ('gpt2', False))]
    if args['default_init']:
        # No init of ours anywhere, so zero_init_residual has nothing left to act on: the branches
        # are PyTorch's kaiming-uniform Linears. Reported as zero_init_residual=false.
        groups.append(('torch', False, [('tied', init) for init in ALL_DEFAULT_INITS]))
    for residual, zero_init_residual, jobs in groups:
        rows = {False: [], True: []}  # printed grouped by emb_scale, measured together per row
        for mode, init in jobs:
            try:
                cfg = GPTConfig(tie_mode=mode, zero_init_residual=zero_init_residual, dropout=0.0, bias=False,
                                head_init='zero' if init == 'zero-head' else 'normal',
                                pad_vocab_to=pick_pad_vocab(args['pad_vocab'], args['device']),
                                **{k: args[k] for k in MODEL_KEYS})
            except ValueError as e:
                raise UserError(str(e)) from None
            ours = 'custom' if init == 'zero-head' else init  # the zero head is init_weights' own, as head_init says
            check_memory(cfg, args)
            with out_of_memory_is_user_error(lambda: memory_advice(args)):
                losses = measure_initial_losses(cfg, args['seeds'], args['batch_size'], args['device'], ours)
            for emb_scale, (measured, spread) in losses.items():
                cfg.emb_scale = emb_scale
                rows[emb_scale].append((mode, init, measured, spread,
                                        predicted_initial_loss(cfg, *default_init_stds(ours, cfg.n_embd))))
        for emb_scale, mode_rows in rows.items():
            for mode, init, measured, spread, predicted in mode_rows:
                if args['json']:
                    print(json.dumps(dict(tie_mode=mode, init=init, emb_scale=emb_scale,
                                          head_init='zero' if init == 'zero-head' else 'normal',
                                          zero_init_residual=zero_init_residual,
                                          **{key: args[key] for key in ('vocab_size', 'n_embd', 'n_layer', 'init_std')},
                                          measured=round(measured, 4), measured_std=round(spread, 4),
                                          predicted=round(predicted, 4), log_n=round(log_n, 4))), flush=True)
                else:
                    init_column = f"{init:<26} " if args['default_init'] else ''
                    label = 'untied, 0' if init == 'zero-head' else mode  # the head initialised to zero
                    print(f"{label:<12} {init_column}{str(emb_scale).lower():<9} {residual:<9} "
                          f"{measured:>8.3f} ± {spread:<5.3f} {predicted:>9.3f} {measured / predicted:>9.3f} "
                          f"{measured - log_n:>+10.3f}", flush=True)
    if not args['json']:
        print(f"({time.time() - started:.0f} s; residual 'zero' = zero_init_residual, the premise of (*); "
              f"'gpt2' = GPT-2's init, where (*) is not expected to hold)")
        if args['default_init']:
            print("(init 'default-X-owns' = this model's init, then the shared matrix as module X's constructor "
                  "draws it: nn.Embedding N(0, 1), nn.Linear U(-1/sqrt(d), 1/sqrt(d)); residual 'torch' = "
                  "every module at PyTorch's default, no init of ours at all)")


if __name__ == '__main__':
    run_cli(main)

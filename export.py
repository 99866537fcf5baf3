"""Write a train.py checkpoint as a Hugging Face transformers GPT-2 folder, with the tie declared.

    python export.py --out_dir=out --to=out-hf     # out/ckpt.pt -> out-hf/ (config.json, model.safetensors, meta.json)
    python -c "from transformers import GPT2LMHeadModel; GPT2LMHeadModel.from_pretrained('out-hf')"
    python sample.py --init_from=out-hf            # and back again

The config maps one to one: n_positions = block_size, n_embd, n_layer, n_head, vocab_size, activation_function
'gelu_new' for gelu_approx='tanh' and 'gelu' for the exact GELU, and every dropout = dropout. tie_word_embeddings says
whether the head is the embedding: true for `tied` and `small_init` (an init only), false for `untied`. With the tie
declared, model.safetensors holds the shared matrix once and transformers reads it back as one tensor.

Three settings are folded into the weights, exactly: a model without biases gets zero biases (GPT-2 always has them);
`logit_scale` (h * d^-1/2 before the head) becomes the final LayerNorm's gain and bias times d^-1/2; and emb_scale of an
untied model becomes its embedding times sqrt(d). `pit` exports as an untied GPT-2 holding its two materialised
matrices, the input rows S^-1 u_i (times sqrt(d) under emb_scale) and the head U S: GPT-2 cannot keep U orthonormal or S
learnable, but the logits are the same. What GPT-2 has no place for stops with one line: `proj`, `shuffle`, `shufflenet`
and `bert` put a transform between the final norm and the head, and emb_scale with a tie would need the one matrix to be
W*sqrt(d) at the input and W at the head.

Nothing appears at --to until the export is complete and checked: the folder is written beside it under a temporary
name, reloaded with transformers, compared with this repository's model on a test batch (logits, tie, parameter count),
and only then renamed. An existing --to that is not empty is refused. meta.json is the dataset's tokenizer, as in the
checkpoint: GPT-2 BPE, the characters of a char-level model, or a compact GPT-2 vocabulary
(prepare.py --compact_vocab=true), whose ids are not GPT-2's: meta.json's bpe_ids maps them, and a GPT-2 tokenizer alone
would not. Needs transformers (pip install transformers)."""

import json
import math
import os

import torch

from lib.atomic_files import make_folder, new_folder, output_file
from lib.command_line import UserError, parse_config, run_cli
from lib.hf_gpt2 import CONV1D, LAYER_NORM_EPS, hf_name
from lib.run_files import load_checkpoint, model_from_checkpoint

DEFAULTS = dict(
    out_dir='out',          # the run whose ckpt.pt is exported
    to='',                  # the folder to write: new, or empty
    check=True,             # reload the folder with transformers and compare, before it appears at --to
)
NOT_EXPORTABLE = dict(proj="a learned d x d matrix between the final norm and the tied head",
                      shuffle="a swap of the two halves of the hidden state before the tied head",
                      shufflenet="a channel shuffle of the hidden state before the tied head",
                      bert="BERT's dense-GELU-LayerNorm transform and an output bias around the tied head")


def gpt2_config(args, untied):
    """A checkpoint's model_args -> GPT2Config keyword arguments; UserError for what GPT-2 cannot express.
    untied: the head is a matrix of its own (tie_mode untied, or a tied run after --untie_at)."""
    mode = args['tie_mode']
    if mode in NOT_EXPORTABLE:
        raise UserError(f"tie_mode={mode} cannot be exported to GPT-2: it adds {NOT_EXPORTABLE[mode]}, which GPT-2 "
                        f"has no place for; tied, small_init, logit_scale and untied models export")
    if args['emb_scale'] and not untied:
        raise UserError(f"emb_scale=True with tie_mode={mode} cannot be exported to GPT-2: the shared matrix would "
                        f"have to be W*sqrt(d) at the input and W at the head, and GPT-2 scales neither")
    eos = 50256 if args['vocab_size'] > 50256 else None  # GPT-2's <|endoftext|>, if the vocabulary has it
    return dict(vocab_size=args['vocab_size'], n_positions=args['block_size'], n_embd=args['n_embd'],
                n_layer=args['n_layer'], n_head=args['n_head'], n_inner=None, layer_norm_epsilon=LAYER_NORM_EPS,
                activation_function='gelu_new' if args['gelu_approx'] == 'tanh' else 'gelu',
                resid_pdrop=args['dropout'], embd_pdrop=args['dropout'], attn_pdrop=args['dropout'],
                tie_word_embeddings=not untied, bos_token_id=eos, eos_token_id=eos)


@torch.no_grad()
def pit_matrices(model):
    """pit as an untied model holds it: the input matrix (rows S^-1 u_i, n x d) and the head U S."""
    U, L = model.token_embedding_table.weight, model.pit.cholesky()
    return model.pit.lift(U[None])[0], U @ L @ L.t()


def gpt2_state_dict(model):
    """Our weights under transformers' names and layouts, with the folds described at the top.
    Both names of a shared matrix map to the one tensor."""
    cfg = model.config
    state = {hf_name(name): tensor.t() if name.endswith(CONV1D) else tensor   # Linear (out, in) -> Conv1D (in, out)
             for name, tensor in model.state_dict().items()}
    if cfg.tie_mode == 'logit_scale':
        # LayerNorm(x) * c = norm(x) * (g * c) + b * c: the scale moves into the gain and the bias.
        for key in ('transformer.ln_f.weight', 'transformer.ln_f.bias'):
            if key in state:
                state[key] = state[key] * cfg.n_embd ** -0.5
    if cfg.tie_mode == 'pit':  # exported untied: the matrices pit computes from U and S, materialised
        state.pop('transformer.pit.lower'), state.pop('transformer.pit.log_diag')
        state['transformer.wte.weight'], state['lm_head.weight'] = pit_matrices(model)
    if cfg.emb_scale:  # untied only (gpt2_config refuses a tie): wte is then read at the input alone
        state['transformer.wte.weight'] = state['transformer.wte.weight'] * math.sqrt(cfg.n_embd)
    return state


def write_folder(model, meta, hf_kwargs, folder, check):
    """Write the transformers folder; with check, reload it and compare. Returns the largest logit difference."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf = GPT2LMHeadModel(GPT2Config(**hf_kwargs))  # tied by transformers itself when tie_word_embeddings
    state = gpt2_state_dict(model)
    params = dict(hf.named_parameters(remove_duplicate=False))  # lm_head.weight too, when tied
    unplaced = set(state) - set(params)
    unfilled = [key for key in params if key not in state and not key.endswith('.bias')]
    assert not unplaced and not unfilled, f"name map out of date: {sorted(unplaced)} {unfilled}"
    with torch.no_grad():
        for key, param in params.items():
            # GPT-2 always has biases; a bias-free model's are zero. A tied matrix is written twice, the same values.
            param.copy_(state[key] if key in state else torch.zeros_like(param))
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        hf.save_pretrained(folder)  # safetensors; the declared tie lets it store the shared matrix once
        with open(os.path.join(folder, 'meta.json'), 'w', encoding='utf-8') as f:
            json.dump(meta, f, indent=1)
        if not check:
            return None
        reloaded = GPT2LMHeadModel.from_pretrained(folder).float().eval()
    finally:
        if bars:
            hf_logging.enable_progress_bar()

    # The traps: a loader that unties (two copies after loading), counts a shared matrix twice, or
    # reads the weights into other places. Compare on a fixed batch in float32.
    tied = hf_kwargs['tie_word_embeddings']
    reloaded_tied = reloaded.lm_head.weight.data_ptr() == reloaded.transformer.wte.weight.data_ptr()
    idx = torch.randint(model.config.vocab_size, (2, min(model.config.block_size, 64)),
                        generator=torch.Generator().manual_seed(0))  # (2, T)
    model.eval()
    with torch.no_grad():
        ours = model(idx)[0]                                      # (2, T, vocab_size)
        theirs = reloaded(idx).logits.float()                     # (2, T, vocab_size)
    diff = (ours - theirs).abs().max().item()
    tolerance = 1e-4 * max(1.0, ours.abs().max().item())
    if problems := [words for wrong, words in (
            (reloaded_tied != tied, f"the head is {'' if reloaded_tied else 'not '}the embedding after loading"),
            (reloaded.num_parameters() != hf.num_parameters(),
             f"{reloaded.num_parameters():,} parameters after loading instead of {hf.num_parameters():,}"),
            (not diff <= tolerance, f"logits differ by up to {diff:.3g}")) if wrong]:
        import transformers
        raise UserError(f"transformers {transformers.__version__} reads the export back differently "
                        f"({'; '.join(problems)}); nothing was written to the target folder. Please report this; "
                        f"--check=false writes it anyway")
    return diff


def main(argv):
    cfg = parse_config(DEFAULTS, argv)
    if not cfg['to']:
        raise UserError("--to is required: the folder to write, e.g. --to=out-hf")
    target = os.path.abspath(cfg['to'])
    if os.path.exists(target) and not (os.path.isdir(target) and not os.listdir(target)):
        raise UserError(f"--to={cfg['to']} exists and is not an empty folder; export never overwrites: "
                        f"choose a new folder")
    ckpt_path = os.path.join(cfg['out_dir'], 'ckpt.pt')
    ckpt = load_checkpoint(ckpt_path, 'cpu')
    args, meta = ckpt['model_args'], ckpt['meta']
    # the modes GPT-2 cannot express stop here, before the slow import
    hf_kwargs = gpt2_config(args, untied=args['tie_mode'] in ('untied', 'pit') or ckpt.get('head_untied', False))
    model = model_from_checkpoint(ckpt, ckpt_path)
    del ckpt
    # where --to goes: a missing parent is made, a file in its way is one line, whether or not transformers is here
    make_folder(os.path.dirname(target), '--to', shown=cfg['to'])
    try:
        import transformers  # noqa: F401  (optional dependency)
    except ImportError:
        raise UserError("export needs Hugging Face transformers, which is not installed: "
                        "pip install transformers") from None

    # Written beside the target under a temporary name and renamed when complete (new_folder): a crash, a kill or
    # a failed check leaves --to as it was.
    with output_file(cfg['to'], '--to'), new_folder(target, '--to') as tmp:
        diff = write_folder(model, meta, hf_kwargs, tmp, cfg['check'])

    tie = 'true (the shared matrix stored once)' if hf_kwargs['tie_word_embeddings'] else 'false'
    print(f"wrote {cfg['to']}: GPT-2 with n_layer={args['n_layer']}, n_head={args['n_head']}, n_embd={args['n_embd']}, "
          f"vocab_size={args['vocab_size']}, n_positions={args['block_size']}, "
          f"activation {hf_kwargs['activation_function']}; tie_word_embeddings {tie}")
    if diff is not None:
        print(f"checked: transformers reloads it with the same tie and parameter count, logits within {diff:.2g}")
    if meta.get('tokenizer') != 'gpt2':
        tokens = f"{meta.get('tokenizer')}-level, {meta.get('vocab_size')} symbols listed in meta.json"
    elif meta.get('bpe_ids') is not None:  # a GPT-2 tokenizer alone would read every id as the wrong token
        tokens = (f"a compact GPT-2 BPE vocabulary: id i is GPT-2's id bpe_ids[i] in meta.json "
                  f"({len(meta['bpe_ids'])} ids; sample.py --init_from={cfg['to']} maps them)")
    else:
        tokens = 'GPT-2 BPE (the gpt2 tokenizer)'
    print(f"token ids: {tokens}; load with GPT2LMHeadModel.from_pretrained({cfg['to']!r})")


if __name__ == '__main__':
    run_cli(main)

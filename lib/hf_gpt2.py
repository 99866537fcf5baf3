"""GPT-2 between this repository and Hugging Face transformers: how the weights are named and laid out on each side,
reading a pretrained GPT-2 into a model.GPT (from_pretrained, for train.py's and sample.py's --init_from), and
which of train.py's settings a pretrained start fixes. --init_from names gpt2, gpt2-medium, gpt2-large, gpt2-xl
or a transformers folder; export.py goes the other way.

transformers is an optional dependency: only load_hf_model imports it, and without it, or
without the weights, every path here stops with one line saying what to do."""

import json
import os
import sys

import torch

from lib.command_line import UserError, given_keys
from model import GPT, GPTConfig

# The four OpenAI GPT-2 sizes on the Hugging Face hub, as (n_layer, n_head, n_embd). All four have
# GPT-2's BPE vocabulary (50257), 1024 positions, biases, the tanh GELU and a tied head.
HUB_MODELS = {'gpt2': (12, 12, 768), 'gpt2-medium': (24, 16, 1024), 'gpt2-large': (36, 20, 1280),
              'gpt2-xl': (48, 25, 1600)}
# transformers keeps these four weights in Conv1D modules, which store them as (in, out): the
# transpose of nn.Linear's (out, in).
CONV1D = ('attn.c_attn.weight', 'attn.c_proj.weight', 'mlp.c_fc.weight', 'mlp.c_proj.weight')
# GPT2Config.activation_function -> our GPTConfig.gelu_approx. "gelu_new" is the tanh approximation
# OpenAI trained GPT-2 with; it differs from the exact GELU by up to about 1e-3 per activation.
GELU_APPROX = {'gelu_new': 'tanh', 'gelu_pytorch_tanh': 'tanh', 'gelu': 'none'}
LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, and GPT-2's layer_norm_epsilon


def hf_name(name):
    """Our parameter name -> GPT2LMHeadModel's: 'blocks.3.attn.c_attn.weight' ->
    'transformer.h.3.attn.c_attn.weight', 'token_embedding_table.weight' -> 'transformer.wte.weight'."""
    if name.startswith('lm_head.'):
        return name
    name = name.replace('token_embedding_table.', 'wte.').replace('position_embedding_table.', 'wpe.')
    return 'transformer.' + (name.replace('blocks.', 'h.', 1) if name.startswith('blocks.') else name)


def model_args(hc, where):
    """A GPT2Config (as a dict) -> our GPTConfig keys, or one UserError for what our model cannot compute."""
    n_embd = hc['n_embd']
    activation = hc.get('activation_function', 'gelu_new')
    epsilon = hc.get('layer_norm_epsilon', LAYER_NORM_EPS)
    if problems := [words for wrong, words in (
        (hc.get('model_type', 'gpt2') != 'gpt2', f"model_type is {hc.get('model_type')!r}, not 'gpt2'"),
        (activation not in GELU_APPROX, f"activation_function {activation!r} (allowed: {', '.join(GELU_APPROX)})"),
        (hc.get('n_inner') not in (None, 4 * n_embd), f"n_inner {hc.get('n_inner')} (the MLP here is 4 x n_embd = "
                                                      f"{4 * n_embd})"),
        (abs(epsilon - LAYER_NORM_EPS) > 1e-12, f"layer_norm_epsilon {epsilon} (here {LAYER_NORM_EPS})"),
        (hc.get('scale_attn_by_inverse_layer_idx') or not hc.get('scale_attn_weights', True),
         "a non-standard attention scaling")) if wrong]:
        raise UserError(f"{where} is not a GPT-2 this model can compute: {'; '.join(problems)}")
    return dict(vocab_size=hc['vocab_size'], block_size=hc['n_positions'], n_layer=hc['n_layer'],
                n_head=hc['n_head'], n_embd=n_embd, bias=True, emb_scale=False, gelu_approx=GELU_APPROX[activation],
                tie_mode='tied' if hc.get('tie_word_embeddings', True) else 'untied')


def pretrained_args(name_or_path):
    """The shape of a pretrained GPT-2 as GPTConfig keys (tie_mode: tied or untied, as its head was trained), read
    without its weights and without transformers: from its config.json, or for a hub name from HUB_MODELS."""
    if os.path.isdir(name_or_path):  # a folder wins over a hub name, as in transformers
        path = os.path.join(name_or_path, 'config.json')
        try:
            with open(path, encoding='utf-8') as f:
                return model_args(json.load(f), path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            reason = e.strerror if isinstance(e, OSError) else f"{type(e).__name__}: {e}"
            raise UserError(f"{name_or_path} is not a folder written by transformers' save_pretrained "
                            f"({path}: {reason})") from None
    if name_or_path in HUB_MODELS:
        n_layer, n_head, n_embd = HUB_MODELS[name_or_path]  # GPT2Config's defaults give the rest
        return model_args(dict(vocab_size=50257, n_positions=1024, n_layer=n_layer, n_head=n_head, n_embd=n_embd),
                          name_or_path)
    raise UserError(f"--init_from={name_or_path}: no such folder, and not a known name (scratch, resume, "
                    f"{', '.join(HUB_MODELS)}); a folder must be written by GPT2LMHeadModel.save_pretrained")


def pretrained_meta(name_or_path):
    """The tokenizer a pretrained model reads, as prepare.py's meta.json describes one: the meta.json
    that export.py writes beside the weights, else GPT-2's BPE (every OpenAI GPT-2)."""
    path = os.path.join(name_or_path, 'meta.json')
    if not os.path.isfile(path):  # a hub name (every OpenAI GPT-2 reads GPT-2 BPE), or a folder without meta.json
        if os.path.isdir(name_or_path):  # the documented fallback, said on its own line (sample, train, init_loss)
            print(f"note: {name_or_path} has no meta.json (export.py writes one), so its token ids are read as GPT-2 "
                  f"BPE", file=sys.stderr)
        return dict(tokenizer='gpt2', vocab_size=50257)
    try:
        with open(path, encoding='utf-8') as f:
            meta = json.load(f)
        if meta['tokenizer'] == 'char' and not isinstance(meta['chars'], list):
            raise TypeError("'chars' is not a list")
        return meta
    except (OSError, ValueError, KeyError, TypeError) as e:
        reason = e.strerror if isinstance(e, OSError) else f"{type(e).__name__}: {e}"
        raise UserError(f"{path} is unreadable ({reason}); export.py writes it: export again, or delete it "
                        f"if the model reads GPT-2 BPE") from None


def load_hf_model(name_or_path):
    """transformers' GPT2LMHeadModel, float32, in eval mode, from the local cache or a folder, else
    downloaded from the hub. Every way this fails is one UserError."""
    pretrained_args(name_or_path)  # a bad name, folder or config fails here, before the slow import
    try:
        from transformers import GPT2LMHeadModel
        from transformers.utils import logging as hf_logging
    except ImportError:
        raise UserError("reading GPT-2 weights needs Hugging Face transformers, which is not installed: "
                        "pip install transformers") from None
    import huggingface_hub.utils as hub_utils
    local = os.path.isdir(name_or_path)
    # The hub library retries an unreachable server for ~20 s with a warning each time, and transformers
    # draws a progress bar for reading even a small file: neither belongs in a one-line error or a log.
    verbosity, hub_verbosity = hf_logging.get_verbosity(), hub_utils.logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hub_utils.logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        try:  # the cache first: no network, no waiting
            return GPT2LMHeadModel.from_pretrained(name_or_path, local_files_only=True).float().eval()
        except OSError:
            if local:
                raise
        if bars:
            hf_logging.enable_progress_bar()  # a real download (500 MB to 6 GB) deserves its bar
        return GPT2LMHeadModel.from_pretrained(name_or_path).float().eval()
    except Exception as e:
        reason = str(e).strip().split('\n')[0][:150]
        if local:
            raise UserError(f"cannot read the GPT-2 weights in {name_or_path} ({type(e).__name__}: {reason})") from None
        raise UserError(f"the weights of {name_or_path} are not in the Hugging Face cache here and could not be "
                        f"downloaded ({type(e).__name__}: {reason}); connect to the network once to cache them, "
                        f"or give --init_from=PATH, a folder written by GPT2LMHeadModel.save_pretrained, "
                        f"which works offline") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        hub_utils.logging.set_verbosity(hub_verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def from_pretrained(name_or_path, tie_mode=None, dropout=0.0, block_size=None):
    """GPT-2's weights, through Hugging Face transformers (an optional dependency): a hub name (gpt2, gpt2-medium,
    gpt2-large, gpt2-xl: from the local cache, else downloaded) or a folder written by GPT2LMHeadModel.save_pretrained
    (works offline). forward(idx)[0] then equals transformers' logits: biases, the tanh GELU, no emb_scale, and the head
    the weights were trained with. tie_mode None follows the weights (tied for every OpenAI GPT-2: wte is ONE tensor,
    read at the input and scored at the output); 'untied' gives the head its own copy. A block_size below the pretrained
    context keeps the first block_size position rows."""
    hf = load_hf_model(name_or_path)          # UserError for no transformers, no weights, a bad folder
    args = model_args(hf.config.to_dict(), name_or_path)
    tie_mode = tie_mode or args['tie_mode']
    if tie_mode == 'tied' and args['tie_mode'] == 'untied':
        raise UserError(f"{name_or_path} has its own head (tie_word_embeddings false): tying it to the "
                        f"embedding would throw the trained head away; use tie_mode='untied'")
    n_positions = args['block_size']
    block_size = block_size or n_positions
    if block_size > n_positions:
        raise UserError(f"block_size={block_size} is longer than the {n_positions} positions "
                        f"{name_or_path} was trained with")
    model = GPT(GPTConfig(**dict(args, block_size=block_size, dropout=dropout, tie_mode=tie_mode)))

    hf_params = dict(hf.named_parameters(remove_duplicate=False))  # lm_head.weight too, when tied
    with torch.no_grad():
        # named_parameters() yields a shared tensor once, here as token_embedding_table.weight, so
        # a tied head receives wte exactly once; copy_ writes in place, so the tie survives.
        for name, param in model.named_parameters():
            source = hf_params[hf_name(name)]
            if name.endswith(CONV1D):
                source = source.t()                                  # Conv1D (in, out) -> Linear (out, in)
            if name == 'position_embedding_table.weight':
                source = source[:block_size]                         # (n_positions, C) -> (block_size, C)
            param.copy_(source)
    return model


def start_from_pretrained(cfg, defaults, meta):
    """train.py --init_from=gpt2|...|PATH: the pretrained GPT, with cfg's model keys set to its shape.

    A key the user gave counts, even at its default (as for --init_from=resume). The user may choose tie_mode (tied,
    or untied: the head starts as a copy of the embedding; left at its default it follows the weights, tied for every
    OpenAI GPT-2), dropout, and block_size up to the pretrained context: a shorter one keeps the first block_size rows
    of the position table (NanoGPT's habit), so the model costs less and attends over what the training windows hold.
    Everything is checked before any weights are read."""
    name, given = cfg['init_from'], given_keys(cfg, defaults)
    pretrained = pretrained_args(name)
    for key in ('vocab_size', 'n_layer', 'n_head', 'n_embd', 'bias', 'emb_scale', 'gelu_approx'):  # the shape
        if key in given and cfg[key] != pretrained[key]:
            raise UserError(f"--{key}={cfg[key]} cannot change the pretrained {name}, which has {key}="
                            f"{pretrained[key]}; drop --{key}, or train from scratch")
    for key in ('init_std', 'zero_init_residual', 'shuffle_groups', 'head_init'):  # an untied head starts as the table
        if key in given:
            raise UserError(f"--{key} shapes a fresh initialisation, which --init_from={name} replaces with "
                            f"pretrained weights; drop --{key}")
    if cfg['block_size'] > pretrained['block_size']:
        raise UserError(f"--block_size={cfg['block_size']} is longer than the {pretrained['block_size']} positions "
                        f"{name} was trained with; use at most {pretrained['block_size']}")
    if cfg['tie_mode'] not in ('tied', 'untied'):
        raise UserError(f"--tie_mode={cfg['tie_mode']} changes the head or its initialisation, but {name}'s head "
                        f"was trained as it is; start it with --tie_mode=tied or --tie_mode=untied")
    reads = pretrained_meta(name)
    # A compact vocabulary (prepare.py --compact_vocab) renumbers GPT-2's ids: bpe_ids must agree too.
    if (meta.get('tokenizer'), meta.get('chars'), meta.get('bpe_ids')) != \
            (reads['tokenizer'], reads.get('chars'), reads.get('bpe_ids')):
        how = ("prepare it with python prepare.py --input=FILE --tokenizer=gpt2 (or --dataset=shakespeare)"
               if reads['tokenizer'] == 'gpt2' else "use the data it was trained on")
        kind = {'gpt2': 'GPT-2 BPE', 'char': 'character'}.get(reads['tokenizer'], reads['tokenizer'])
        raise UserError(f"--init_from={name} reads {kind} token ids, but dataset {cfg['dataset']} "
                        f"has other ones ({meta.get('tokenizer')}, vocab {meta.get('vocab_size')}); {how}")
    tie_mode = cfg['tie_mode'] if 'tie_mode' in given else None
    model = from_pretrained(name, tie_mode=tie_mode, dropout=cfg['dropout'], block_size=cfg['block_size'])
    cfg.update({key: getattr(model.config, key) for key in cfg if hasattr(model.config, key)})
    return model

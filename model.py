"""
A small GPT whose subject is the tied embedding: one matrix W (vocab_size x n_embd) that reads tokens in and,
transposed, scores them on the way out.

    self.lm_head.weight = self.token_embedding_table.weight

Architecture (GPT-2 / NanoGPT lineage), read top to bottom: learned token and position embeddings (`emb_scale`:
tokens times sqrt(d)); pre-norm blocks x + attn(ln(x)), x + mlp(ln(x)); causal self-attention, written out in
`attend` and run by scaled_dot_product_attention; a 4x GELU MLP; a final LayerNorm, the tie mode's head transform,
a bias-free head. All initialisation is in `init_weights`; which optimizer and decay each parameter gets, in
`optimizer_groups` (lib/optimizers.py builds the optimizers and sets the rates); sampling is sample.py's `generate`.

Why tying can hurt (docs/initial-loss.md). Rows w_k of W are i.i.d. N(0, sigma^2): |w_i|^2 ~ d*sigma^2 while
w_i . w_k ~ 0 for k != i. If the residual branches start at zero (`zero_init_residual`), the network at init is
the identity, the final norm returns h = w_i / sigma, and the tied head scores the input token itself z_i ~ d*sigma
(the "self term") and every other z_k ~ N(0, d*sigma^2). The next token is almost never the current one, so

    initial loss ~ log( e^(d*sigma) + (n-1) * e^(d*sigma^2/2) )        (*)

~ d*sigma instead of log n: 15.4 against 10.8 for GPT-2 small with emb_scale. Every tie mode but `tied` removes the
self term, each beside its reason: `untied` and `small_init` in init_weights, `pit` in PseudoInverseTie, the rest
in head(). `input_grad_scale` is ScaleGrad.
"""

import math
from dataclasses import dataclass, fields
from typing import NamedTuple

import torch
import torch.nn as nn
from torch.nn import functional as F


class TieMode(NamedTuple):
    shares: bool         # lm_head.weight IS token_embedding_table.weight: the tying line runs
    square_matmuls: int  # d x d matmuls it puts between ln_f and the head (d^2 parameters and FLOPs each)
    what: str


# Every --tie_mode (__init__ reads `shares`, lib/throughput.py `square_matmuls`). A new one: a row, its lines, a test.
TIE_MODES = {
    'untied':      TieMode(False, 0, "a head matrix of its own: w_i . h is a cross term"),
    'tied':        TieMode(True,  0, "plain sharing: the baseline that shows (*)"),
    'small_init':  TieMode(True,  0, "the shared matrix drawn with std log(n)/d: e^(self term) = n"),
    'proj':        TieMode(True,  1, "an orthogonal P before the head: w_i . P w_i is a cross term"),
    'shuffle':     TieMode(True,  0, "swap the halves of h: S[w_i] . w_i pairs different coordinates"),
    'shufflenet':  TieMode(True,  0, "a channel shuffle of h: almost every coordinate moves"),
    'bert':        TieMode(True,  1, "BERT's dense -> GELU -> LayerNorm before the head, plus a bias"),
    'logit_scale': TieMode(True,  0, "h * d^-1/2 before the head: the self term shrinks to sqrt(d)*sigma"),
    'pit':         TieMode(True,  2, "pseudo-inverse tying: orthonormal U, head U S h, token i in as S^-1 u_i"),
}
HEAD_INITS = ('normal', 'zero')  # an untied head's init (GPTConfig.head_init): GPT-2's N(0, sigma^2), or zero


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # q, k, v in one matmul
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)      # a residual output projection
        self.resid_dropout = nn.Dropout(config.dropout)
        self.fused = True  # False: attend() runs its plain lines instead of the fused kernel (to read or check them)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs) each
                   for t in self.c_attn(x).split(C, dim=2))
        if q.device.type == 'cpu' and q.dtype == torch.bfloat16:
            # FOOTGUN: torch's CPU attention kernel is about 3x slower in bf16 than in fp32 at these sizes
            # (its backward 6x), enough to cancel all that bf16 saves in the matmuls (docs/performance.md).
            with torch.autocast('cpu', enabled=False):
                y = self.attend(q.float(), k.float(), v.float()).to(q.dtype)  # (B, nh, T, hs)
        else:
            y = self.attend(q, k, v)                                          # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)                      # (B, T, C): the heads side by side
        return self.resid_dropout(self.c_proj(y))

    def attend(self, q, k, v):
        """Each position's output is an average of the values at it and before it, weighted by how well its query
        matches their keys. scaled_dot_product_attention computes the plain lines below (to rounding; with dropout,
        another mask) in one fused kernel that never holds the (T, T) scores: the fast path, taken unless not fused."""
        dropout_p = self.dropout if self.training else 0.0
        if self.fused:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        T = q.size(-2)
        att = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))   # (B, nh, T, T); 1/sqrt(hs) keeps the spread ~1
        future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        att = att.masked_fill(future, float('-inf'))            # causal: position t sees no key after t
        att = F.dropout(F.softmax(att, dim=-1), dropout_p)      # each row: weights that sum to 1
        return att @ v                                          # (B, nh, T, hs)


class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)  # a residual output projection
        self.dropout = nn.Dropout(config.dropout)
        self.gelu_approx = config.gelu_approx  # 'none' (exact) or 'tanh' (what GPT-2 was trained with)

    def forward(self, x):
        x = F.gelu(self.c_fc(x), approximate=self.gelu_approx)  # (B, T, C) -> (B, T, 4C)
        return self.dropout(self.c_proj(x))                     # (B, T, 4C) -> (B, T, C)


class Block(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class ScaleGrad(torch.autograd.Function):
    """--input_grad_scale (Lopardo et al. 2026, arXiv 2603.26663): identity forward, gradient times k backward.
    A tied matrix's gradient is (input part) + (output part), so k turns it towards the input side; an untied
    embedding's AdamW divides a constant k away (up to eps), but not the global-norm clip that the scaled gradient
    sets off, which scales every gradient down (docs/2026-remedies.md)."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.k, None


class PseudoInverseTie(nn.Module):
    """tie_mode='pit', pseudo-inverse tying (Gu et al. 2026, arXiv 2602.04556), all of it. The shared matrix is a
    memory U (n x d) kept orthonormal, and a learned SPD S = L L^T sits between U and the network on both sides:
    token i goes in as S^-1 u_i (`lift`), the head scores U S h (`forward`, then the tied head). Decoding an encoded
    token goes through U S S^-1 U^T = U U^T, the projection onto U's columns, whatever S has learned. The self term
    of (*) at init is d/sqrt(n) where n > d; where n <= d, U U^T = I and pit starts as a copier like plain tying
    (docs/2026-remedies.md). U and L are never decayed; U moves at the shared matrix's rate (--embed_lr), L at
    the head's (--head_lr: GPT.optimizer_groups)."""

    def __init__(self, d):
        super().__init__()
        # L lower triangular with a positive diagonal, kept as its strictly lower part and the log of its diagonal.
        self.lower = nn.Parameter(torch.zeros(d, d))
        self.log_diag = nn.Parameter(torch.zeros(d))

    @torch.no_grad()
    def init_weights(self, U):  # S = I; U orthonormal: columns where n > d, rows where n <= d (orthogonal_ of n x d)
        nn.init.zeros_(self.lower)
        nn.init.zeros_(self.log_diag)
        nn.init.orthogonal_(U)

    def cholesky(self):
        return torch.tril(self.lower, -1) + torch.diag(self.log_diag.exp())  # L, so that S = L L^T is SPD

    def lift(self, u):
        """Token vectors u (B, T, C) -> S^-1 u by two triangular solves (y L^T = u, then x L = y), no inverse."""
        L = self.cholesky()
        y = torch.linalg.solve_triangular(L.t(), u.reshape(-1, u.size(-1)), upper=True, left=False)
        return torch.linalg.solve_triangular(L, y, upper=False, left=False).view_as(u)

    def forward(self, h):
        L = self.cholesky()
        return (h @ L) @ L.t()  # S h, row-wise h @ L @ L^T: the tied head then scores U S h

    @torch.no_grad()
    def retract(self, U):
        """The optimizer moves U off its orthonormal frame; QR puts it back (R's signs keep Q nearest to U)."""
        tall = U.size(0) > U.size(1)
        Q, R = torch.linalg.qr((U if tall else U.t()).float())
        Q = Q * torch.where(torch.diagonal(R) < 0, -1.0, 1.0)
        U.copy_(Q if tall else Q.t())


@dataclass
class GPTConfig:
    vocab_size: int = 50257        # n: GPT-2's BPE vocabulary
    block_size: int = 1024         # longest context
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768              # d
    dropout: float = 0.0
    bias: bool = True              # biases in the blocks' Linears and LayerNorms (never in the head)
    init_std: float = 0.02         # sigma: std of every weight matrix at init, the shared one included
    tie_mode: str = 'tied'         # one of TIE_MODES
    emb_scale: bool = False        # multiply token embeddings by sqrt(d) at the input (Transformer, Gemma)
    zero_init_residual: bool = False  # zero the residual output projections: the premise of (*)
    shuffle_groups: int = 4        # g for tie_mode='shufflenet'
    gelu_approx: str = 'none'      # the MLP's GELU: 'none' is exact; 'tanh' is GPT-2's approximation ("gelu_new")
    input_grad_scale: float = 1.0  # k: the token lookup's gradient times k on the way back (ScaleGrad)
    pad_vocab_to: int = 1          # the head's matmul rounds its rows up to a multiple of this (head_matmul)
    head_init: str = 'normal'      # an untied head's init: 'normal', N(0, sigma^2); 'zero': every logit 0 at init

    def __post_init__(self):  # fail here, naming the key, rather than as a shape error deep inside a matmul
        for key in ('vocab_size', 'block_size', 'n_layer', 'n_head', 'n_embd', 'shuffle_groups', 'pad_vocab_to'):
            if isinstance(value := getattr(self, key), bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        for key, allowed in (('tie_mode', TIE_MODES), ('gelu_approx', ('none', 'tanh')), ('head_init', HEAD_INITS)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key}={getattr(self, key)!r} is not allowed; choose one of: {', '.join(allowed)}")
        problems = [(self.n_embd % self.n_head, f"n_embd={self.n_embd} must be divisible by n_head={self.n_head}"),
                    (self.tie_mode == 'shuffle' and self.n_embd % 2, f"tie_mode='shuffle' swaps two halves of the "
                     f"width, so n_embd must be even, got n_embd={self.n_embd}"),
                    (self.tie_mode == 'shufflenet' and self.n_embd % self.shuffle_groups, f"tie_mode='shufflenet' "
                     f"needs n_embd divisible by shuffle_groups, got n_embd={self.n_embd}, shuffle_groups="
                     f"{self.shuffle_groups}; allowed groups are the divisors of {self.n_embd}"),
                    (not 0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), got {self.dropout!r}"),
                    (self.head_init != 'normal' and self.tie_mode != 'untied', f"head_init={self.head_init!r} needs "
                     f"a head of its own (tie_mode='untied'), got tie_mode={self.tie_mode!r}, whose head is the token "
                     f"table (and --untie_at starts its head as a copy of the trained shared matrix)")]
        problems += [(not 0 < getattr(self, key) < math.inf, f"{key} must be a positive finite number, got "
                      f"{getattr(self, key)!r}") for key in ('init_std', 'input_grad_scale')]
        for failed, message in problems:
            if failed:
                raise ValueError(message)


# The settings of the weights, which a checkpoint records and a run builds its model from: every GPTConfig field
# but pad_vocab_to, a speed setting of the machine the model runs on.
MODEL_KEYS = tuple(field.name for field in fields(GPTConfig) if field.name != 'pad_vocab_to')


class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.config = config
        n, d = config.vocab_size, config.n_embd
        # pit's parameters first in parameters(), the order of the optimizer states that checkpoints hold
        self.pit = PseudoInverseTie(d) if config.tie_mode == 'pit' else None
        self.token_embedding_table = nn.Embedding(n, d)
        self.position_embedding_table = nn.Embedding(config.block_size, d)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(d, bias=config.bias)
        self.lm_head = nn.Linear(d, n, bias=False)  # no bias: an embedding has none, so it could not be shared
        if config.tie_mode == 'proj':
            self.tie_proj = nn.Linear(d, d, bias=False)
        if config.tie_mode == 'bert':
            self.bert_dense = nn.Linear(d, d)     # BERT's MLM head transform: dense -> GELU -> LayerNorm,
            self.bert_norm = nn.LayerNorm(d)      # with biases, as in BERT,
            self.output_bias = nn.Parameter(torch.zeros(n))  # plus the decoder bias it adds on purpose
        if TIE_MODES[config.tie_mode].shares:
            # THE line. One Parameter, two names: state_dict() lists both keys, parameters() yields it
            # once, and autograd adds the gradients from the input lookup and the output projection.
            self.lm_head.weight = self.token_embedding_table.weight
        self.init_weights()

    @torch.no_grad()
    def init_weights(self):
        """All initialisation, in one place. The order matters only for the shared matrix: it comes last."""
        cfg, sigma = self.config, self.config.init_std

        def gpt2_init(modules):  # GPT-2's init: every Linear N(0, sigma), biases zero, norms the identity
            for module in modules:
                if isinstance(module, nn.Linear):
                    nn.init.normal_(module.weight, mean=0.0, std=sigma)
                elif isinstance(module, nn.LayerNorm):
                    nn.init.ones_(module.weight)
                if isinstance(module, (nn.Linear, nn.LayerNorm)) and module.bias is not None:
                    nn.init.zeros_(module.bias)

        gpt2_init(list(self.blocks.modules()) + [self.ln_f])
        # Residual output projections. GPT-2 scales them by 1/sqrt(2*n_layer) so the residual stream does not grow
        # with depth; but then the branches dominate x at the final norm, dilute w_i, and the self term of (*) mostly
        # disappears. zero_init_residual makes every block the identity: the premise of (*), as in speed-run code.
        for block in self.blocks:
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                if cfg.zero_init_residual:
                    nn.init.zeros_(proj.weight)
                else:
                    nn.init.normal_(proj.weight, mean=0.0, std=sigma / math.sqrt(2 * cfg.n_layer))
        nn.init.normal_(self.position_embedding_table.weight, mean=0.0, std=sigma)
        if not self.is_tied:  # 'untied': a head matrix of its own, independent of W, so w_i . h is a cross term
            nn.init.normal_(self.lm_head.weight, mean=0.0, std=sigma)  # drawn either way: W's draw is the same
            if cfg.head_init == 'zero':  # nanochat's gpt.py, modded-nanogpt's train_gpt.py: the start is log n exactly;
                nn.init.zeros_(self.lm_head.weight)  # FOOTGUN: on step 1 only the head learns (dL/dh = W_head^T g = 0)
        if cfg.tie_mode == 'proj':  # orthogonal, so |P h| = sqrt(d): the other logits keep their N(0, d*sigma^2)
            nn.init.orthogonal_(self.tie_proj.weight)
        if cfg.tie_mode == 'bert':
            gpt2_init([self.bert_dense, self.bert_norm])
            nn.init.zeros_(self.output_bias)
        # The token embedding, which in every mode but 'untied' IS the head. FOOTGUN: the usual `self.apply(init_fn)`
        # visits this tensor twice, as an Embedding and as a Linear, and the last wins; here it is written once.
        # small_init: the self term of (*) is e^(d*std); std = log(n)/d makes it e^(log n) = n, as big as the other
        # n-1 tokens together: the loss starts near log 2n with emb_scale, near log n without (docs/initial-loss.md).
        std = math.log(cfg.vocab_size) / cfg.n_embd if cfg.tie_mode == 'small_init' else sigma
        if self.pit is not None:  # pit: S = I and U orthonormal
            self.pit.init_weights(self.token_embedding_table.weight)
        else:
            nn.init.normal_(self.token_embedding_table.weight, mean=0.0, std=std)

    @property
    def is_tied(self):
        return self.lm_head.weight is self.token_embedding_table.weight

    def untie(self):
        """--untie_at: the head gets its own Parameter, a copy of the shared matrix: the same logits, learning apart."""
        if not self.is_tied:
            raise ValueError(f"tie_mode={self.config.tie_mode!r}: the head is not tied, so it cannot be untied")
        self.lm_head.weight = nn.Parameter(self.token_embedding_table.weight.detach().clone())
        return self.lm_head.weight

    def after_optimizer_step(self):
        if self.pit is not None:  # the one mode with work here: U back onto its orthonormal frame
            self.pit.retract(self.token_embedding_table.weight)

    def head(self, h):
        """h (B, T, C) after ln_f, |h| ~ sqrt(C), to logits (B, T, vocab_size), each mode's way round the self term."""
        mode, C = self.config.tie_mode, h.size(-1)
        if mode == 'proj':
            # w_i . (P w_i), P random orthogonal, mixes different coordinates (Johnson-Lindenstrauss): mean 0
            h = self.tie_proj(h)
        elif mode == 'shuffle':
            # S[h] = h[d/2:] ++ h[:d/2]. Then S[w_i] . w_i = 2 * sum_k w_i[k] w_i[k + d/2] ~ 0: at init it is
            # as if W were split into two untied n x d/2 halves, one reading, one writing. No parameters.
            h = torch.cat((h[..., C // 2:], h[..., :C // 2]), dim=-1)
        elif mode == 'shufflenet':
            # ShuffleNet's channel shuffle (g, d/g) -> (d/g, g): the self term keeps (fixed points / d) of d*sigma
            g = self.config.shuffle_groups
            h = h.unflatten(-1, (g, C // g)).transpose(-1, -2).flatten(-2)
        elif mode == 'bert':
            # BERT: dense -> GELU -> LayerNorm re-mixes h at random, then an output bias (the one biased head here)
            h = self.bert_norm(F.gelu(self.bert_dense(h)))
            return self.head_matmul(h) + self.output_bias
        elif mode == 'pit':
            h = self.pit(h)  # S h, so that U S h decodes S^-1 u_i through U U^T (PseudoInverseTie)
        elif mode == 'logit_scale':
            # T5 v1.0 / Mesh-TensorFlow: the self term shrinks from d*sigma to sqrt(d)*sigma (0.55 at d = 768)
            h = h * C ** -0.5
        return self.head_matmul(h)  # 'untied' and 'small_init' act in init_weights; 'tied' shows the problem

    def head_matmul(self, h):
        # GPU kernels are faster at a multiple of 64 rows (GPT-2's 50,257 -> 50,304: 8 % on an H100): W gets zero
        # rows for this product alone and the extra logits are cut off, so everything else sees the n real ones.
        W = self.lm_head.weight
        padding = -W.size(0) % self.config.pad_vocab_to
        return F.linear(h, F.pad(W, (0, 0, 0, padding)))[..., :W.size(0)] if padding else self.lm_head(h)

    def forward(self, idx, targets=None, last_only=False):
        """idx (B, T) int64 -> logits (B, T, vocab_size) and the mean cross-entropy if targets (B, T) are given.
        last_only=True: the last position's logits only (for generation), and its loss, against targets[:, -1]."""
        B, T = idx.size()
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size={self.config.block_size}")
        pos = torch.arange(T, dtype=torch.long, device=idx.device)  # (T,)
        tok = self.token_embedding_table(idx)                        # (B, T, C)
        if self.config.input_grad_scale != 1.0:
            tok = ScaleGrad.apply(tok, self.config.input_grad_scale)
        if self.pit is not None:
            tok = self.pit.lift(tok)                                 # S^-1 u_i: the inverse of the head's S
        if self.config.emb_scale:
            # sqrt(d) makes |tok| ~ d*sigma dwarf the position embedding, so x ~ w_i again and the
            # self term of (*) comes back in full: scaling plus tying amplifies the problem.
            tok = tok * math.sqrt(self.config.n_embd)
        x = self.drop(tok + self.position_embedding_table(pos))     # (B, T, C)
        for block in self.blocks:
            x = block(x)
        h = self.ln_f(x)                                             # (B, T, C)
        if last_only:
            h = h[:, [-1], :]                                        # (B, 1, C)
            targets = None if targets is None else targets[:, [-1]]  # (B, 1): the loss of what was scored
        logits = self.head(h)                                        # (B, T, vocab_size)
        loss = None if targets is None else F.cross_entropy(
            logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    def num_params(self):  # the shared matrix counted once: parameters() yields a shared tensor once
        return sum(p.numel() for p in self.parameters())

    def optimizer_groups(self, weight_decay, muon=False):
        """Which optimizer and decay each parameter gets, as torch's param groups named for their roles, so that
        lib/optimizers.py can give each its own rate: 'embed' (the token table; when tied the shared matrix, there
        once), 'head' (an untied head or pit's S; empty while tied), 'matrices', 'gains', and with muon 'muon'.
        Decay on matrices only, not on biases and norm gains, nor on pit's U and S."""
        table, head = self.token_embedding_table.weight, self.lm_head.weight
        # Muon orthogonalises each update (Newton-Schulz), moving every direction of a matrix alike: meant for maps
        # between hidden states, the blocks' qkv, attention output and MLP matrices. A table row or a head row is
        # no such map; they stay on AdamW with the 1-D gains, as in nanochat and modded-nanogpt.
        hidden = [p for block in self.blocks for p in block.parameters() if p.dim() == 2] if muon else []
        # pit: S (its L), the head's transform in U S h, takes the head's rate (--head_lr): U is put back on its
        # orthonormal frame every step, so the logits' scale is S's to learn (docs/2026-remedies.md, "--tie_mode=pit")
        pit = [self.pit.lower, self.pit.log_diag] if self.pit is not None else []
        placed = [table, head, *hidden, *pit]
        rest = [p for p in self.parameters() if p.requires_grad and all(p is not q for q in placed)]
        decayed = [p for p in rest if p.dim() >= 2]
        ends = 0.0 if pit else weight_decay  # the table's and the head's: --ends_decay may change it (lib/optimizers)
        return [dict(params=[table], weight_decay=ends, role='embed'),
                dict(params=pit or ([] if self.is_tied else [head]), weight_decay=ends, role='head'),
                dict(params=decayed, weight_decay=weight_decay, role='matrices'),
                dict(params=[p for p in rest if all(p is not q for q in decayed)], weight_decay=0.0, role='gains'),
                *([dict(params=hidden, weight_decay=weight_decay, role='muon')] if muon else [])]

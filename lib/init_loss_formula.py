"""Equation (*) of docs/initial-loss.md, generalised to every tie mode: the loss a freshly initialised model
should start at. init_loss.py sets it beside the measured loss; ablate.py beside each run's first step."""

import math

import torch


def predicted_initial_loss(cfg, token_std=None, position_std=None):
    """Equation (*) of docs/initial-loss.md, generalised to what this model has at its input and head.

    Let t be the token embedding's std (token_std if given, else init_std, or log(n)/d under small_init), s the input
    scale (sqrt(d) with emb_scale, else 1) and p the position embedding's std (position_std if given, else
    sigma = init_std). The final norm sees x = s*w_i + p_pos and returns h with |h| = sqrt(d) along x. Then
        self term   a = w_i . h  = d*t * s / sqrt(s^2 + (p/t)^2)
        other terms z_k = w_k . h ~ N(0, v),  v = d * (std of the head's rows)^2
    and, the target being almost never the input token,
        loss ~ log( e^a + (n - 1) e^(v/2) ).
    The remedies change a and v:
        untied, proj, bert   a = 0 (a cross term), v = d*sigma^2
        untied, zero head    a = 0, v = 0: every logit is 0 and the loss is log n exactly
        shuffle              a = 0 (S[w_i] . w_i pairs different coordinates)
        shufflenet           a scaled by (fixed points of the shuffle) / d
        logit_scale          h scaled by d^-1/2: a and v both shrink (a/sqrt(d), v/d)
        pit                  S = I at init and U orthonormal, so t = |u_i|/sqrt(d) is fixed by the shape:
                             n > d: columns orthonormal, |u_i| = sqrt(d/n), t = 1/sqrt(n); the head U h
                               is an isometry, so sum_k z_k^2 = |h|^2 = d and v = d/n, as d t^2 gives;
                             n <= d: rows orthonormal, |u_i| = 1, t = 1/sqrt(d), and U U^T = I makes every
                               other token's logit u_k . h = sqrt(d) (u_k . p) / |x| exactly (u_k . u_i = 0),
                               so v = d p^2 / (s^2 + d p^2): a copier whose self term is ~ sqrt(d)
    This assumes identity blocks (zero_init_residual); with GPT-2's init the branches add to x
    and the table shows how far the model departs from it.

    token_std and position_std are for the rows with PyTorch's default init (default_init_stds): there t is no longer
    the sigma of the rest of the model, and p/t decides how much the position embedding dilutes the self term. Two
    things (*) leaves out. The mean over uniform targets includes the 1/n of positions whose target IS the input token,
    where the loss is ~0 instead of ~a, so a measurement sits about a/n below (*): 1.5 % at n = 65, nothing at
    n = 50257. And (n - 1) e^(v/2) is the mean of the other tokens' sum, which overstates its log once v is large
    (t = 1 makes v = d); at this table's shapes the rows with a large v are rows where the self term dominates, so it
    does not move them."""
    n, d, sigma = cfg.vocab_size, cfg.n_embd, cfg.init_std
    t = {'small_init': math.log(n) / d, 'pit': 1 / math.sqrt(max(n, d))}.get(cfg.tie_mode, sigma)
    t = t if token_std is None else token_std
    p = sigma if position_std is None else position_std
    s = math.sqrt(d) if cfg.emb_scale else 1.0
    a = d * t * s / math.sqrt(s ** 2 + (p / t) ** 2)
    v = d * t ** 2
    if cfg.tie_mode == 'pit' and n <= d:
        v = d * p ** 2 / (s ** 2 + d * p ** 2)
    if cfg.tie_mode in ('untied', 'proj', 'bert', 'shuffle'):
        a, v = 0.0, d * sigma ** 2 * (getattr(cfg, 'head_init', 'normal') == 'normal')
    elif cfg.tie_mode == 'shufflenet':
        g = cfg.shuffle_groups
        perm = torch.arange(d).view(g, d // g).t().flatten()
        a *= (perm == torch.arange(d)).sum().item() / d
    elif cfg.tie_mode == 'logit_scale':
        a, v = a / math.sqrt(d), v / d
    return float(torch.logaddexp(torch.tensor(a, dtype=torch.float64),
                                 torch.tensor(math.log(n - 1) + v / 2, dtype=torch.float64)))

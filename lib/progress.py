"""What a long command shows while it runs: a bar on a terminal, plain lines anywhere else, and the line that starts
a fresh train.py run. Elsewhere than a terminal (a file, `nohup`, a pipe, CI, a cluster job) a redrawn bar is one
enormous line of carriage returns, so train.py writes a line per logged iteration; ablate.py's grid
(lab/grid_runner.GridBar) a line per finished run and one on the grid's progress every so often."""

import math
import sys


def on_terminal():
    """True where stderr, the bar's stream, is a terminal that can redraw a bar."""
    return hasattr(sys.stderr, 'isatty') and sys.stderr.isatty()


class IterationLines:
    """train.py's progress where stderr is no terminal: at each logged iteration one line on stdout, the same
    numbers the bar shows, with the validation loss when an evaluation is new since the last line."""

    def __init__(self, total, initial, desc):
        self.total, self.n, self.desc, self.shown_val = total, initial, desc, None

    def update(self, n=1):
        self.n += n

    def set_postfix(self, shown, refresh=False):
        shown = dict(shown)
        val = shown.pop('val', None)
        parts = [f"{value} tokens/s" if key == 'tok_s' else f"{key} {value}" for key, value in shown.items()]
        if val is not None and val != self.shown_val:
            parts.append(f"val {val}")
            self.shown_val = val
        print(f"{self.desc}: iter {self.n}/{self.total}: " + ", ".join(parts), flush=True)

    def write(self, line):
        print(line, flush=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def training_progress(total, initial, desc, enabled):
    """The bar (on a terminal) or IterationLines (elsewhere) of a train.py run; neither where not enabled."""
    from tqdm import tqdm
    if enabled and not on_terminal():
        return IterationLines(total, initial, desc)
    return tqdm(total=total, initial=initial, disable=not enabled, dynamic_ncols=True, desc=desc)


def start_line(config, tie_mode, val_loss, probe, copying):
    """train.py's first line of a fresh run: its first evaluation beside what it means. A uniform guess scores log n,
    (*) predicts this mode's start (docs/initial-loss.md), and the copy probe says whether the head copies its input
    (copying: lib/probes.copying_share's, None where it does not), as plain tying's does."""
    from lib.init_loss_formula import predicted_initial_loss  # here, not above: both import torch, and prepare.py
    from model import TIE_MODES                                # (through lib/corpus.py) must start without it
    why = "the head copies its input, the current token scoring far above every other" if copying is not None \
        else TIE_MODES[tie_mode].what
    return (f"start: val loss {val_loss:.2f} against log n = {math.log(config.vocab_size):.2f} for a uniform guess; "
            f"(*) predicts {predicted_initial_loss(config):.2f} for {tie_mode}: {why}; {100 * probe['copy_prob']:.0f} % "
            f"of the probability on the current token, which comes next {100 * probe['repeat_rate']:.0f} % of the time")


def say(bar, line):
    (bar.write if hasattr(bar, 'write') else print)(line)

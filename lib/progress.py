"""What a long command shows while it runs. On a terminal: a tqdm bar, redrawn in place. Anywhere else (output
sent to a file, `nohup`, a pipe, CI, a cluster job): plain lines, since a redrawn bar there is one enormous line
of carriage returns that no one can read or grep. train.py writes a line per logged iteration; ablate.py's grid
(lab/grid_runner.GridBar) a line per finished run and one on the grid's progress every so often."""

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


def say(bar, line):
    (bar.write if hasattr(bar, 'write') else print)(line)

"""What a long command shows while it runs. On a terminal: a tqdm bar, redrawn in place. Anywhere else (output
sent to a file, `nohup`, a pipe, CI, a cluster job): plain lines, since a redrawn bar there is one enormous line
of carriage returns that no one can read or grep. train.py writes a line per logged iteration; ablate.py a line
per finished run and a line on the grid's progress every PROGRESS_LINE_EVERY_S."""

import sys
import time

PROGRESS_LINE_EVERY_S = 60  # ablate.py, not on a terminal: how often a line on the grid's progress is written


def on_terminal():
    """True where stderr, the bar's stream, is a terminal that can redraw a bar."""
    return hasattr(sys.stderr, 'isatty') and sys.stderr.isatty()


def duration(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


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


class GridBar:
    """ablate.py's progress over a grid: runs done of all, iterations done of all, elapsed and time left. On a
    terminal one bar (tqdm's estimate from the rate of all runs together), which lines printed through it leave
    whole; elsewhere the lines alone, and every PROGRESS_LINE_EVERY_S one on the grid's progress."""

    def __init__(self, runs_total, runs_done, iters_total, iters_done, enabled):
        from tqdm import tqdm
        self.tqdm = tqdm
        self.lines = enabled and not on_terminal()
        self.bar = tqdm(total=iters_total, initial=iters_done, disable=not enabled or self.lines, dynamic_ncols=True,
                        unit='it', smoothing=0.05, desc=f"runs {runs_done}/{runs_total}")
        self.runs_total, self.runs_done, self.running = runs_total, runs_done, 0
        self.iters_total, self.iters_done, self.iters_at_start = iters_total, iters_done, iters_done
        self.started = self.last_line = time.monotonic()
        self.describe()

    def describe(self, running=None):
        self.running = self.running if running is None else running
        more = f", {self.running} running" if self.running else ""
        self.bar.set_description(f"runs {self.runs_done}/{self.runs_total}{more}", refresh=False)
        self.bar.refresh()

    def update(self, n=1):
        self.bar.update(n)
        self.iters_done += n
        if self.lines and time.monotonic() - self.last_line >= PROGRESS_LINE_EVERY_S:
            self.progress_line()

    def progress_line(self):
        """runs and iterations done, elapsed and (from the rate of this command's iterations) time left."""
        self.last_line = now = time.monotonic()
        rate = (self.iters_done - self.iters_at_start) / max(now - self.started, 1e-9)
        left = f", about {duration((self.iters_total - self.iters_done) / rate)} left" if rate > 0 else ""
        running = f", {self.running} running" if self.running else ""
        self.write(f"grid: {self.runs_done}/{self.runs_total} runs done{running}, {self.iters_done:,}/"
                   f"{self.iters_total:,} iterations ({100 * self.iters_done / max(1, self.iters_total):.0f} %), "
                   f"{duration(now - self.started)} elapsed{left}")

    def run_ended(self):
        self.runs_done += 1
        self.describe()

    def write(self, line):
        if self.lines:
            print(line, flush=True)
        else:
            self.tqdm.write(line)

    def close(self):
        self.bar.close()


def say(bar, line):
    (bar.write if hasattr(bar, 'write') else print)(line)

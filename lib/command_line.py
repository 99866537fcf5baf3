"""The command line every script shares: --key=value options and config files, the error type
for user mistakes, the wrapper that prints one as a single line with exit code 2, and Ctrl-C's rules."""

import ast
import contextlib
import difflib
import io
import os
import signal
import sys
import threading
import tokenize
import traceback
import types


class UserError(Exception):
    """A mistake the user can fix. Scripts print its message as one line and exit with code 2."""


def run_cli(main):
    """Call main(argv) the way every script's `if __name__ == "__main__"` does."""
    for stream in (sys.stdout, sys.stderr):  # a path in bytes that are not UTF-8 is shown escaped, never a traceback
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")
    owned = ctrl_c_once() is not None
    try:
        sys.exit(main(sys.argv[1:]))
    except UserError as e:
        # One line, so it reads well in a terminal and greps well in a log.
        print("error: " + " ".join(str(e).split("\n")), file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as e:
        ending()  # already, where a Ctrl-C or a saved run raised it; before the print either way, which one would cut
        # 130 = 128 + SIGINT, what a shell reports for a program stopped by Ctrl-C. A script that
        # saved its work says so in the exception's message.
        print(str(e) or "interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`python init_loss.py --json | head -3`): not an error worth a
        # traceback. Point stdout at /dev/null so the interpreter's final flush fails quietly too.
        _stdout_dropped()
        sys.exit(1)
    finally:
        if owned:  # the interpreter's exit follows, joining threads and freeing torch: nothing a Ctrl-C could stop
            ending()
        # What is still buffered goes now: a reader gone meanwhile (a Ctrl-C stops `| head` too) would fail the
        # interpreter's own flush, which prints 'Exception ignored' and turns any exit code into 120.
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _stdout_dropped()


def _stdout_dropped():
    with contextlib.suppress(AttributeError, OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


# Set once a run is ending; a handler is then never put back over the ignored SIGINT (put_back).
_ENDING = []


def ctrl_c_once():
    """Python's Ctrl-C raises KeyboardInterrupt at every press: a second one, a moment after the first, lands in the
    first one's cleanup (workers being stopped, a checkpoint's temp file removed) or in the interpreter's exit, which
    print Python's own traceback or die by the signal. From here on in this process only the first counts: it raises,
    and the run is ending (ending()). Returns the handler it replaced; off the main thread, or where SIGINT is not
    Python's default (ignored, as under nohup, or another's), it changes nothing and returns None."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        return None
    _ENDING.clear()
    return signal.signal(signal.SIGINT, _first_ctrl_c_only)


def _first_ctrl_c_only(signum, frame):
    if not _ENDING:
        ending()
        raise KeyboardInterrupt


def ending():
    """The run is ending: stopped by Ctrl-C and saved (or stopping at once), or done. A later Ctrl-C has nothing left
    to stop and would only cut the ending short, so from here on SIGINT is ignored in this process. (A test that
    calls run_cli in its own process puts its handler back itself.)"""
    _ENDING.append(True)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def put_back(number, handler):
    """signal.signal(number, handler) for a handler held only for a while (train.py's Ctrl-C-saves, ablate.py's
    grid), except over the ignored SIGINT of a run that is ending."""
    if not (_ENDING and number == signal.SIGINT):
        signal.signal(number, handler)


@contextlib.contextmanager
def sigint_blocked():
    """SIGINT blocked in this thread for the block, so that a process started inside begins with it blocked (a mask
    outlives fork and exec): a terminal's Ctrl-C, sent to the whole job, is then the parent's alone to answer, not a
    traceback from a child mid-import. multiprocessing's resource tracker, started with the first child, unblocks
    SIGINT on its way out instead of putting the mask back, so it is started before the block."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks
        yield
        return
    from multiprocessing import resource_tracker
    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


_TYPE_NAMES = {bool: "a boolean (true/false)", int: "an integer", float: "a number", str: "a string"}


def _from_text(text, kind):
    """Parse command-line text as a value of type kind; any exception means it is not one."""
    if kind is bool:
        return {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}[text.lower()]
    if kind is int:
        try:
            return int(text)
        except ValueError:
            return float(text)  # "1e3" is a common way to write 1000; fractions are refused below
    if kind is float:
        return float(text)
    return ast.literal_eval(text)


def coerce(value, default, label):
    """Convert value (text from the command line, an object from a config file or a checkpoint) to the type of
    default."""
    if default is None:
        if isinstance(value, str):
            with contextlib.suppress(Exception):  # text that is no Python literal stays text
                return ast.literal_eval(value)
        return value
    kind = type(default)
    bad = UserError(f"{label} expects {_TYPE_NAMES.get(kind, 'a ' + kind.__name__)}, got {value!r}")
    if isinstance(value, str) and kind is not str:
        try:
            value = _from_text(value.strip(), kind)
        except Exception:
            raise bad from None
    if isinstance(value, bool) != (kind is bool):  # bool is an int subclass, but True is no iteration count
        raise bad
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if kind is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, kind):
        raise bad
    return value


def _unknown_key(key, defaults, spelling, where=""):
    matches = difflib.get_close_matches(key.replace("-", "_"), list(defaults), n=1)
    hint = f"; did you mean {spelling.format(matches[0])}?" if matches else ""
    return UserError(f"unknown key {spelling.format(key)}{where}{hint} (--help lists all keys)")


def set_setting(config, key, value, defaults, choices, label):
    config[key] = coerce(value, defaults[key], label)
    if (allowed := choices.get(key)) is not None and config[key] not in allowed:
        raise UserError(f"{label}={config[key]!r} is not allowed; choose one of: {', '.join(map(str, allowed))}")


def _read_config_file(path):
    """Run a config file in a fresh namespace and return the names it assigns."""
    if not path.endswith(".py"):
        raise UserError(f"'{path}' is not a config file: expected a .py file or --key=value")
    if not os.path.isfile(path):
        raise UserError(f"config file not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        code = compile(source, path, "exec")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read config file {path}: {e}") from None
    except SyntaxError as e:
        raise UserError(f"{path} line {e.lineno}: {e.msg}") from None
    namespace = {}
    try:
        exec(code, namespace)
    except Exception as e:
        lines = [frame.lineno for frame in traceback.extract_tb(e.__traceback__) if frame.filename == path]
        where = f" line {lines[-1]}" if lines else ""
        raise UserError(f"{path}{where}: {type(e).__name__}: {e}") from None
    # Names bound by import statements are tools of the file, not settings.
    imported = {(alias.asname or alias.name).split(".")[0] for node in ast.walk(ast.parse(source))
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    return {name: value for name, value in namespace.items()
            if not name.startswith("_") and name not in imported and not isinstance(value, types.ModuleType)}


# The one name a config file may assign that is no setting: the config whose settings it starts from.
BASE_KEY = "base_config"


def _config_settings(path, chain=()):
    """[(file, name, value)] of a config file in the order they apply: those of the config it names as
    base_config first (and its base's before those), then its own, so that a file only writes what it
    changes. base_config is a path relative to the naming file's folder, as an #include's is, so that a
    config works from whatever folder a script is run in. chain: the files that led here, to refuse a loop."""
    settings = _read_config_file(path)
    base = settings.pop(BASE_KEY, None)
    if base is None:
        return [(path, name, value) for name, value in settings.items()]
    if not isinstance(base, str) or not base.endswith(".py"):
        raise UserError(f"{BASE_KEY} in {path} must name a .py config file, such as 'recipe_bpe.py', got {base!r}")
    base_path = os.path.normpath(os.path.join(os.path.dirname(path), base))
    if not os.path.isfile(base_path):
        raise UserError(f"{BASE_KEY} in {path} names {base!r}, but {base_path} is not a file")
    chain = (*chain, path)
    if any(os.path.realpath(base_path) == os.path.realpath(earlier) for earlier in chain):
        raise UserError(f"{BASE_KEY} goes round in a circle: {' -> '.join([*chain, base_path])}")
    return _config_settings(base_path, chain) + [(path, name, value) for name, value in settings.items()]


def key_meanings(*paths):
    """{key: its one-line meaning}: the comment beside each key of the DEFAULTS that the files at paths write
    (`DEFAULTS = dict(...)` and `DEFAULTS.update(...)`), with the comment lines that continue it in the same
    column. --help reads them from where the defaults are written, so the two cannot drift apart. The first
    file that has a key wins (a script's own, then train.py's for the keys it takes from there)."""
    meanings = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        comments = {}  # line -> (column, text, the line holds nothing else)
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                row, col = token.start
                comments[row] = (col, token.string.lstrip("#").strip(), not token.line[:col].strip())
        for node in ast.walk(ast.parse(source)):
            call = getattr(node, "value", None)
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(getattr(call, "func", None), "value", None)
            if not isinstance(call, ast.Call) or getattr(target, "id", None) != "DEFAULTS":
                continue
            for keyword in call.keywords:
                row = keyword.value.end_lineno
                if keyword.arg is None or keyword.arg in meanings or row not in comments or comments[row][2]:
                    continue
                col, words = comments[row][0], [comments[row][1]]
                while row + 1 in comments and comments[row + 1][2] and comments[row + 1][0] == col:
                    row += 1
                    words.append(comments[row][1])
                meanings[keyword.arg] = " ".join(words)
    return meanings


def _print_help(defaults, choices):
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "script.py"
    print(f"usage: python {script} [config/FILE.py ...] [--key=value ...]")
    main = sys.modules.get("__main__")
    if doc := getattr(main, "__doc__", None):
        print(doc.strip().split("\n\n")[0])
    # The meanings from the DEFAULTS of the script's own file, then of the scripts it takes keys from.
    own = getattr(main, "__file__", None)
    paths = [own] + [module.__file__ for name, module in list(sys.modules.items())
                     if name in ("train", "ablate", "bench") and getattr(module, "__file__", None) not in (None, own)]
    meanings = key_meanings(*[path for path in paths if path and path.endswith(".py") and os.path.isfile(path)])
    print("keys (defaults shown):")
    for key, default in defaults.items():
        shown = default if isinstance(default, str) and default.isprintable() and default else repr(default)
        meaning = meanings.get(key, "")
        if key in choices:
            meaning += f"{'; ' if meaning else ''}one of: {', '.join(map(str, choices[key]))}"
        line = f"  --{key}={shown}"
        print(f"{line:<36} {meaning}" if meaning else line)


def check_seed(seed, key='seed'):
    """torch takes seeds from -2**63 to 2**64 - 1 (a larger one is a ValueError deep in a generator); train.py
    adds small offsets to its seed, so below 2**63 leaves room."""
    if not -2 ** 63 <= seed < 2 ** 63:
        raise UserError(f"--{key} must be an integer from -2**63 to 2**63 - 1, got {seed}")


class Settings(dict):
    """parse_config's result: the settings, and which keys the user gave (in a config file or as --key=value), so that
    a value typed equal to its default can be told from one left out: a resume takes the checkpoint's value for the
    second, never for the first. copy() keeps both."""

    def __init__(self, values, given=()):
        super().__init__(values)
        self.given = frozenset(given)

    def copy(self):
        return Settings(self, self.given)


def given_keys(cfg, defaults):
    """The keys the user gave: what parse_config recorded; for a plain dict (a caller of train.train), those whose
    value is not their default."""
    return cfg.given if isinstance(cfg, Settings) else {key for key in defaults if cfg.get(key) != defaults[key]}


def parse_config(defaults, argv, choices=None):
    """A new dict (Settings: it also knows which keys were given): defaults, then each config file in argv (after the
    config it names as base_config, if any), then each --key=value in argv. Values take the type of their default; a
    None default takes a Python literal or plain text. Every mistake (unknown key, wrong type, value outside choices)
    raises UserError."""
    choices = choices or {}
    if "--help" in argv or "-h" in argv:
        _print_help(defaults, choices)
        sys.exit(0)
    config, given, seen_override = dict(defaults), set(), False
    for arg in argv:
        if not arg.startswith("-"):
            if seen_override:
                raise UserError(f"unexpected argument '{arg}' after --key=value options; config files come first")
            for source, name, value in _config_settings(arg):
                if name not in defaults:
                    raise _unknown_key(name, defaults, "'{}'", f" in {source}")
                set_setting(config, name, value, defaults, choices, f"{name} in {source}")
                given.add(name)
            continue
        if not arg.startswith("--") or arg == "--" or arg.startswith("---"):
            raise UserError(f"unexpected argument '{arg}'; options look like --key=value")
        seen_override = True
        key, has_value, value = arg[2:].partition("=")
        if key not in defaults:
            raise _unknown_key(key, defaults, "--{}")
        if not has_value:
            if not isinstance(defaults[key], bool):
                raise UserError(f"--{key} needs a value: --{key}=VALUE")
            value = "true"
        set_setting(config, key, value, defaults, choices, f"--{key}")
        given.add(key)
    return Settings(config, given)


def parse_modes(text, key, allowed, accepts=lambda name: False, more=''):
    """A comma-separated list of tie modes such as --modes=tied,shuffle, in order, each mode once;
    an empty list or a mode outside allowed (model.TIE_MODES) that accepts() does not take either
    raises UserError listing them (and more, the words for what accepts() takes)."""
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in allowed and not accepts(name)]
    if unknown or not names:
        raise UserError(f"--{key} has {', '.join(map(repr, unknown)) or 'no modes'}; "
                        f"choose from: {', '.join(allowed)}{more} (comma separated)")
    return names

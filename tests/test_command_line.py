"""The command line every script shares: --key=value, config files, run_cli's one-line errors."""
import importlib
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO_ROOT, run_in_process
from lib import command_line
from lib.command_line import UserError, check_seed, parse_config, run_cli

DEFAULTS = dict(
    learning_rate=6e-4,
    max_iters=5000,
    compile=True,
    out_dir="out",
    seed=None,
    tie_mode="tied",
)
CHOICES = dict(tie_mode=("untied", "tied", "small_init"))


def parse(*argv):
    return parse_config(DEFAULTS, list(argv), CHOICES)


def error_of(*argv):
    with pytest.raises(UserError) as info:
        parse(*argv)
    return str(info.value)


# -----------------------------------------------------------------------------
# command-line values

def test_defaults_are_returned_as_a_new_dict():
    config = parse("--max_iters=10")
    assert config["max_iters"] == 10
    assert DEFAULTS["max_iters"] == 5000
    assert parse() == DEFAULTS and parse() is not DEFAULTS


def test_float_key_accepts_int_and_exponent():
    assert parse("--learning_rate=3")["learning_rate"] == 3.0
    assert type(parse("--learning_rate=3")["learning_rate"]) is float
    assert parse("--learning_rate=6e-4")["learning_rate"] == 6e-4


@pytest.mark.parametrize("text, expected", [("true", True), ("False", False), ("1", True), ("0", False),
                                            ("YES", True), ("no", False)])
def test_bool_words(text, expected):
    assert parse(f"--compile={text}")["compile"] is expected


def test_bare_flag_means_true_for_bool_only():
    assert parse("--compile=false", "--compile")["compile"] is True
    assert "--max_iters needs a value" in error_of("--max_iters")


def test_int_forms():
    assert parse("--max_iters=1_000")["max_iters"] == 1000
    value = parse("--max_iters=1e3")["max_iters"]
    assert value == 1000 and type(value) is int


@pytest.mark.parametrize("argv, message", [
    ("--max_iters=1.5", "--max_iters expects an integer, got '1.5'"),
    ("--max_iters=None", "--max_iters expects an integer, got 'None'"),
    ("--learning_rate=fast", "--learning_rate expects a number, got 'fast'"),
    ("--compile=maybe", "--compile expects a boolean (true/false), got 'maybe'"),
])
def test_wrong_type_names_key_and_type(argv, message):
    assert error_of(argv) == message


def test_none_default_takes_literal_text_or_none():
    assert parse("--seed=1337")["seed"] == 1337
    assert parse("--seed=hello")["seed"] == "hello"
    assert parse("--seed='42'")["seed"] == "42"
    assert parse("--seed=1337", "--seed=None")["seed"] is None


def test_value_may_contain_equals_sign():
    assert parse("--out_dir=a=b=c")["out_dir"] == "a=b=c"
    assert parse("--out_dir=")["out_dir"] == ""


def test_unknown_key_is_named_with_suggestion_and_help_hint():
    message = error_of("--max_iter=10")
    assert "--max_iter" in message and "did you mean --max_iters?" in message and "--help" in message
    assert "did you mean" not in error_of("--zzzz=1")


def test_choices_list_allowed_values():
    assert parse("--tie_mode=untied")["tie_mode"] == "untied"
    assert error_of("--tie_mode=foo") == "--tie_mode='foo' is not allowed; choose one of: untied, tied, small_init"


@pytest.mark.parametrize("argv", [["-x"], ["-max_iters=3"], ["--"], ["--max_iters=3", "config.py"]])
def test_malformed_or_misplaced_arguments(argv):
    with pytest.raises(UserError):
        parse(*argv)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_keys_and_exits_zero(flag, capsys):
    with pytest.raises(SystemExit) as info:
        parse("--max_iters=oops", flag)
    assert info.value.code == 0
    out = capsys.readouterr().out
    for key in DEFAULTS:
        assert f"--{key}=" in out
    assert "--max_iters=5000" in out and "untied, tied, small_init" in out


# -----------------------------------------------------------------------------
# config files

def write(path, text):
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def test_config_file_then_overrides(tmp_path):
    config_file = write(tmp_path / "c.py", """
        import math
        from os import path as _p
        _scratch = 3
        learning_rate = 1           # an int for a float key
        max_iters = 2 * 1000
        seed = math.floor(7.5)
    """)
    config = parse(config_file, "--max_iters=7")
    assert config["learning_rate"] == 1.0 and type(config["learning_rate"]) is float
    assert config["max_iters"] == 7  # the command line wins over the file
    assert config["seed"] == 7


def test_config_file_misspelt_key(tmp_path):
    config_file = write(tmp_path / "x.py", "lerning_rate = 1e-3\n")
    message = error_of(config_file)
    assert message.startswith(f"unknown key 'lerning_rate' in {config_file}; did you mean 'learning_rate'?")


def test_config_file_wrong_type_and_choice(tmp_path):
    assert "max_iters in" in error_of(write(tmp_path / "a.py", "max_iters = 1.5\n"))
    assert "expects an integer" in error_of(write(tmp_path / "b.py", "max_iters = None\n"))
    assert "choose one of" in error_of(write(tmp_path / "c.py", "tie_mode = 'foo'\n"))


def test_config_file_problems_are_user_errors(tmp_path):
    assert "not found" in error_of(str(tmp_path / "missing.py"))
    assert "notes.txt" in error_of(str(tmp_path / "notes.txt"))
    message = error_of(write(tmp_path / "broken.py", "max_iters = (\n"))
    assert "broken.py line" in message
    message = error_of(write(tmp_path / "fails.py", "x = 1\nmax_iters = undefined_name\n"))
    assert "fails.py line 2" in message and "NameError" in message


def test_config_takes_its_base_configs_values_and_changes_only_its_own(tmp_path, monkeypatch):
    (tmp_path / "recipes").mkdir()
    write(tmp_path / "recipes" / "root.py", "learning_rate = 1e-2\nmax_iters = 100\ntie_mode = 'untied'\n")
    write(tmp_path / "recipes" / "recipe.py", "base_config = 'root.py'\nmax_iters = 200\nout_dir = 'recipe'\n")
    experiment = write(tmp_path / "experiment.py", "base_config = 'recipes/recipe.py'\nmax_iters = 300\n")
    monkeypatch.chdir(tmp_path / "recipes")  # a base is found beside the file that names it, not in the cwd
    config = parse(experiment)
    assert config["learning_rate"] == 1e-2 and config["tie_mode"] == "untied"  # from the base's base
    assert config["out_dir"] == "recipe"                                      # from the base
    assert config["max_iters"] == 300                                          # the file's own wins over both
    assert "base_config" not in config
    assert parse(experiment, "--max_iters=7")["max_iters"] == 7  # and the command line over the file
    assert parse(str(tmp_path / "recipes" / "recipe.py"))["max_iters"] == 200  # the base is unchanged by it


def test_config_base_problems_are_one_line_errors_naming_the_files(tmp_path):
    missing = write(tmp_path / "a.py", "base_config = 'recipe_bpe.py'\nmax_iters = 3\n")
    message = error_of(missing)
    assert message == f"base_config in {missing} names 'recipe_bpe.py', but {tmp_path / 'recipe_bpe.py'} is not a file"
    write(tmp_path / "loop1.py", "base_config = 'loop2.py'\n")
    write(tmp_path / "loop2.py", "base_config = 'loop1.py'\n")
    message = error_of(str(tmp_path / "loop1.py"))
    assert message.startswith("base_config goes round in a circle: ") and message.count("loop1.py") == 2
    assert "circle" in error_of(write(tmp_path / "self.py", "base_config = 'self.py'\n"))
    assert "must name a .py config file" in error_of(write(tmp_path / "bad.py", "base_config = 3\n"))
    # a mistake in the base is reported in the base, not in the file that named it
    write(tmp_path / "typo.py", "lerning_rate = 1e-3\n")
    message = error_of(write(tmp_path / "child.py", "base_config = 'typo.py'\n"))
    assert message.startswith(f"unknown key 'lerning_rate' in {tmp_path / 'typo.py'}")
    assert all("\n" not in error_of(str(tmp_path / name)) for name in ("a.py", "loop1.py", "child.py"))


# -----------------------------------------------------------------------------
# run_cli

SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from lib.command_line import UserError, run_cli

def main(argv):
    if argv == ["user"]:
        raise UserError("bad value\\nfor --x")
    if argv == ["interrupt"]:
        raise KeyboardInterrupt
    print("ok", argv)

if __name__ == "__main__":
    run_cli(main)
"""


@pytest.mark.parametrize("arg, code, stderr", [("user", 2, "error: bad value for --x\n"),
                                               ("interrupt", 130, "interrupted\n"),
                                               ("fine", 0, "")])
def test_run_cli_exit_codes_without_traceback(tmp_path, arg, code, stderr):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(root=root))
    result = subprocess.run([sys.executable, str(script), arg], capture_output=True, text=True, timeout=60)
    assert result.returncode == code
    assert result.stderr == stderr


def test_run_cli_lets_bugs_through(monkeypatch):
    def main(argv):
        raise ZeroDivisionError
    monkeypatch.setattr(sys, "argv", ["script.py"])
    with pytest.raises(ZeroDivisionError):
        run_cli(main)


@pytest.mark.parametrize("seed, ok", [(0, True), (-1, True), (2 ** 63 - 1, True), (-2 ** 63, True), (2 ** 63, False),
                                      (2 ** 64, False), (-2 ** 63 - 1, False)])
def test_check_seed_allows_what_torch_takes_with_room_for_offsets(seed, ok):
    import torch
    if ok:
        check_seed(seed)
        torch.Generator().manual_seed(seed + 10_000)  # train.py's evaluation generator: still a seed torch takes
    else:
        with pytest.raises(UserError, match=r"--seed must be an integer from -2\*\*63 to 2\*\*63 - 1, got "):
            check_seed(seed)


def test_a_closed_pipe_ends_the_script_without_a_traceback(tmp_path):
    # `python init_loss.py --json | head -1`: the reader leaves early. The script writes far more
    # than a pipe buffer holds, so it must meet the closed pipe.
    script = tmp_path / "chatty.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r})
        from lib.command_line import run_cli
        def main(argv):
            for i in range(1_000_000):
                print("{{\\"row\\": %d}}" % i)
        run_cli(main)
    """))
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = process.stdout.readline()
    process.stdout.close()
    stderr = process.communicate(timeout=120)[1].decode()
    assert first.startswith(b"{")
    assert process.returncode == 1
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


SCRIPTS = ('train', 'ablate', 'bench', 'sample', 'prepare', 'init_loss', 'export')


@pytest.mark.parametrize('script', SCRIPTS)
def test_every_key_of_every_script_has_a_meaning_beside_its_default(script):
    module = importlib.import_module(script)
    sources = [os.path.join(REPO_ROOT, f'{script}.py')] + ([os.path.join(REPO_ROOT, 'train.py')]
                                                          if script in ('ablate', 'bench') else [])
    meanings = command_line.key_meanings(*sources)
    missing = [key for key in module.DEFAULTS if not meanings.get(key)]
    assert not missing, f"{script}.py: keys without a comment beside their default: {missing}"


def test_help_shows_each_keys_meaning_from_where_its_default_is_written():
    result = run_in_process('ablate.py', '--help')
    assert result.returncode == 0
    lines = {line.split('=', 1)[0].strip(): line for line in result.stdout.splitlines() if line.startswith('  --')}
    # ablate's own key, from ablate.py's DEFAULTS.update
    assert 'runs side by side, each a process with its share of the cores' in lines['--jobs']
    # a key ablate takes from train.py, with its continuation line and its choices
    assert "gpt2-medium, gpt2-large" not in result.stdout  # init_from is decided by ablate.py, not offered
    assert 'adamw; or muon' in lines['--optimizer'] and '(model.GPT.optimizer_groups)' in lines['--optimizer']
    assert lines['--optimizer'].endswith('one of: adamw, muon')
    assert lines['--max_iters'].split(None, 1)[1] == 'optimizer steps in all'


def as_a_terminal_starts_it():
    """In a child before exec: SIGINT at its default and unblocked, as a shell starts a program, whatever this pytest
    worker holds (a mask outlives fork and exec, and a Ctrl-C sent to a child that starts with SIGINT blocked stays
    pending: the child would sleep through it)."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_only_the_first_ctrl_c_counts_the_rest_of_the_run_is_its_ending(tmp_path):
    """Ctrl-C pressed again while the first one's cleanup runs, and again as the interpreter exits (where Python
    itself would print 'Exception ignored ... KeyboardInterrupt'): both cleanups finish, one line, exit code 130."""
    import signal
    import time
    script = tmp_path / "slow_to_stop.py"
    script.write_text(textwrap.dedent(f"""
        import atexit, os, sys, time
        sys.path.insert(0, {REPO_ROOT!r})
        from lib.command_line import run_cli
        def mark(name):
            open(os.path.join({str(tmp_path)!r}, name), "w").close()
        def slow_exit():
            mark("exiting")
            time.sleep(1)
            mark("exited")
        def main(argv):
            atexit.register(slow_exit)
            try:  # "ready" inside: a Ctrl-C landing as the marker is written is then one the try catches
                mark("ready")
                time.sleep(60)
            finally:
                mark("cleaning")
                time.sleep(1)
                mark("cleaned")
        run_cli(main)
    """))
    process = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True,
                               preexec_fn=as_a_terminal_starts_it)
    try:
        for marker in ("ready", "cleaning", "exiting"):
            deadline = time.monotonic() + 30
            while not (tmp_path / marker).exists():
                assert time.monotonic() < deadline and process.poll() is None, marker
                time.sleep(0.01)
            process.send_signal(signal.SIGINT)
        stderr = process.communicate(timeout=30)[1]
    finally:
        process.kill()
    assert (tmp_path / "cleaned").exists() and (tmp_path / "exited").exists()
    assert process.returncode == 130 and stderr == "interrupted\n", stderr


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads a process's signal mask in /proc")
def test_the_first_process_started_with_sigint_blocked_starts_with_it_blocked(tmp_path):
    """sigint_blocked around a process's start: the new process begins with SIGINT blocked, the first one too,
    whose start also starts multiprocessing's resource tracker, which unblocks SIGINT on its way out."""
    script = tmp_path / "children.py"
    script.write_text(textwrap.dedent(f"""
        import multiprocessing, sys
        sys.path.insert(0, {REPO_ROOT!r})
        from lib.command_line import sigint_blocked

        def report(conn):  # bit 1 of SigBlk is SIGINT (signal 2)
            status = open("/proc/self/status").read()
            conn.send(int(status.split("SigBlk:")[1].split()[0], 16) >> 1 & 1)

        if __name__ == "__main__":
            context = multiprocessing.get_context("spawn")
            for _ in range(2):
                ours, theirs = context.Pipe()
                with sigint_blocked():
                    child = context.Process(target=report, args=(theirs,))
                    child.start()
                print(ours.recv())
                child.join()
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "1"], result.stdout


@pytest.mark.parametrize("ending", ["KeyboardInterrupt", "UserError('bad value')", "None"])
def test_a_reader_gone_before_the_exit_changes_neither_the_exit_code_nor_the_one_line(tmp_path, ending):
    """`python prepare.py ... | head -1` and a Ctrl-C: the terminal stops the reader too, and what the script
    printed is still in its stdout buffer. Flushed into the closed pipe at the interpreter's exit it raised
    BrokenPipeError there: 'Exception ignored' on stderr and exit code 120 in place of the script's own."""
    script = tmp_path / "prints_then_ends.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {REPO_ROOT!r})
        from lib.command_line import UserError, run_cli
        def main(argv):
            print("a line the reader never reads")
            sys.stdin.read()  # the reader is gone once this returns: see below
            raise {ending} if {ending!r} != "None" else SystemExit(0)
        run_cli(main)
    """))
    read, write = os.pipe()
    os.close(read)  # no reader: every write to the pipe fails
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe's stdout, buffered as usual
    process = subprocess.run([sys.executable, str(script)], stdout=write, stderr=subprocess.PIPE, input="",
                             text=True, timeout=60, env=env)
    os.close(write)
    expected = {"KeyboardInterrupt": (130, "interrupted\n"), "UserError('bad value')": (2, "error: bad value\n"),
                "None": (0, "")}[ending]
    assert (process.returncode, process.stderr) == expected, process.stderr

"""
Small helpers shared by the top-level scripts: the error type for user mistakes and the
wrapper that reports them without a traceback, the --key=value configurator, atomic file
writes, and the choice of device and dtype.

torch is imported inside the functions that need it, so that scripts which never touch a
model (prepare.py, --help) start quickly.
"""

import ast
import contextlib
import difflib
import os
import re
import sys
import traceback
import types


class UserError(Exception):
    """A mistake the user can fix. Scripts print its message as one line and exit with code 2."""


def run_cli(main):
    """Call main(argv) the way every script's `if __name__ == "__main__"` does."""
    try:
        sys.exit(main(sys.argv[1:]))
    except UserError as e:
        # One line, so it reads well in a terminal and greps well in a log.
        print("error: " + " ".join(str(e).split("\n")), file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as e:
        # 130 = 128 + SIGINT, what a shell reports for a program stopped by Ctrl-C. A script that
        # saved its work says so in the exception's message.
        print(str(e) or "interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`python init_loss.py --json | head -3`): not an error worth a
        # traceback. Point stdout at /dev/null so the interpreter's final flush fails quietly too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


# -----------------------------------------------------------------------------
# running out of memory: one recognition for every script

_OUT_OF_MEMORY = re.compile(r"out of memory|can't allocate memory|not enough memory|CUBLAS_STATUS_ALLOC_FAILED", re.I)
_ASKED = re.compile(r"(?:tried to allocate|unable to allocate) (\d+(?:\.\d+)?)\.? ?(bytes|[KMGTP]i?B)\b", re.I)


def format_bytes(n):
    """1536 -> '1.5 KiB'; binary units, as the allocators' own messages use."""
    if n < 1024:
        return f"{n:.0f} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"


def out_of_memory_reason(e):
    """A few words on e if it is a failed allocation ('could not allocate 72.8 TiB'), else None.
    Recognises torch.OutOfMemoryError (CUDA; torch.cuda.OutOfMemoryError is the same class), the
    RuntimeError of torch's CPU allocator ("DefaultCPUAllocator: can't allocate memory", or "not
    enough memory" on Windows), MPS ("MPS backend out of memory") and cuBLAS, and MemoryError
    (Python's, and numpy's "Unable to allocate")."""
    text = str(e)
    if not (isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError"
            or (isinstance(e, RuntimeError) and _OUT_OF_MEMORY.search(text))):
        return None
    asked = _ASKED.search(text)
    if not asked:
        return "an allocation failed"
    amount, unit = asked.groups()
    return f"could not allocate {format_bytes(float(amount)) if unit.lower() == 'bytes' else amount + ' ' + unit}"


@contextlib.contextmanager
def out_of_memory_is_user_error(advice=None, message=None):
    """Inside the block, a failed allocation (see out_of_memory_reason) becomes a UserError: 'out of
    memory (REASON); ADVICE'. advice: text naming the options to lower, or a function returning it
    (called only then); or message: a function of REASON that words the whole line. Anything else
    passes through untouched."""
    try:
        yield
    except Exception as e:
        reason = out_of_memory_reason(e)
        if reason is None:
            raise
        if message is not None:
            raise UserError(message(reason)) from None
        raise UserError(f"out of memory ({reason}); {advice() if callable(advice) else advice}") from None


def device_memory(device):
    """All the memory a device has, in bytes: a GPU's total, or RAM plus swap for the CPU (Linux; elsewhere
    RAM alone); None where unknown (MPS)."""
    kind = device.split(":")[0]
    if kind == "cuda":
        import torch
        return torch.cuda.get_device_properties(device).total_memory
    if kind != "cpu":
        return None
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        return sum(int(fields[key].split()[0]) * 1024 for key in ("MemTotal", "SwapTotal") if key in fields) or None
    except (OSError, ValueError):
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):
            return None


def memory_shortfall(need, device):
    """If need (bytes; a lower bound such as model.memory_floor) is more than all the memory the device has,
    words for it: 'at least 25.4 GiB, more than the 23.5 GiB of RAM and swap on cpu'. None if it fits, or
    where the device's memory is unknown. A step that fails this cannot run at all, so a script can say so
    before it allocates or writes anything."""
    total = device_memory(device)
    if total is None or need <= total:
        return None
    return (f"at least {format_bytes(need)}, more than the {format_bytes(total)} of "
            f"{'RAM and swap' if device == 'cpu' else 'memory'} on {device}")


# -----------------------------------------------------------------------------
# configurator

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


def _coerce(value, default, label):
    """Convert value (text from the command line, or an object from a config file) to the type of default."""
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


def _set(config, key, value, defaults, choices, label):
    config[key] = _coerce(value, defaults[key], label)
    allowed = choices.get(key)
    if allowed is not None and config[key] not in allowed:
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
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return {name: value for name, value in namespace.items()
            if not name.startswith("_") and name not in imported and not isinstance(value, types.ModuleType)}


def _print_help(defaults, choices):
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "script.py"
    print(f"usage: python {script} [config/FILE.py ...] [--key=value ...]")
    doc = getattr(sys.modules.get("__main__"), "__doc__", None)
    if doc:
        print(doc.strip().split("\n\n")[0])
    print("keys (defaults shown):")
    for key, default in defaults.items():
        shown = default if isinstance(default, str) and default else repr(default)
        line = f"  --{key}={shown}"
        if key in choices:
            line = f"{line:<36} one of: {', '.join(map(str, choices[key]))}"
        print(line)


def check_seed(seed):
    """torch takes seeds from -2**63 to 2**64 - 1 (a larger one is a ValueError deep in a generator); train.py
    adds small offsets to its seed, so below 2**63 leaves room."""
    if not -2 ** 63 <= seed < 2 ** 63:
        raise UserError(f"--seed must be an integer from -2**63 to 2**63 - 1, got {seed}")


def parse_config(defaults, argv, choices=None):
    """
    Return a new dict: defaults, then each config file in argv, then each --key=value in argv.
    Values take the type of their default; a None default takes a Python literal or plain text.
    Every mistake (unknown key, wrong type, value outside choices) raises UserError.
    """
    choices = choices or {}
    if "--help" in argv or "-h" in argv:
        _print_help(defaults, choices)
        sys.exit(0)
    config = dict(defaults)
    seen_override = False
    for arg in argv:
        if not arg.startswith("-"):
            if seen_override:
                raise UserError(f"unexpected argument '{arg}' after --key=value options; config files come first")
            for name, value in _read_config_file(arg).items():
                if name not in defaults:
                    raise _unknown_key(name, defaults, "'{}'", f" in {arg}")
                _set(config, name, value, defaults, choices, f"{name} in {arg}")
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
        _set(config, key, value, defaults, choices, f"--{key}")
    return config


# -----------------------------------------------------------------------------
# atomic writes: a crash at any moment leaves either the old complete file or the new one

def _fsync(path, flags):
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside path; on clean exit it replaces path, on error it is deleted."""
    path = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}")
    try:
        yield tmp
        _fsync(tmp, os.O_RDWR)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    # Makes the rename itself durable; some platforms cannot open a directory, hence best effort.
    with contextlib.suppress(OSError):
        _fsync(directory, os.O_RDONLY)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)  # signal 0: no signal, only the check that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def remove_stale_temps(path):
    """
    Delete the temporary files that atomic_path left beside path in processes that were killed
    mid-write (SIGKILL, out of memory, power loss). Each is a partial copy as large as the file,
    so a run that is killed and resumed many times would otherwise fill the disk. A temp file
    whose process is still alive is left alone: someone may be writing it right now.
    """
    if os.name != "posix":  # os.kill(pid, 0) means something else on Windows
        return []
    directory, name = os.path.split(os.path.abspath(path))
    prefix = f".{name}.tmp-"
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for entry in entries:
        pid = entry[len(prefix):]
        if not entry.startswith(prefix) or not pid.isdigit():
            continue
        # Our own pid is no writer here (we are not writing now): a dead process had it before us,
        # which is common in containers, where every run starts with the same small pids.
        if int(pid) != os.getpid() and _pid_alive(int(pid)):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(directory, entry))
            removed.append(entry)
    return removed


def atomic_write_bytes(path, data):
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def atomic_torch_save(obj, path):
    import torch
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            try:
                torch.save(obj, f)
            except RuntimeError as e:
                # torch's zip writer turns whatever stopped a write into a bare RuntimeError: an OSError
                # (disk full, file too large) names the cause, and a Ctrl-C must stay a Ctrl-C.
                if isinstance(e.__context__, (OSError, KeyboardInterrupt)):
                    raise e.__context__ from None
                raise


# -----------------------------------------------------------------------------
# device and dtype

def pick_device(device):
    """'auto' picks the best available device; an explicit one is checked, then passed through."""
    import torch
    mps_available = hasattr(torch.backends, "mps") and torch.backends.mps.is_available()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if mps_available else "cpu"
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise UserError(f"--device={device!r} is not a device; use auto, cpu, cuda, cuda:N or mps") from None
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"--device={device} but CUDA is not available here "
                            f"(torch {torch.__version__}); use --device=cpu or --device=auto")
        index = torch.device(device).index
        if index is not None and index >= torch.cuda.device_count():
            raise UserError(f"--device={device} but only {torch.cuda.device_count()} CUDA device(s) are visible")
    if kind == "mps" and not mps_available:
        raise UserError("--device=mps but MPS is not available here; use --device=cpu or --device=auto")
    return device


DTYPES = ("auto", "float32", "bfloat16", "float16")


# oneDNN's instruction-set levels in rising order, as ONEDNN_MAX_CPU_ISA names them; bf16
# dot products are native from AVX512_CORE_BF16 on (AMX above it).
_ONEDNN_ISAS = ('SSE41', 'AVX', 'AVX2', 'AVX2_VNNI', 'AVX2_VNNI_2', 'AVX512_CORE', 'AVX512_CORE_VNNI',
                'AVX512_CORE_BF16', 'AVX512_CORE_FP16', 'AVX512_CORE_AMX', 'AVX512_CORE_AMX_FP16')


def cpu_has_native_bf16():
    """True where torch's CPU matmuls (oneDNN) multiply bf16 in hardware: x86 avx512_bf16 or AMX.
    There a bf16 matmul runs 2-3x as fast as fp32 (bench.py measures both peaks); elsewhere
    oneDNN emulates bf16 about 15x slower than native, slower than fp32, so --dtype=auto keeps
    float32. The answer follows what torch reports, not /proc/cpuinfo: oneDNN may be capped below
    the CPU's own level (ONEDNN_MAX_CPU_ISA=AVX2, as `ATEN_CPU_CAPABILITY=avx2` tests do), and
    then the cpuinfo flags are still there but the matmuls no longer use them."""
    import torch
    try:
        onednn_bf16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()    # False under an AVX2 cap
        hardware_bf16 = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    except (AttributeError, RuntimeError):  # a torch without these probes, or built without oneDNN
        return False
    cap = os.environ.get('ONEDNN_MAX_CPU_ISA', '').upper()
    # oneDNN still calls bf16 "supported" under an AVX512_CORE cap, but only by emulating it.
    capped_below = cap in _ONEDNN_ISAS and _ONEDNN_ISAS.index(cap) < _ONEDNN_ISAS.index('AVX512_CORE_BF16')
    return bool(onednn_bf16 and hardware_bf16 and not capped_below)


def pick_dtype(dtype, device, warn=True):
    """'auto' picks the fastest safe dtype for the device; an explicit one is checked against it.
    An explicit bfloat16 on a CPU that would only emulate it still runs, after a one-line warning
    on stderr (warn=False for callers that say so themselves)."""
    if dtype not in DTYPES:
        raise UserError(f"--dtype={dtype!r} is not allowed; choose one of: {', '.join(DTYPES)}")
    kind = device.split(":")[0]
    if kind == "cuda":
        import torch
        bf16_ok = torch.cuda.is_bf16_supported()
        if dtype == "auto":
            return "bfloat16" if bf16_ok else "float16"
        if dtype == "bfloat16" and not bf16_ok:
            raise UserError("--dtype=bfloat16 but this GPU does not support it; use --dtype=float16 or --dtype=auto")
        return dtype
    if kind != "cpu":
        return "float32" if dtype == "auto" else dtype
    if dtype == "auto":
        return "bfloat16" if cpu_has_native_bf16() else "float32"
    if dtype == "float16":
        raise UserError("--dtype=float16 is not supported on cpu; use --dtype=float32 or --dtype=bfloat16")
    if dtype == "bfloat16" and warn and not cpu_has_native_bf16():
        print("warning: --dtype=bfloat16 on a CPU without native bf16 (no avx512_bf16 or AMX in use): torch "
              "emulates it, many times slower than float32; --dtype=auto picks float32 here", file=sys.stderr)
    return dtype


def autocast_context(device, dtype):
    """Mixed precision for a dtype from pick_dtype: autocast for 16-bit types, nothing for float32."""
    import torch
    if dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device.split(":")[0], dtype=getattr(torch, dtype))


def pick_compile(compile, device):
    """'auto' turns torch.compile on for CUDA only: on CPUs it measured no faster (README, Performance)."""
    return compile == "true" or (compile == "auto" and device.split(":")[0] == "cuda")


def parse_modes(text, key, allowed):
    """A comma-separated list of tie modes such as --modes=tied,shuffle, in order, each mode once;
    an empty list or a mode outside allowed (model.TIE_MODES) raises UserError listing them."""
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise UserError(f"--{key} has {', '.join(map(repr, unknown)) or 'no modes'}; "
                        f"choose from: {', '.join(allowed)} (comma separated)")
    return names

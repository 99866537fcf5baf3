"""Atomic writes: a crash, a kill or a full disk at any moment leaves either the old complete
file or the new one, never a torn one; and the temporary files of killed writers are cleaned up."""

import contextlib
import os

from lib.command_line import UserError


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
        with contextlib.suppress(OSError):  # never made (no folder there), or already gone
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
        return
    directory, name = os.path.split(os.path.abspath(path))
    prefix = f".{name}.tmp-"
    try:
        entries = os.listdir(directory)
    except OSError:
        return
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


def make_folder(folder, label, shown=None):
    """A folder a script is told to write in (label: the option that named it, shown: the path as given, if
    not folder itself), made if missing: the obvious reading of a new path. A file where a folder should be,
    or no permission, is one UserError naming the option and the path."""
    where = f"{label}={shown or folder}"
    ancestor = os.path.abspath(folder)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise UserError(f"cannot write {where}: {ancestor} is a file, not a folder; choose another path") from None
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot write {where}: {e.strerror or e}; choose a writable path") from None


@contextlib.contextmanager
def output_file(path, label):
    """A file a script is told to write (label names the option, e.g. '--plot'): its folder is made if missing
    (make_folder), and any OSError while it is written (a folder at that path, no permission, a full disk) becomes
    one UserError naming the path; with atomic writes inside the block, nothing half-written stays behind."""
    make_folder(os.path.dirname(os.path.abspath(path)), label, shown=path)
    try:
        yield path
    except OSError as e:
        raise UserError(f"cannot write {label}={path}: {e.strerror or e}; choose a writable path") from None


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

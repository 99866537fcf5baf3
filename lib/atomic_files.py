"""Atomic writes of a file or a whole folder: a crash, a kill or a full disk at any moment leaves either the old
complete one or the new one, never a torn one; and what killed writers left is cleaned up."""

import contextlib
import os
import shutil
import signal
import threading

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


def remove_stale_temps(path, reader=False):
    """Clean up after processes that were killed (SIGKILL, out of memory, power loss) while writing path: the
    temporary file or folder (.NAME.tmp-PID) that atomic_path or new_folder left, a partial copy as large as what it
    replaces (a run killed and resumed many times would fill the disk); and the old folder that new_folder had set
    aside (.NAME.old-PID), which goes back into place if a kill came between its two renames, else away. What a
    live process left is its own: it may be writing right now. A pid is alive only in its own PID namespace, and
    a reader may be in another (a container, a node of a cluster sharing the storage): reader=True only puts a
    missing folder's old one back, and deletes nothing."""
    if os.name != "posix":  # os.kill(pid, 0) means something else on Windows
        return
    directory, name = os.path.split(os.path.abspath(path))
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        kind, _, pid = entry[len(name) + 2:].partition("-")
        if not entry.startswith(f".{name}.") or kind not in ("tmp", "old") or not pid.isdigit():
            continue
        # Our own pid is no writer here (we are not writing now): a dead process had it before us,
        # which is common in containers, where every run starts with the same small pids.
        if int(pid) != os.getpid() and _pid_alive(int(pid)):
            continue
        left = os.path.join(directory, entry)
        with contextlib.suppress(OSError):  # another reader may be cleaning up the same
            if kind == "old" and not os.path.lexists(path):
                os.rename(left, path)
            elif reader:
                continue
            elif os.path.isdir(left) and not os.path.islink(left):
                shutil.rmtree(left)
            else:
                os.remove(left)


def make_folder(folder, label, shown=None):
    """A folder a script is told to write in (label: the option that named it, shown: the path as given, if
    not folder itself), made if missing: the obvious reading of a new path. A file where a folder should be,
    or no permission, is one UserError naming the option and the path. Returns the topmost folder it made, if any."""
    where = f"{label}={shown or folder}"
    ancestor, made = os.path.abspath(folder), None
    while not os.path.exists(ancestor):
        ancestor, made = os.path.dirname(ancestor), ancestor
    if not os.path.isdir(ancestor):
        raise UserError(f"cannot write {where}: {ancestor} is a file, not a folder; choose another path") from None
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot write {where}: {e.strerror or e}; choose a writable path") from None
    return made


@contextlib.contextmanager
def signals_deferred(signals=(signal.SIGINT, signal.SIGTERM)):
    """Ctrl-C (SIGINT) and SIGTERM that arrive inside the block act when it ends, as they would have: its steps are
    all done or, on an error, all undone, never stopped between two. The handler is swapped, not the signal mask:
    a mask holds for one thread only, and the kernel hands a signal to any thread that does not block it (an
    executor's, tqdm's). Only the main thread may set handlers; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived, held = [], [number for number in signals if signal.getsignal(number) is not None]  # None: set in C
    before = {number: signal.signal(number, lambda number, frame: arrived.append(number)) for number in held}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(arrived):
            signal.raise_signal(number)  # now under the handler it arrived for: KeyboardInterrupt, or the end


@contextlib.contextmanager
def new_folder(folder, label, holds=()):
    """Yield an empty temporary folder beside folder (.NAME.tmp-PID) to fill; on a clean exit it replaces folder
    whole, by two renames: folder aside (.NAME.old-PID), the new one into place (for a new name, the one rename).
    Folder holds the complete old or new content (or, new, none) at every moment but the one between the renames;
    a Ctrl-C or SIGTERM there waits for the second, and a SIGKILL there is undone by remove_stale_temps, which every
    writer and reader of folder calls first (a reader only puts the old one back). On any error the new one goes,
    and so do the folders made for it: until the rename, nothing changes what folder holds. A folder there already
    is replaced only if it holds nothing but the names in `holds` (what a previous write put there): anything else
    is someone's, never deleted."""
    real = os.path.realpath(folder)  # a link to a folder elsewhere stays a link, to the new one
    if os.path.lexists(real) and not os.path.isdir(real):  # a file, a dangling link: someone's, never replaced
        raise UserError(f"cannot write {label}={folder}: {real} is a file, not a folder; choose another path")
    if os.path.isdir(real) and (others := sorted(set(os.listdir(real)) - set(holds))):
        raise UserError(f"{label}: {folder} holds {', '.join(others[:3])}{', …' if others[3:] else ''}, which this "
                        f"would replace with the folder it writes; choose a name of its own") from None
    remove_stale_temps(real)  # first: a folder made below would stand where a half swap's old one goes back
    made = make_folder(os.path.dirname(real), label, shown=folder)  # where it goes; a new name's folder comes whole
    tmp, aside = (os.path.join(os.path.dirname(real), f".{os.path.basename(real)}.{kind}-{os.getpid()}")
                  for kind in ("tmp", "old"))
    replacing = os.path.lexists(real)
    try:
        os.mkdir(tmp)
        yield tmp
        for entry in os.listdir(tmp):  # the data on disk before the rename that makes it the folder's
            _fsync(os.path.join(tmp, entry), os.O_RDONLY)
        with signals_deferred():  # a Ctrl-C between the two renames would leave no folder at all
            if replacing and not os.listdir(real):  # empty (export's --to): rmdir refuses a folder filled since
                os.rmdir(real)
                replacing = False
            if replacing:
                os.rename(real, aside)
            try:
                os.rename(tmp, real)
            except BaseException:
                if replacing:
                    os.rename(aside, real)
                raise
            if replacing:  # inside: a Ctrl-C that waited for the rename would skip it and leave the old copy aside
                shutil.rmtree(aside, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(OSError):
            path = os.path.dirname(real)
            while made and path != os.path.dirname(made):  # only where empty: made for this, never one there before
                os.rmdir(path)
                path = os.path.dirname(path)
        raise
    with contextlib.suppress(OSError):
        _fsync(os.path.dirname(real), os.O_RDONLY)


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
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_torch_save(obj, path):
    import torch
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        try:
            torch.save(obj, f)
        except RuntimeError as e:
            # torch's zip writer turns whatever stopped a write into a bare RuntimeError: an OSError
            # (disk full, file too large) names the cause, and a Ctrl-C must stay a Ctrl-C.
            if isinstance(e.__context__, (OSError, KeyboardInterrupt)):
                raise e.__context__ from None
            raise

"""One thread setting for the whole library: OpenMP kernels and the BLAS numpy uses.

`set_num_threads(n)` sets the OpenMP team size for every kernel and caps BLAS at the same n
(through threadpoolctl when installed), so BLAS calls and OpenMP regions, which never overlap,
each use n threads and never oversubscribe the machine.

OpenMP keeps the team size per calling thread, so a Python thread that never called
`set_num_threads` would use the OpenMP default. `sync_thread()` (called by `Function.apply` and
`backward`) applies the library-wide setting to whichever thread runs an op.
"""
import contextlib
import os
import threading
import warnings

from minigrad.kernels import _threads

_state = {"n": None}
_local = threading.local()
# serial_blas() is process-wide: the first thread in limits BLAS to 1, the last out restores it
_serial = {"depth": 0, "limiter": None, "pending": None, "lock": threading.Lock()}
# More threads than this only oversubscribe the cores; far more make OpenMP's thread creation fail,
# which ends the process instead of raising.
MAX_THREADS = 1024


def _default_threads():
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return min(int(env), MAX_THREADS)
    return min(os.cpu_count() or 1, MAX_THREADS)


def set_num_threads(n):
    """Use `n` threads in OpenMP kernels and in BLAS."""
    from minigrad.kernels.validate import check_int  # (numpy: loaded after the env is set)

    n = check_int("set_num_threads", "n", n, 1, MAX_THREADS)
    if getattr(_local, "override", None) is None:    # inside kernel_threads the block's size stays
        _threads.set_threads(n)
        _local.n = n
    with _serial["lock"]:
        _state["n"] = n
        if _serial["depth"]:
            _serial["pending"] = n                    # for the last thread leaving serial_blas
        else:
            _limit_blas(n)


def _limit_blas(n):
    """Cap numpy's BLAS (and MKL's, when minigrad.blas uses it) at n threads (through threadpoolctl,
    when installed)."""
    from minigrad import blas

    blas.set_threads(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=n, user_api="blas")


def sync_thread():
    """Give the calling thread's OpenMP team the library-wide size (cheap when already in sync)."""
    if getattr(_local, "override", None) is not None:
        return
    n = _state["n"]
    if n is not None and getattr(_local, "n", None) != n:
        _threads.set_threads(n)
        _local.n = n


@contextlib.contextmanager
def serial_blas():
    """A context running BLAS on one thread inside the block.

    For work that is already split across threads by a kernel (each OpenMP thread calls BLAS on its
    own small GEMMs through `kernels/_blas.pxd`), and for decoding one token at a time, where the
    (B, C) x (C, C) products are too small to split. Without threadpoolctl it does nothing.

    The limit is process-wide, so it is reference-counted across threads: the first thread to enter
    sets it, the last to leave restores the library-wide setting (`set_num_threads` called inside
    the block included).
    """
    ctl = _controller()
    if not ctl:
        yield
        return
    with _serial["lock"]:
        if not _serial["depth"]:
            _serial["limiter"] = ctl.limit(limits=1, user_api="blas")
        _serial["depth"] += 1
    try:
        yield
    finally:
        with _serial["lock"]:
            _serial["depth"] -= 1
            if not _serial["depth"]:
                _serial["limiter"].restore_original_limits()
                if _serial["pending"] is not None:
                    _limit_blas(_serial["pending"])
                _serial["limiter"] = _serial["pending"] = None


# Without a readable cache size: a typical server L3 share, small enough that weights beyond it
# are certainly streamed from DRAM.
DEFAULT_LLC_BYTES = 32 << 20


def kernel_blas():
    """What a kernel calling BLAS from inside its OpenMP threads runs under: `serial_blas()`, so that
    the team's concurrent calls do not each start BLAS threads; nothing when the calling thread's
    kernels run on one OpenMP thread (`kernel_threads(1)`, decoding), where a single caller is safe
    and limiting BLAS around each call costs ~50 us (threadpoolctl) -- per layer per token."""
    if getattr(_local, "override", None) == 1:
        return contextlib.nullcontext()
    return serial_blas()


def last_level_cache_bytes():
    """The size of the CPU's last-level cache (Linux sysfs, cpu0's highest level), else
    DEFAULT_LLC_BYTES."""
    if "llc" not in _state:
        best = (0, 0)
        base = "/sys/devices/system/cpu/cpu0/cache"
        try:
            for entry in os.listdir(base):
                with open(os.path.join(base, entry, "level")) as f:
                    level = int(f.read())
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip().upper()
                units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
                size = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
                best = max(best, (level, size))
        except (OSError, ValueError):
            best = (0, 0)
        _state["llc"] = best[1] or DEFAULT_LLC_BYTES
    return _state["llc"]


def decode_blas(weight_bytes):
    """BLAS threading for decoding one token at a time through `weight_bytes` of weights: one thread
    (`serial_blas`) while they fit in the last-level cache, where a token's matrix-vector products
    are too short to split; every thread once they do not, when each token streams the weights from
    DRAM and two cores read it about twice as fast (2 vCPUs, 260 MB L3: SmolLM2-135M fp32, 540 MB,
    11.9 -> 22.5 tokens/s with threads; a 42 MB GPT 180 -> 130-138, so it stays serial)."""
    return serial_blas() if weight_bytes <= last_level_cache_bytes() else contextlib.nullcontext()


def _controller():
    """A threadpoolctl controller that sees the BLAS the kernels call, or False without threadpoolctl."""
    ctl = _state.get("controller")
    if ctl is None:
        try:
            import scipy.linalg.cython_blas  # noqa: F401  (load the BLAS kernels call, so it is seen)
            from threadpoolctl import ThreadpoolController

            from minigrad import blas
            blas.backend()                           # and MKL, when minigrad.blas uses it
            ctl = ThreadpoolController()
        except ImportError:
            ctl = False
        _state["controller"] = ctl
    return ctl


@contextlib.contextmanager
def kernel_threads(n):
    """Run the calling thread's OpenMP kernels on `n` threads inside the block.

    For decoding one token at a time: each kernel then handles a row or two, and waking a sleeping
    second thread (passive waits) costs more than the work (small GPT decoding, B = 1, 2 -> 1
    thread: 229 -> 517-658 tokens/s; docs/gpt.md).
    """
    from minigrad.kernels.validate import check_int

    n = check_int("kernel_threads", "n", n, 1, MAX_THREADS)
    prev = getattr(_local, "override", None)
    _local.override = n
    _threads.set_threads(n)
    try:
        yield
    finally:
        _local.override = prev
        if prev is None:                         # back to the library-wide size
            prev = _local.n = get_num_threads()
        _threads.set_threads(prev)


def get_num_threads():
    """The thread count kernels use."""
    if _state["n"] is None:
        set_num_threads(_default_threads())
    return _state["n"]


def blas_info():
    """A short description of the BLAS numpy uses (via threadpoolctl when installed)."""
    try:
        from threadpoolctl import threadpool_info
        libs = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        if libs:
            i = libs[0]
            return f"{i.get('internal_api')} {i.get('version')} ({i.get('num_threads')} threads)"
    except ImportError:
        pass
    import numpy as np
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # noqa: BLE001 - best effort description only
        return "unknown"


def warn_if_blas_spins():
    """Warn once that numpy's OpenBLAS was loaded before minigrad could set OPENBLAS_THREAD_TIMEOUT.

    Its workers then busy-wait ~0.1 s after every matrix product and take a core from the kernels
    that follow (small GPT training step, 2 threads: 112.8 vs 101.9 ms/step, docs/benchmarks.md).
    """
    try:
        import numpy as np
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"].get("name", "")
    except Exception:  # noqa: BLE001 - unknown numpy build: say nothing
        return
    if "openblas" not in str(blas).lower():
        return
    warnings.warn("minigrad was imported after numpy, so numpy's OpenBLAS threads will busy-wait ~0.1 s "
                  "after every matrix product and slow minigrad's kernels (about 10 % of a small GPT "
                  "training step on 2 cores). Import minigrad before numpy, or set "
                  "OPENBLAS_THREAD_TIMEOUT=4 in the environment (an explicit value also silences this).",
                  RuntimeWarning, stacklevel=3)

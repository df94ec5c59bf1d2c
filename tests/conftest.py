"""Process settings for the test session: what `import minigrad` would set, applied before any test
module imports numpy (OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when it loads; see minigrad/__init__.py)."""
import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def one_thread():
    """For modules of tiny models (`pytestmark = pytest.mark.usefixtures("one_thread")`): one kernel
    thread avoids OpenMP start-up costs on a shared machine; the previous count is restored after."""
    import minigrad as mg

    before = mg.get_num_threads()
    mg.set_num_threads(1)
    yield
    mg.set_num_threads(before)

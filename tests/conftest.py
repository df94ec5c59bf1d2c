"""Process settings for the test session: what `import minigrad` would set, applied before any test
module imports numpy (OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when it loads; see minigrad/__init__.py)."""
import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

"""Every use of another library's private (or internal, undocumented) API lives here: one module
per library (``_compat/redis.py``, ...), and nowhere else in streamwire.

Each module says what it uses and why no public API does the job as well, checks the installed
version at import (a supported range, and that every attribute it uses is there) and raises an
``ImportError`` naming the installed version and the supported ones when it does not fit (or, for
what can only be seen on a live object, a ``LogError`` at first use). Importing this package
imports none of those libraries.
"""

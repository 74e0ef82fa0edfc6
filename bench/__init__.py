"""streamwire benchmarks: ``./dev bench`` (or ``python -m bench [name ...]``)."""

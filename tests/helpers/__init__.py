"""Helpers the tests share (import them as ``helpers.<module>``; test files never import each other):

* ``chat_samples``: every chat event with its exact wire JSON, and two small user contracts;
* ``scripted``: a scripted raw HTTP server for exact client-side misbehaviour;
* ``processes``: server subprocesses (start, read their lines, wait until up, stop);
* ``chaos_proxy``: a TCP proxy that cuts, splits and stalls, and a uvicorn server thread;
* ``sse_vectors``: the WHATWG event-stream test vectors.
"""

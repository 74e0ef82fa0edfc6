"""``streamwire serve --workers N``: N processes serving one port, over one shared log.

**Sockets.** The parent binds before any worker starts, so a port taken, a host that does not
exist or port 0 are settled once, in one place. On Linux it binds N listening sockets to the same
address with ``SO_REUSEPORT`` and hands worker *i* socket *i*: the kernel spreads incoming
connections over them by a hash of the connection's addresses, and each worker has its own accept
queue. One socket inherited by all (uvicorn's and gunicorn's default) leaves the spread to
whichever process wakes first, and asyncio accepts a whole burst of queued connections per wake
up, so the burst lands on one worker. The parent keeps every socket open, so a worker's queue
outlives the worker: connections that arrive while it restarts wait for its successor instead of
being refused. Elsewhere (no load-balancing ``SO_REUSEPORT``) the workers share one socket.

**Workers.** Each is ``python -m streamwire.cli._workers SOCKET_FD READY_FD`` (a fresh
interpreter: nothing of the parent's state is shared), which reads the parsed options from its
stdin and runs ``serve`` on its socket: its own app, log connection, hubs and runs service, the
runs of the others reached through the log as those of any other process. Every response says
which worker answered (``Streamwire-Worker: PID``). A worker is in its own process group, so a
Ctrl-C in a terminal reaches the parent only, which forwards it once (a second one would cut the
drain short). The stdin pipe stays open as a lifeline: a worker whose parent is gone (killed with
SIGKILL) sees it close and shuts down as on SIGTERM.

**Supervision.** SIGTERM / SIGINT to the parent goes to every worker, each drains as a lone
``serve`` does (open streams end with their recoverable ``fail``, runs get ``--drain-timeout``),
and the parent exits once all have: 0 (SIGTERM) or 130 (SIGINT), 1 if one of them failed. The
parent closes its copies of the sockets at the first signal, so a worker that stopped listening
gets no more connections (they go to the others, or are refused when none listens). A second
signal is forwarded too (uvicorn then stops at once). A worker that exits on its own before it
served (its log unusable, an agent failing to import: it says why on stderr) ends the server with
status 1: every restart would fail alike. One that dies after it served (a crash, the OOM killer)
is logged and restarted on the same socket, at most once a second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import pickle
import selectors
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any, Final

from ._options import CommandLineError

__all__ = ["WORKER_HEADER", "Seat", "check_workers", "supervise"]

#: The response header naming the process (its pid) that answered.
WORKER_HEADER: Final = "streamwire-worker"
#: Seconds between two starts of one worker (a worker that keeps dying is not restarted in a spin).
_RESTART_EVERY: Final = 1.0
#: Seconds the parent waits past the workers' own bounds (drain, grace) before SIGKILL.
_KILL_SLACK: Final = 10.0
_BACKLOG: Final = 2048  # uvicorn's default


def check_workers(args: argparse.Namespace) -> None:
    """Refuse ``--workers`` values that cannot work, before anything starts.

    Raises:
        CommandLineError: fewer than 1, more than one over the memory log, or on Windows.
    """
    n: int = getattr(args, "workers", 1)
    if n < 1:
        raise CommandLineError(f"--workers must be at least 1, not {n}")
    if n > 1 and args.log == "memory":
        raise CommandLineError(
            f"--workers {n} needs a log the processes share, and the memory log lives in one "
            "process: use --log sqlite:PATH (one host) or --log redis://HOST:PORT/DB")
    if n > 1 and sys.platform == "win32":
        raise CommandLineError("--workers above 1 is not supported on Windows: run one serve "
                               "per port behind a proxy")


def _reuse_port() -> bool:
    """Whether the kernel balances connections over sockets sharing a port (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def _listen(host: str, port: int, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on connections of a socket whose
    # proto says TCP (a bare socket.socket() says 0, and each response written in two parts then
    # waits 40 ms for the client's delayed ACK); the worker's socket, rebuilt from the fd, reads
    # the kernel's answer anyway
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _sockets(host: str, port: int, n: int) -> list[socket.socket]:
    """One listening socket per worker (``SO_REUSEPORT``), or one for all of them."""
    reuse = _reuse_port()
    made: list[socket.socket] = []
    try:
        made.append(_listen(host, port, reuse))
        port = made[0].getsockname()[1]  # port 0: the one the kernel picked, for every worker
        while reuse and len(made) < n:
            made.append(_listen(host, port, reuse))
    except OSError as exc:
        for sock in made:
            sock.close()
        raise CommandLineError(f"cannot listen on {host}:{port}: {exc}") from exc
    return made if reuse else made * n


@dataclass
class _Worker:
    index: int
    sock: socket.socket
    proc: subprocess.Popen[bytes] | None = None
    ready_fd: int = -1  # the read end of the pipe the worker writes one byte to once it serves
    ready: bool = False
    started: float = 0.0
    status: int | None = None  # its exit status once it exited
    restart_at: float = 0.0


def _say(message: str) -> None:
    print(f"streamwire serve: {message}", file=sys.stderr, flush=True)


class _Supervisor:
    """The parent: starts the workers, forwards signals, restarts the dead (see the module)."""

    def __init__(self, args: argparse.Namespace, sockets: list[socket.socket]) -> None:
        options = {k: v for k, v in vars(args).items() if k != "agents"}
        self.payload = pickle.dumps(options)  # read by _worker_main; the pipe then stays open
        self.workers = [_Worker(i, sock) for i, sock in enumerate(sockets)]
        self.selector = selectors.DefaultSelector()
        self.stopping: list[int] = []  # the signals received
        self.failed = False
        # the workers' own bounds (runs drain, then streams' grace), and some slack
        self.bound = (_KILL_SLACK + float(getattr(args, "drain_timeout", 0) or 0)
                      + float(getattr(args, "shutdown_grace_period", 0) or 0))

    def start(self, worker: _Worker) -> None:
        read_fd, write_fd = os.pipe()
        fd = worker.sock.fileno()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "streamwire.cli._workers", str(fd), str(write_fd)],
                stdin=subprocess.PIPE, pass_fds=(fd, write_fd), process_group=0)
        finally:
            os.close(write_fd)  # the worker's end only: its exit closes it, so reads never block
        assert proc.stdin is not None
        proc.stdin.write(self.payload)
        proc.stdin.flush()
        if self.stopping:  # a signal while the workers were starting
            proc.send_signal(self.stopping[0])
        worker.proc, worker.ready_fd, worker.ready = proc, read_fd, False
        worker.started, worker.status = time.monotonic(), None
        self.selector.register(read_fd, selectors.EVENT_READ, worker)

    def signal(self, signum: int, frame: FrameType | None = None) -> None:
        """Forward ``signum`` to every live worker (a signal handler of the parent)."""
        self.stopping.append(signum)
        for worker in self.workers:
            if worker.proc is not None and worker.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.send_signal(signum)

    def _heard(self, worker: _Worker) -> None:
        """Read the worker's ready byte (or EOF: it exited) and stop watching the pipe."""
        if worker.ready_fd < 0:
            return
        with contextlib.suppress(OSError):
            worker.ready = worker.ready or bool(os.read(worker.ready_fd, 1))
        self.selector.unregister(worker.ready_fd)
        os.close(worker.ready_fd)
        worker.ready_fd = -1

    def run(self) -> int:
        """Supervise until every worker exited after a signal (or one failed to start)."""
        deadline = math.inf
        while True:
            for key, _ in self.selector.select(timeout=0.2):
                self._heard(key.data)
            now = time.monotonic()
            if self.stopping and deadline == math.inf:
                deadline = now + self.bound
                # the parent's copies go: once a worker stops listening, new connections go to
                # those still listening, or are refused, instead of waiting in its queue
                self.close_sockets()
            for worker in self.workers:
                if worker.status is None:
                    self._check(worker, now, deadline)
                elif not self.stopping and now >= worker.restart_at:
                    self.start(worker)
                    assert worker.proc is not None
                    _say(f"worker {worker.index} restarted (pid {worker.proc.pid})")
            if self.stopping and all(w.status is not None for w in self.workers):
                if self.failed:
                    return 1
                return 130 if self.stopping[0] == signal.SIGINT else 0

    def _check(self, worker: _Worker, now: float, deadline: float) -> None:
        proc = worker.proc
        assert proc is not None
        status = proc.poll()
        if status is None:
            if now > deadline:
                _say(f"worker {worker.index} (pid {proc.pid}) did not stop in time: killed")
                proc.kill()
            return
        worker.status = status
        self._heard(worker)
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if self.stopping:
            self.failed |= status not in (0, 130, -signal.SIGTERM, -signal.SIGINT)
        elif not worker.ready:
            _say(f"worker {worker.index} (pid {proc.pid}) exited with status {status} before "
                 "it served (it said why above); stopping the others")
            self.failed = True
            self.signal(signal.SIGTERM)
        else:
            _say(f"worker {worker.index} (pid {proc.pid}) died unexpectedly (status {status}); "
                 "restarting it")
            worker.restart_at = max(now, worker.started + _RESTART_EVERY)

    def close_sockets(self) -> None:
        for sock in {w.sock for w in self.workers}:
            sock.close()

    def close(self) -> None:
        for worker in self.workers:  # an error in the parent itself: no orphans
            if worker.proc is not None and worker.proc.poll() is None:
                worker.proc.kill()
                worker.proc.wait()
            if worker.ready_fd >= 0:
                os.close(worker.ready_fd)
        self.close_sockets()
        self.selector.close()


def supervise(args: argparse.Namespace) -> int:
    """Run ``args.workers`` worker processes until a signal (see the module); the exit status.

    Raises:
        CommandLineError: the address cannot be listened on.
    """
    sockets = _sockets(args.host, args.port, args.workers)
    supervisor = _Supervisor(args, sockets)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, supervisor.signal)
    how = ("each its own accept queue (SO_REUSEPORT)" if len(set(sockets)) > 1
           else "one shared accept queue")
    try:
        for worker in supervisor.workers:
            supervisor.start(worker)
        pids = ", ".join(str(w.proc.pid) for w in supervisor.workers if w.proc is not None)
        _say(f"{args.workers} workers (pids {pids}) on "
             f"http://{args.host}:{sockets[0].getsockname()[1]}, {how}")
        return supervisor.run()
    finally:
        supervisor.close()


# -- the worker's side ------------------------------------------------------------------------


class Seat:
    """A worker's place: its listening socket, and the pipe that tells the parent it serves."""

    def __init__(self, sock_fd: int, ready_fd: int) -> None:
        self.sock = socket.socket(fileno=sock_fd)
        self.ready_fd = ready_fd

    def uvicorn_config(self) -> dict[str, Any]:
        """``uvicorn.Config`` options of a worker: every response names it."""
        return {"headers": [(WORKER_HEADER, str(os.getpid()))]}

    async def serve(self, server: Any) -> None:
        """Serve ``server`` (a ``uvicorn.Server``) on the socket; tell the parent once it
        listens; shut down as on SIGTERM when the parent is gone (stdin closed)."""
        loop = asyncio.get_running_loop()

        def parent_gone() -> None:
            with contextlib.suppress(OSError):
                if os.read(sys.stdin.fileno(), 4096):
                    return
            loop.remove_reader(sys.stdin.fileno())
            server.handle_exit(signal.SIGTERM, None)

        async def tell_ready() -> None:
            # uvicorn has no event for "listening", only this flag, set as its start-up ends
            while not server.started:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            with contextlib.suppress(OSError):
                os.write(self.ready_fd, b"1")
            os.close(self.ready_fd)
            loop.add_reader(sys.stdin.fileno(), parent_gone)

        told = asyncio.ensure_future(tell_ready())
        try:
            await server.serve(sockets=[self.sock])
        finally:
            told.cancel()
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(sys.stdin.fileno())


def _worker_main(argv: list[str]) -> int:
    """``python -m streamwire.cli._workers SOCKET_FD READY_FD``: one worker (options on stdin)."""
    from . import serve

    sock_fd, ready_fd = int(argv[0]), int(argv[1])
    options = pickle.load(sys.stdin.buffer)  # the parent's own parse: trusted
    args = argparse.Namespace(**options)
    args.seat = Seat(sock_fd, ready_fd)
    try:
        return serve.run(args)
    except CommandLineError as exc:
        print(f"streamwire serve: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))

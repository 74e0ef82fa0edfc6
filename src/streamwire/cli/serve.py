"""``streamwire serve``: serve a stream log (and agents) over HTTP.

``streamwire serve --log memory|sqlite:PATH|redis://HOST:PORT/DB --host 127.0.0.1 --port 8000
[--token TOKEN]`` serves ``streamwire.server``'s routes under uvicorn.

Writes always need ``Authorization: Bearer <token>``. The token is ``--token``, else the
``STREAMWIRE_TOKEN`` environment variable, else a random one generated at start and printed on
stderr (so a server is never open for writes by accident). Reads are open unless
``--protect-reads`` is given.

Users: ``--jwt-secret SECRET`` (else ``$STREAMWIRE_JWT_SECRET``; at least 32 bytes) replaces the
bearer token: writes need an HS256 JWT signed with it (``streamwire token --sub NAME`` mints one),
whose ``sub`` is the user. What a user starts (a run, a chat) is theirs: other callers get 404,
and the agent sees ``run.user``. Reads without a token stay anonymous (``--protect-reads``: no).
It excludes ``--token`` and ``$STREAMWIRE_TOKEN``: no key beside the users' may read every chat.
One log line is written per SSE connection opened and closed.
The log is read once before the server listens: one it cannot open or reach ends ``serve`` with
the reason and exit status 1. The first lines say the backend and where, and who may write and read.
SIGINT / SIGTERM end every open stream with a recoverable ``fail`` frame, then the server exits
within ``--grace`` seconds. With agents, the first signal drains them first: starts answer 503
(``Retry-After``) while running runs get ``--drain-timeout`` seconds to finish (the rest fail
``WORKER_SHUTDOWN``); ``--run-retries N`` re-runs a run whose worker was lost or shut down on
another live process.

``--loop auto|asyncio|uvloop`` picks the event loop, as uvicorn's ``--loop`` does: ``auto``
(default) is uvloop when it is installed (``pip install 'streamwire[uvloop]'``), else asyncio; a
start-up line names the loop that runs. ``--max-connections`` and ``--max-connections-per-stream``
cap the open SSE connections per server (503 past it) and per stream (429), as ``create_app``'s
arguments of the same names. Once start-up is done (log checked, app built, just before it
accepts connections) ``serve`` collects garbage and freezes what is left (``gc.freeze()``): the
modules, app and routes start-up created are never scanned again by the garbage collector; and it
raises the young generation's threshold to ``YOUNG_THRESHOLD`` (``settle_heap``).

``--agent MODULE:CALLABLE`` (repeatable; ``demo`` for the built-in scripted chat agent) also
serves the runs API (``POST /runs``, resume, stop, status, sse) for those agents; ``--run-lease``
is the seconds after which a dead worker's runs end ``WORKER_LOST``. ``MODULE`` is imported as
uvicorn imports an app: ``--app-dir`` (default: the current directory) comes first on the
module search path, so ``streamwire serve --agent mymod:fn`` finds ``mymod.py`` in the folder it
runs in. ``streamwire run`` starts a run and prints its reply live.

``--workers N`` serves with N processes on one port over a log they share (``sqlite:PATH``,
``redis://``; memory is refused): ``streamwire.cli._workers`` says how they are run and supervised.

Lifetimes: ``--finished-ttl`` (a finished stream), ``--paused-ttl`` (a paused run waiting for its
resume; 0, the default, until resumed) and ``--run-retention`` (a run's record once it ended).
Unset, ``--finished-ttl`` follows ``--run-retention`` on SQLite and Redis (a reply is readable as
long as its run answers ``/status``) and is an hour on memory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib
import math
import os
import secrets
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, Final, cast

from ..log import StreamLog
from ._options import CommandLineError, seconds

__all__ = ["YOUNG_THRESHOLD", "app_from_env", "configure", "open_log", "run", "settle_heap"]

#: The garbage collector's young-generation threshold once start-up is done (CPython's default
#: is 700 allocations). A server holding thousands of connections' objects pays, at 700, for
#: frequent collections that promote them, and every full collection rescans them all: a
#: re-attach storm of 10,000 readers made 8 full collections (1.4 s of CPU, and the event loop
#: stalled meanwhile) at 700, one at 10,000 (``python -m bench storm``, 2026-12-03).
YOUNG_THRESHOLD: Final = 10_000


def settle_heap() -> None:
    """What ``serve`` does to the garbage collector once start-up is done: collect, freeze what
    is left (the modules, the app, its routes: never scanned again), and raise the young
    generation's threshold to ``YOUNG_THRESHOLD``."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])

_UVLOOP_HINT = "pip install 'streamwire[uvloop]'"


def _load(module: str, name: str) -> Any:
    """``module.name``, imported on first use (backends and subcommands have their own deps)."""
    return getattr(importlib.import_module(module), name)


def open_log(spec: str, *, redis_prefix: str = "streamwire", writer_timeout: float | None = None,
             finished_ttl: float | None = None, paused_ttl: float | None = None) -> StreamLog:
    """Build the log ``--log`` names: ``memory``, ``sqlite:PATH``, ``redis://HOST:PORT/DB`` or a
    Redis Cluster, ``redis-cluster://HOST:PORT[,HOST:PORT...]`` (seed nodes; the others are
    found); ``writer_timeout`` (seconds a writer's lease lasts without a write), ``finished_ttl`` and
    ``paused_ttl`` (seconds finished and paused streams are kept, 0: until reactivated) when
    given, else the backend's defaults.

    Raises:
        ValueError: the spec names no known backend.
        ImportError: the backend needs an extra that is not installed.
    """
    options = {"writer_timeout": writer_timeout, "finished_ttl": finished_ttl,
               "paused_ttl": paused_ttl}
    lease: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    if spec == "memory":
        from ..log.memory import MemoryLog

        return MemoryLog(**lease)
    if spec.startswith("sqlite:"):
        path = spec.removeprefix("sqlite:")
        if not path:
            raise ValueError("--log sqlite:PATH needs a file path, e.g. sqlite:streams.db")
        return cast(StreamLog, _load("streamwire.log.sqlite", "SQLiteLog")(path, **lease))
    if spec.startswith(("redis://", "rediss://", "unix://", "redis-cluster://")):
        try:
            redis_log = _load("streamwire.log.redis", "RedisLog")
        except ImportError as exc:
            raise ImportError(f'--log {spec} needs redis: pip install "streamwire[redis]" '
                              f"({exc})") from exc
        if spec.startswith("redis-cluster://"):
            from ..errors import UsageError

            # the seed list is checked here, so a typo is a usage error before serving
            parse = _load("streamwire.log.redis._cluster", "parse_cluster_url")
            try:
                parse(spec)
            except UsageError as exc:
                raise ValueError(f"--log {spec}: {exc}") from None
        return cast(StreamLog, redis_log(url=spec, prefix=redis_prefix, **lease))
    raise ValueError("--log must be memory, sqlite:PATH or redis://HOST:PORT/DB (or a cluster: "
                     f"redis-cluster://HOST:PORT[,HOST:PORT...]), not {spec!r}")


def app_from_env() -> Any:
    """An app factory for other ASGI servers (``granian --interface asgi --factory
    streamwire.cli:app_from_env``, ``uvicorn --factory ...``), configured like ``serve`` by
    ``STREAMWIRE_LOG`` (default memory), ``STREAMWIRE_TOKEN`` (required: writes are never open),
    ``STREAMWIRE_PROTECT_READS=1`` and ``STREAMWIRE_CORS_ORIGINS`` (comma-separated)."""
    from ..server import bearer_token, create_app

    token = os.environ.get("STREAMWIRE_TOKEN", "")
    if not token:
        raise RuntimeError("set STREAMWIRE_TOKEN: the bearer token that writes must carry")
    origins = [o for o in os.environ.get("STREAMWIRE_CORS_ORIGINS", "").split(",") if o]
    protect = os.environ.get("STREAMWIRE_PROTECT_READS", "") in ("1", "true", "yes")
    log = open_log(os.environ.get("STREAMWIRE_LOG", "memory"))
    return create_app(log, authorize=bearer_token(token, protect_reads=protect),
                      cors_origins=origins)


def configure(parser: argparse.ArgumentParser) -> None:
    """``serve``'s options."""
    _serve_options(parser)


def _serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", default="memory",
                   help="memory (default), sqlite:PATH, redis://HOST:PORT/DB or "
                        "redis-cluster://HOST:PORT[,HOST:PORT...]")
    p.add_argument("--redis-prefix", default="streamwire", help="key prefix for a Redis log")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to bind (default 8000; 0: any)")
    p.add_argument("--token", default=None,
                   help="bearer token for writes (default: $STREAMWIRE_TOKEN, else a random one "
                        "printed at start)")
    p.add_argument("--protect-reads", action="store_true", help="require the token for reads too")
    p.add_argument("--jwt-secret", default=None, metavar="SECRET",
                   help="identify users by HS256 JWT bearer tokens signed with SECRET (sub = the "
                        "user; streamwire token mints them) instead of one --token (default: "
                        "$STREAMWIRE_JWT_SECRET)")
    p.add_argument("--writer-timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds a stream's writer may stay silent (no append, no keepalive) "
                        "before its stream fails with WRITER_GONE (default: the log's, 30)")
    p.add_argument("--access-log", action="store_true", help="also log every HTTP request")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", default="text", choices=["text", "json"],
                   help="text (default) or json: one JSON object per log line (time, level, "
                        "logger, message, and stream_id, run_id, agent, code where known)")
    p.add_argument("--agent", action="append", default=[], metavar="MODULE:CALLABLE",
                   help="serve the runs API with this agent (repeatable; its name is the "
                        "callable's name); demo: the built-in scripted chat agent. The first "
                        "one also answers useChat at /api/chat, and a chat request's body picks another "
                        "with {\"agent\": NAME}")
    p.add_argument("--app-dir", default=".", metavar="DIR",
                   help="look for --agent modules in DIR first, as uvicorn's --app-dir "
                        "(default: the current directory)")
    # lifetimes: how long streams and run records are kept (0: until resumed / forever)
    p.add_argument("--finished-ttl", type=_ttl, default=None, metavar="SECONDS",
                   help="seconds a finished stream (completed, interrupted, failed) stays "
                        "readable; 0: forever (default: --run-retention on sqlite and redis, "
                        "so a reply lasts as long as its run's /status; 3600 on memory)")
    p.add_argument("--paused-ttl", type=_ttl, default=None, metavar="SECONDS",
                   help="seconds a paused run stays resumable (its stream and state); after it "
                        "a resume fails PAUSE_EXPIRED; 0: until resumed (default 0)")
    p.add_argument("--chat-multitask", default="reject", choices=["reject", "interrupt", "enqueue"],
                   help="a new chat message while the chat's reply runs: reject (409, default), "
                        "interrupt (stop the reply, answer the new one) or enqueue (answer it "
                        "when the reply ends)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="serve with N processes on one port (default 1), over a log they share "
                        "(sqlite:PATH or redis://); see docs/guides/workers.md")
    p.add_argument("--loop", default="auto", choices=["auto", "asyncio", "uvloop"],
                   help="event loop: uvloop (pip install 'streamwire[uvloop]'), asyncio, or auto "
                        "(default: uvloop when installed, else asyncio)")
    # every option of the server itself and of its runs service: one flag per ServerSettings
    # and RunsSettings field, its help and default from there (neither imports a web stack)
    from .._settings import add_arguments
    from ..runs._settings import RunsSettings
    from ..server._settings import ServerSettings

    add_arguments(p, ServerSettings)
    add_arguments(p, RunsSettings)

def _ttl(text: str) -> float:
    """An argparse type: a finite number of seconds >= 0 (0: keep)."""
    value = seconds(text)
    if value == math.inf:
        raise argparse.ArgumentTypeError("must be a finite number of seconds (0: keep forever)")
    return value


def _loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop ``--loop`` asks for: uvloop's, or None for asyncio's (as ``asyncio.run``);
    ``auto``: uvloop if it is installed.

    Raises:
        ImportError: ``--loop uvloop`` and uvloop cannot be imported (the message says how to
            install it).
    """
    if choice != "asyncio":
        try:
            return cast(Callable[[], asyncio.AbstractEventLoop],
                        _load("uvloop", "new_event_loop"))
        except ImportError as exc:
            if choice == "uvloop":
                where = " (uvloop does not run on Windows)" if sys.platform == "win32" else ""
                raise ImportError(f"--loop uvloop needs uvloop: {_UVLOOP_HINT}{where} "
                                  f"({exc})") from exc
    return None


def _loop_line(choice: str) -> str:
    """The start-up line that names the loop running (called on it)."""
    loop = type(asyncio.get_running_loop())
    name = "uvloop" if loop.__module__.startswith("uvloop") else "asyncio"
    why = (f"--loop auto: uvloop is not installed, {_UVLOOP_HINT}"
           if choice == "auto" and name == "asyncio" else f"--loop {choice}")
    return f"event loop: {name} ({loop.__module__}.{loop.__qualname__}; {why})"


async def _serve(args: argparse.Namespace, log: StreamLog, authorize: Any) -> None:
    from .._settings import values_from_args
    from ..runs import Runs
    from ..runs._settings import RunsSettings
    from ..server import StreamApp, uvicorn_server
    from ..server._settings import settings_from_args

    print(f"streamwire serve: {_loop_line(args.loop)}", file=sys.stderr, flush=True)
    run_options = RunsSettings(**values_from_args(args, RunsSettings)).options()
    runs = Runs(log, args.agents, **run_options) if args.agents else None
    app = StreamApp(log, settings_from_args(args),
                    authorize=authorize, agents=runs,
                    chat_agents=list(runs.agents) if runs is not None else (),
                    chat_multitask=args.chat_multitask)
    seat = getattr(args, "seat", None)  # a worker of --workers N: its socket, and a header
    server = uvicorn_server(app, host=args.host, port=args.port, log_level=args.log_level,
                            access_log=args.access_log, log_config=None,
                            **(seat.uvicorn_config() if seat else {}))
    async with contextlib.AsyncExitStack() as stack:
        enter = getattr(log, "__aenter__", None)
        if enter is not None:
            await stack.enter_async_context(log)  # type: ignore[arg-type]
        else:
            stack.push_async_callback(log.aclose)
        await _check_log(log, args.log)
        server.config.load()  # uvicorn's part of start-up (its protocol modules), frozen too
        settle_heap()  # start-up is done: what it created lives as long as the process
        await (server.serve() if seat is None else seat.serve(server))


class _LogUnusable(Exception):
    """``serve``'s log failed its start-up check (the message says why)."""


async def _check_log(log: StreamLog, spec: str) -> None:
    """Read from the log once before serving: a log that cannot open its file or reach its
    server fails here, with the reason, rather than answering every request with 503."""
    from ..server._ops import probe_log

    try:
        await probe_log(log)  # the one /readyz sends
    except Exception as exc:
        hint = ("; check that its directory exists and is writable" if spec.startswith("sqlite:")
                else "; is the server running there?" if spec != "memory" else "")
        reason = str(exc).replace(spec, _shown(spec))  # no password in the message
        raise _LogUnusable(f"--log {_shown(spec)} does not work: {reason}{hint}") from exc


async def _checked(log: StreamLog, spec: str) -> None:
    """``_check_log``, then close the log (``--workers``: the parent serves nothing itself)."""
    try:
        await _check_log(log, spec)
    finally:
        await log.aclose()


def _shown(spec: str) -> str:
    """``spec`` without a password (``redis://user:secret@host`` -> ``redis://user:***@host``)."""
    scheme, sep, rest = spec.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not (sep and at and ":" in userinfo):
        return spec
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{host}"


def _startup_lines(args: argparse.Namespace, token_source: str) -> list[str]:
    """What ``serve`` says before it listens: the backend and where, and who may write and read."""
    spec: str = args.log
    if spec == "memory":
        where = "memory (this process only; streams are lost when it exits)"
    elif spec.startswith("sqlite:"):
        where = f"SQLite file {os.path.abspath(spec.removeprefix('sqlite:'))}"
    else:
        where = f"Redis {_shown(spec)} (key prefix {args.redis_prefix!r})"
    reads = ("need the token too (--protect-reads)" if args.protect_reads
             else "open to anyone (--protect-reads to require the token)")
    return [f"log: {where}",
            f"writes: need the bearer token ({token_source}); reads: {reads}"]


def run(args: argparse.Namespace) -> int:
    """Serve until a signal; the exit status.

    Raises:
        CommandLineError: an option cannot work (unknown ``--log``, missing extra, an
            ``--agent`` that cannot be imported, a token no HTTP client could send).
    """
    return _run_serve(args)


def _run_serve(args: argparse.Namespace) -> int:
    from ._logging import configure_logging
    from ._workers import check_workers, supervise

    configure_logging(args.log_level, args.log_format)
    check_workers(args)
    worker = getattr(args, "seat", None) is not None  # one of --workers N: the parent said it all
    try:
        loop_factory = _loop_factory(args.loop)
        log = open_log(args.log, redis_prefix=args.redis_prefix,
                       writer_timeout=args.writer_timeout,
                       finished_ttl=_finished_ttl(args), paused_ttl=args.paused_ttl)
    except (ValueError, ImportError) as exc:
        raise CommandLineError(str(exc)) from exc
    from ..errors import UsageError

    if args.otel:  # before anything starts: the extra may be missing
        from ..server._otel import require_otel

        try:
            require_otel()
        except UsageError as exc:
            raise CommandLineError(str(exc)) from exc
    from ..runs import load_agent

    # as uvicorn does with --app-dir: `--agent mymod:fn` finds mymod.py in the folder serve
    # runs in even when started as a console script (whose sys.path starts at its own bin/)
    app_dir = os.path.abspath(args.app_dir)
    if not os.path.isdir(app_dir):
        raise CommandLineError(f"--app-dir {args.app_dir} is not a directory")
    sys.path.insert(0, app_dir)
    try:
        args.agents = [load_agent(spec) for spec in args.agent]
    except UsageError as exc:
        where = (f" (looked in --app-dir {app_dir} first)"
                 if isinstance(exc.__cause__, ModuleNotFoundError) else "")
        raise CommandLineError(f"{exc}{where}") from exc
    authorize, source = _authorize(args)
    for line in [] if worker else _startup_lines(args, source):
        print(f"streamwire serve: {line}", file=sys.stderr, flush=True)
    if getattr(args, "workers", 1) > 1 and not worker:
        try:  # once, here: one message if it is unusable, and the file made before N race to
            asyncio.run(_checked(log, args.log))
        except _LogUnusable as exc:
            print(f"streamwire serve: {exc}", file=sys.stderr)
            return 1
        return supervise(args)
    # uvicorn re-raises the signal it shut down on once it is done, to die of it; a stop asked
    # for by a signal exits here instead, after the drain (also when it arrives before uvicorn
    # starts): 0 for SIGTERM, 130 for Ctrl-C.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_cleanly)
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(_serve(args, log, authorize))
    except _LogUnusable as exc:
        print(f"streamwire serve: {exc}", file=sys.stderr)
        return 1
    return 0


def _authorize(args: argparse.Namespace) -> tuple[Any, str]:
    """The hook writes go through (a JWT with ``--jwt-secret``, else the bearer token) and what
    the start-up line says it is."""
    from ..server import bearer_token, jwt_bearer

    token = args.token or os.environ.get("STREAMWIRE_TOKEN") or ""
    secret = args.jwt_secret or os.environ.get("STREAMWIRE_JWT_SECRET") or ""
    if secret:
        if token:
            raise CommandLineError(
                "--jwt-secret excludes --token and $STREAMWIRE_TOKEN: with users, every writer is "
                "a user (mint yourself a token: streamwire token --sub NAME)")
        try:
            hook = jwt_bearer(secret, protect_reads=args.protect_reads)
        except (ValueError, ImportError) as exc:
            raise CommandLineError(f"--jwt-secret: {exc}") from exc
        where = "--jwt-secret" if args.jwt_secret else "$STREAMWIRE_JWT_SECRET"
        return hook, (f"a JWT signed with {where}, its sub the user; "
                      "streamwire token --sub NAME mints one")
    source = "--token" if args.token else "$STREAMWIRE_TOKEN"
    if not token:
        token, source = secrets.token_urlsafe(24), "generated, printed above"
        args.token = token  # --workers N: every worker takes the same one
        print(f"streamwire serve: no --token given; writes need: Authorization: Bearer {token}",
              file=sys.stderr, flush=True)
    try:  # refuses a token no HTTP client could send
        return bearer_token(token, protect_reads=args.protect_reads), source
    except ValueError as exc:
        raise CommandLineError(f"--token: {exc}") from exc


def _finished_ttl(args: argparse.Namespace) -> float | None:
    """``--finished-ttl``; unset, a durable log keeps a run's reply as long as its record
    (``--run-retention``), memory keeps its hour."""
    from ..runs import DEFAULT_RECORD_TTL  # the durable logs' own default is this one too

    if args.finished_ttl is None and args.log != "memory" and args.record_ttl != DEFAULT_RECORD_TTL:
        return cast("float | None", args.record_ttl)
    return cast("float | None", args.finished_ttl)


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    # Ctrl-C exits 130 as everywhere in the CLI (after the same drain); SIGTERM is a clean stop.
    raise SystemExit(130 if signum == signal.SIGINT else 0)

"""``streamwire token``: mint a JWT bearer token for a user of ``serve --jwt-secret``.

``streamwire token --sub NAME [--secret SECRET] [--ttl SECONDS]`` prints an HS256 JWT whose
``sub`` (the user id an agent sees as ``run.user``) is ``NAME`` and which expires ``--ttl``
seconds from now (default 3600). The secret is ``--secret``, else ``$STREAMWIRE_JWT_SECRET``, and
is at least 32 bytes (HS256's 256 bits); the server started with the same secret accepts the
token. Needs PyJWT: ``pip install "streamwire[jwt]"``.
"""

from __future__ import annotations

import argparse
import os

from ._options import CommandLineError, seconds

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """``token``'s options."""
    parser.add_argument("--sub", required=True, metavar="NAME",
                        help="the user id (the JWT's sub; the agent's run.user)")
    parser.add_argument("--secret", default=None,
                        help="the HS256 secret serve --jwt-secret was given (default: "
                             "$STREAMWIRE_JWT_SECRET)")
    parser.add_argument("--ttl", type=seconds, default=3600.0, metavar="SECONDS",
                        help="seconds until the token expires (default 3600)")


def run(args: argparse.Namespace) -> int:
    """Print the token; the exit status.

    Raises:
        CommandLineError: no secret, one too short, an empty ``--sub``, a ``--ttl`` of 0 or
            infinity, or PyJWT missing.
    """
    secret = args.secret or os.environ.get("STREAMWIRE_JWT_SECRET") or ""
    if not secret:
        raise CommandLineError("no secret: pass --secret SECRET or set STREAMWIRE_JWT_SECRET")
    from ..server._auth import mint_token

    if not 0 < args.ttl < float("inf"):
        raise CommandLineError(f"--ttl must be a finite number of seconds > 0, not {args.ttl}")
    try:
        print(mint_token(secret, args.sub, ttl=args.ttl))
    except (ValueError, ImportError) as exc:
        raise CommandLineError(str(exc)) from exc
    return 0

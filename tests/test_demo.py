"""``streamwire demo`` runs end to end, resumes the reply and says so."""

from __future__ import annotations

import re
import subprocess
import sys
import time

from streamwire.demo import REPLY


def test_demo_resumes_the_reply_and_counts_the_replay() -> None:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "streamwire.cli", "demo"], capture_output=True,
                          text=True, timeout=60, check=False)
    elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    summary = re.search(r"^(\d+) chunks replayed after the cut; none lost, none repeated "
                        r"\((\d+) chunks in order, stream completed", out, re.MULTILINE)
    assert summary is not None, out
    replayed, total = int(summary[1]), int(summary[2])
    assert replayed > 0
    assert total == len(REPLY.split(" "))
    assert "cutting our own connection after 25 chunks" in out
    assert "re-attached with Last-Event-ID: 25" in out
    # The reply itself reads whole once the status lines are taken out.
    text = "".join(line for line in out.splitlines() if not line.startswith("  ["))
    assert text.startswith(REPLY), out
    assert elapsed < 20


def test_demo_reports_bad_arguments() -> None:
    done = subprocess.run([sys.executable, "-m", "streamwire.cli", "demo", "--delay", "soon"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--delay" in done.stderr

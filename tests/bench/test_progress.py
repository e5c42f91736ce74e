"""The progress display: plain lines with the ETA off a terminal, a tqdm bar that fits one on it."""

from __future__ import annotations

import io
import os
import re
import threading
import time

import pytest

from textagent.bench.progress import Progress
from textagent.bench.records import Episode


def test_progress_bar_shows_eta():
    stream = io.StringIO()
    bar = Progress(4, stream=stream)
    bar.update(Episode("a", "single", "dev", "text", 0, success=True))
    bar.update(Episode("b", "single", "dev", "text", 0, success=False, failure="loop"))
    text = stream.getvalue()
    assert "1/4" in text and "2/4" in text and "ETA" in text and "text b: loop" in text


def test_progress_bar_on_a_terminal_fits_its_width():
    pytest.importorskip("tqdm")
    import fcntl  # POSIX only
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 50, 0, 0))  # a 50-column terminal
    chunks: list[bytes] = []

    def drain():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    with os.fdopen(slave, "w") as stream:
        bar = Progress(57, stream=stream)
        for i in range(57):
            bar.update(
                Episode(
                    f"parallel-weather-and-time-{i}",
                    "parallel",
                    "dev",
                    "native+fallback",
                    0,
                    success=i % 3 == 0,
                    failure="wrong_answer",
                )
            )
            time.sleep(0.003)
        bar.close()
    reader.join(5)
    os.close(master)
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    screens = [line for line in re.split(r"[\r\n]", text) if line.strip()]
    assert screens and "57/57" in screens[-1] and "ok 19" in text
    assert max(len(line) for line in screens) <= 50

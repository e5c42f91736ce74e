"""The bench's progress display on stderr: how many episodes are done, how many solved, the ETA."""

from __future__ import annotations

import sys
import time
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .records import Episode

__all__ = ["Progress"]


def _fmt_seconds(seconds: float) -> str:
    seconds = int(max(0, seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    """Episode progress on stderr: a tqdm bar that fits the terminal on a TTY (tqdm is in the
    ``bench`` extra), else, and without tqdm, a plain line every 5 % (or 30 s) with the ETA."""

    def __init__(self, total: int, *, stream: IO[str] | None = None, width: int = 24, enabled: bool = True):
        self.total, self.done, self.ok = total, 0, 0
        self.stream = stream if stream is not None else sys.stderr
        self.width, self.enabled = width, enabled
        self.started = time.monotonic()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_print = 0.0
        self._last_pct = -1
        self.last = ""
        self._bar: Any = None
        if enabled and self.tty:
            try:
                from tqdm import tqdm
            except ImportError:  # without the bench extra: the plain lines
                self.tty = False
            else:
                self._bar = tqdm(
                    total=total,
                    file=self.stream,
                    dynamic_ncols=True,
                    desc="bench",
                    unit="ep",
                    smoothing=0.1,
                    bar_format="{desc} {bar} {n}/{total} {percentage:3.0f}% [{elapsed}<{remaining}]{postfix}",
                )

    def line(self, note: str = "") -> str:
        frac = self.done / self.total if self.total else 1.0
        filled = round(frac * self.width)
        elapsed = time.monotonic() - self.started
        if self.done:
            eta = _fmt_seconds(elapsed / self.done * (self.total - self.done))
            rate = f"{elapsed / self.done:.1f} s/episode"
        else:
            eta, rate = "?", "-"
        text = (
            f"bench [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {frac:4.0%} "
            f"| ok {self.ok} | {rate} | elapsed {_fmt_seconds(elapsed)} | ETA {eta}"
        )
        return text + (f" | {note}" if note else "")

    def update(self, episode: Episode | None = None) -> None:
        if episode is not None:
            self.done += 1
            self.ok += 1 if episode.success else 0
        if not self.enabled:
            return
        note = (
            f"{episode.mode} {episode.task}: {'ok' if episode.success else episode.failure}"
            if episode is not None
            else ""
        )
        self.last = self.line(note)
        if self._bar is not None:
            self._bar.set_postfix_str(f"ok {self.ok}" + (f", {note}" if note else ""), refresh=False)
            self._bar.update(1 if episode is not None else 0)
            return
        now = time.monotonic()
        pct = int(self.done * 20 / self.total) if self.total else 20  # every 5 %
        if episode is not None and (pct != self._last_pct or now - self._last_print >= 30 or self.done == self.total):
            self._last_pct, self._last_print = pct, now
            self.stream.write(self.last + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

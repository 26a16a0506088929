"""Progress reporting, Ctrl-C and exceptions in callbacks for the library's
long calls.

Every call that takes a progress callback in C gets one from Python, whether
or not the user passed ``progress``: through it the call learns of a Ctrl-C
and stops (the callback returns nonzero, the library returns
ACCEL_ERR_CANCELLED), and :class:`Call` then raises ``KeyboardInterrupt``
instead of the cancellation. The callback may run on a thread other than
Python's main thread, where Python does not run signal handlers; so while a
call runs on the main thread, the SIGINT byte that the interpreter's C-level
handler writes to ``signal.set_wakeup_fd`` is read by the callback itself.

``progress`` may be None, a callable ``progress(stage, fraction)`` (a true
result cancels; an exception it raises cancels the call and is re-raised),
or True for a progress bar: tqdm's where tqdm is installed, otherwise a line
on stderr.
"""
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable, Optional, Tuple, Union

from ._errors import CANCELLED, AccelError
from ._native import PROGRESS_FN

ProgressArg = Union[None, bool, Callable[[str, float], Any]]


class _Bar:
    """A progress bar for progress=True: tqdm's if installed, else stderr."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stage: Optional[str] = None
        self._last = 0.0
        self._tqdm: Any = None
        self._shown = False
        self._pending: Optional[Tuple[str, float]] = None
        self._tqdm_mod: Any
        try:
            import tqdm  # noqa: F401
            self._tqdm_mod = tqdm
        except ImportError:
            self._tqdm_mod = None

    def __call__(self, stage: str, fraction: float) -> bool:
        with self._lock:
            if self._tqdm_mod is not None:
                self._tqdm_update(stage, fraction)
            else:
                self._text_update(stage, fraction)
        return False

    def _tqdm_update(self, stage: str, fraction: float) -> None:
        if stage != self._stage:
            if self._tqdm is not None:
                self._tqdm.close()
            self._tqdm = self._tqdm_mod.tqdm(total=100, desc=stage, unit="%", leave=False)
            self._stage = stage
        n = int(round(100 * min(max(fraction, 0.0), 1.0)))
        if n > self._tqdm.n:
            self._tqdm.update(n - self._tqdm.n)

    def _text_update(self, stage: str, fraction: float) -> None:
        now = time.monotonic()
        if stage == self._stage and fraction < 1.0 and now - self._last < 0.1:
            self._pending = (stage, fraction)  # drawn at the next report or at the end
            return
        self._pending = None
        self._stage, self._last, self._shown = stage, now, True
        f = min(max(fraction, 0.0), 1.0)
        filled = int(30 * f)
        sys.stderr.write("\r%-16s [%s%s] %3d%%" % (stage[:16], "#" * filled, "." * (30 - filled), int(100 * f)))
        sys.stderr.flush()

    def close(self) -> None:
        with self._lock:
            if self._tqdm is not None:
                self._tqdm.close()
                self._tqdm = None
            elif self._shown:
                if self._pending is not None:
                    self._last = 0.0
                    self._text_update(*self._pending)
                sys.stderr.write("\n")
                sys.stderr.flush()
                self._shown = False


class _SigintWatch:
    """While open on the main thread, tells whether SIGINT arrived, from any
    thread: Python's default handler is replaced by one that only notes it
    (so that no KeyboardInterrupt is raised inside a callback the library
    called), and the byte the interpreter writes to the wakeup fd is read by
    callbacks on other threads, where Python runs no signal handler."""

    def __init__(self) -> None:
        self._r: Any = None
        self._w: Any = None
        self._handler: Any = None
        self.seen = False

    def _note(self, signum: int, frame: Any) -> None:
        self.seen = True

    def open(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return  # the program handles Ctrl-C itself (or ignores it)
        r, w = socket.socketpair()
        r.setblocking(False)
        w.setblocking(False)
        try:
            old = signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):
            old = None
        if old is None or old != -1:  # unusable, or someone (asyncio) listens already: leave theirs
            if old is not None:
                signal.set_wakeup_fd(old)
            r.close()
            w.close()
        else:
            self._r, self._w = r, w
        self._handler = signal.signal(signal.SIGINT, self._note)

    def poll(self) -> bool:
        if not self.seen and self._r is not None:
            try:
                data = self._r.recv(64)
            except (BlockingIOError, OSError):
                data = b""
            if int(signal.SIGINT) in data:
                self.seen = True
        return self.seen

    def close(self) -> None:
        if self._r is not None:
            self.poll()
            signal.set_wakeup_fd(-1)
            self._r.close()
            self._w.close()
            self._r = self._w = None
        if self._handler is not None:
            signal.signal(signal.SIGINT, self._handler)
            self._handler = None


class Call:
    """One library call with a progress callback.

    ``with Call(progress) as c:`` set the options' progress field to
    ``c.fn`` and make the call inside; on leaving, a cancellation caused by
    Ctrl-C becomes KeyboardInterrupt and one caused by an exception in the
    user's callback becomes that exception. ``c_type`` and ``adapt`` serve
    callbacks of other C signatures: adapt(*c_args) gives the arguments of
    the user's callable."""

    def __init__(self, progress: ProgressArg, c_type: Any = PROGRESS_FN,
                 adapt: Optional[Callable[..., tuple]] = None, signature: str = "stage, fraction") -> None:
        if progress is not None and not isinstance(progress, bool) and not callable(progress):
            raise TypeError("progress must be None, True or a callable(%s), not %s"
                            % (signature, type(progress).__name__))
        self._bar = _Bar() if progress is True else None
        self._user = self._bar if progress is True else (progress or None)
        self._adapt = adapt or (lambda stage, fraction: (stage.decode(errors="replace"), fraction))
        self._watch = _SigintWatch()
        self.interrupted = False
        self.error: Optional[BaseException] = None
        self.fn = c_type(self._callback)

    def _callback(self, user: Any, *args: Any) -> int:
        try:
            if self.interrupted or self.error is not None or self._watch.poll():
                self.interrupted = self.interrupted or self._watch.seen
                return 1
            if self._user is not None and self._user(*self._adapt(*args)):
                return 1
            return 0
        except KeyboardInterrupt:
            self.interrupted = True
            return 1
        except BaseException as e:  # never let a Python error unwind through C
            self.error = e
            return 1

    def __enter__(self) -> "Call":
        self._watch.open()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self._watch.close()
        if self._bar is not None:
            self._bar.close()
        if self.interrupted or self._watch.seen:
            # Ctrl-C: whether it cancelled the call or came after its last
            # callback, it is the user's KeyboardInterrupt.
            if exc is None or (isinstance(exc, AccelError) and exc.status == CANCELLED):
                raise KeyboardInterrupt from None
        if self.error is not None:
            # the user's callback raised: that exception, whether the library
            # stopped for it or had already finished
            if exc is None:
                raise self.error
            if isinstance(exc, AccelError) and exc.status == CANCELLED:
                raise self.error from exc

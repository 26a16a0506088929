"""The exceptions failed calls raise, and the check that raises them.

Every failure of the library raises a subclass of :class:`AccelError` chosen
by its status, which is also a subclass of the built-in exception a Python
user expects for that kind of failure: ``except ValueError`` catches a bad
argument whether Python or the library found it, ``except OSError`` a file
that cannot be read, ``except MemoryError`` an allocation that failed.

======================  ==============================  =====================
status                  class                           also a
======================  ==============================  =====================
ACCEL_ERR_INVALID_ARG   InvalidArgumentError            ValueError
ACCEL_ERR_FORMAT        FormatError                     ValueError
ACCEL_ERR_DECODE        DecodeError                     ValueError
ACCEL_ERR_LIMIT         LimitError                      ValueError
ACCEL_ERR_VERSION       VersionError                    ValueError
ACCEL_ERR_NOT_FOUND     NotFoundError                   LookupError, ValueError
ACCEL_ERR_IO            AccelIOError                    OSError
ACCEL_ERR_NO_DEVICE     NoDeviceError                   OSError
ACCEL_ERR_DEVICE        DeviceError                     OSError
ACCEL_ERR_OUT_OF_MEMORY OutOfMemoryError                MemoryError
ACCEL_ERR_DEVICE_MEMORY DeviceMemoryError               MemoryError
ACCEL_ERR_UNSUPPORTED   UnsupportedError                NotImplementedError
ACCEL_ERR_CANCELLED     CancelledError                  (RuntimeError)
ACCEL_ERR_INTERNAL      InternalError                   (RuntimeError)
======================  ==============================  =====================

All of them are RuntimeError subclasses too, as AccelError always was. One
refusal has a class of its own: :class:`HashSizeAssertionError` (an
InvalidArgumentError that is also an AssertionError) for a whash hash_size that
is not a power of two, where imagehash's ``whash`` fails an assertion.
"""
from typing import Any, Dict, Optional, Tuple, Type

from ._native import lib


class AccelError(RuntimeError):
    """A libaccel call failed.

    Parameters
    ----------
    status : int
        The ``accel_status`` value.
    message : str
        The library's message (``accel_last_error``).

    Attributes
    ----------
    status : int
        The ``accel_status`` value.
    name : str
        Its enumerator name, e.g. ``"ACCEL_ERR_INVALID_ARG"``.
    message : str
        The library's message, without the name.

    Notes
    -----
    ``AccelError(status, message)`` makes an instance of the subclass that
    belongs to ``status`` (see the module's table), so that it is also a
    ValueError, OSError or MemoryError where that fits.

    Examples
    --------
    >>> import accel
    >>> try:
    ...     accel.Context(threads=-1)
    ... except ValueError as e:
    ...     print(e.name, isinstance(e, accel.AccelError))
    ACCEL_ERR_INVALID_ARG True
    """

    def __new__(cls, status: int, message: str = "") -> "AccelError":
        if cls is AccelError:
            cls = _CLASSES.get(int(status), AccelError)
        # OSError's own constructor for its subclasses (it lays instances out
        # differently), given the message alone so that errno stays None.
        base = OSError if issubclass(cls, OSError) else Exception
        return base.__new__(cls, message)

    def __init__(self, status: int, message: str = "") -> None:
        self.args = (message,)
        self.status = int(status)
        self.name = lib.accel_status_string(self.status).decode()
        self.message = message

    def __str__(self) -> str:
        return "%s: %s" % (self.name, self.message)

    def __reduce__(self) -> Tuple[Any, ...]:
        return (AccelError, (self.status, self.message))


class InvalidArgumentError(AccelError, ValueError):
    """ACCEL_ERR_INVALID_ARG: an argument the library refuses."""


class HashSizeAssertionError(InvalidArgumentError, AssertionError):
    """ACCEL_ERR_INVALID_ARG for a whash hash_size that is not a power of two.

    imagehash's ``whash`` asserts that its hash_size is a power of two, so
    this refusal is an AssertionError as well as a ValueError (and an
    AccelError): ``except AssertionError`` written for imagehash catches it.
    """

    def __reduce__(self) -> Tuple[Any, ...]:
        return (HashSizeAssertionError, (self.status, self.message))


class FormatError(AccelError, ValueError):
    """ACCEL_ERR_FORMAT: a file or buffer is not of a readable format."""


class DecodeError(AccelError, ValueError):
    """ACCEL_ERR_DECODE: image data is corrupt or truncated."""


class LimitError(AccelError, ValueError):
    """ACCEL_ERR_LIMIT: an input exceeds a configured limit."""


class VersionError(AccelError, ValueError):
    """ACCEL_ERR_VERSION: a struct size or file version the library cannot accept."""


class NotFoundError(AccelError, LookupError, ValueError):
    """ACCEL_ERR_NOT_FOUND: a named item does not exist."""


class AccelIOError(AccelError, OSError):
    """ACCEL_ERR_IO: a file could not be opened, read or written."""


class NoDeviceError(AccelError, OSError):
    """ACCEL_ERR_NO_DEVICE: the requested GPU backend or device is absent."""


class DeviceError(AccelError, OSError):
    """ACCEL_ERR_DEVICE: a GPU driver, launch or runtime error."""


class OutOfMemoryError(AccelError, MemoryError):
    """ACCEL_ERR_OUT_OF_MEMORY: host memory allocation failed."""


class DeviceMemoryError(AccelError, MemoryError):
    """ACCEL_ERR_DEVICE_MEMORY: GPU memory (or the memory budget) exhausted."""


class UnsupportedError(AccelError, NotImplementedError):
    """ACCEL_ERR_UNSUPPORTED: a feature this build or path does not have."""


class CancelledError(AccelError):
    """ACCEL_ERR_CANCELLED: the progress callback asked to stop."""


class InternalError(AccelError):
    """ACCEL_ERR_INTERNAL: a bug in libaccel; please report it."""


_CLASSES: Dict[int, Type[AccelError]] = {
    1: InvalidArgumentError, 2: OutOfMemoryError, 3: NoDeviceError, 4: DeviceError, 5: DeviceMemoryError,
    6: UnsupportedError, 7: CancelledError, 8: AccelIOError, 9: FormatError, 10: DecodeError, 11: LimitError,
    12: VersionError, 13: NotFoundError, 14: InternalError}

CANCELLED = 7


def check(status: int, ctx_handle: Optional[Any] = None) -> None:
    """Raise the AccelError of a failed status, with the context's last error message."""
    if status != 0:
        raise AccelError(status, lib.accel_last_error(ctx_handle).decode(errors="replace"))


def choice(name: str, table: Dict[str, Any], value: Any) -> Any:
    """table[value] for a name given as a string; a ValueError naming the
    allowed values for any other string or type."""
    if isinstance(value, str) and value in table:
        return table[value]
    raise ValueError("%s must be one of %s, not %r" % (name, ", ".join(repr(k) for k in table), value))


class ContextCalls:
    """The operations of one domain through a Context (ctx.hash, ctx.ct, ctx.svf):
    their calls pass the context's handle and raise with its last error."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx

    def _h(self) -> Any:
        return self._ctx.handle

    def _call(self, fn: Any, *args: Any) -> None:
        check(fn(self._h(), *args), self._h())

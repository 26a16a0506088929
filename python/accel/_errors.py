"""The exception every failed call raises, and the check that raises it."""
from ._native import lib


class AccelError(RuntimeError):
    """A libaccel call failed. ``status`` is the accel_status value, ``name`` its
    enumerator name (e.g. "ACCEL_ERR_INVALID_ARG")."""

    def __init__(self, status, message):
        self.status = status
        self.name = lib.accel_status_string(status).decode()
        super().__init__("%s: %s" % (self.name, message))


def check(status, ctx_handle=None):
    """Raise AccelError for a failed status, with the context's last error message."""
    if status != 0:
        raise AccelError(status, lib.accel_last_error(ctx_handle).decode(errors="replace"))


class ContextCalls:
    """The operations of one domain through a Context (ctx.hash, ctx.ct, ctx.svf):
    their calls pass the context's handle and raise with its last error."""

    def __init__(self, ctx):
        self._ctx = ctx

    def _h(self):
        return self._ctx.handle

    def _call(self, fn, *args):
        check(fn(self._h(), *args), self._h())

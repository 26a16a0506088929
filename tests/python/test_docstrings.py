"""Every public function, class, method and property of the package has a
numpydoc docstring with an Examples section, and every example runs and
prints what its docstring says (doctest)."""
import doctest
import importlib
import inspect
import os
import tempfile
import unittest

from support import clean_environment, require

require("numpy")
import accel  # noqa: E402

clean_environment()

MODULES = ["accel", "accel._errors", "accel._arrays", "accel._native", "accel._progress", "accel.context",
           "accel.hash", "accel.index", "accel.ct", "accel.svf", "accel.reg"]


def public_api():
    """(name, docstring) of every public callable and property reachable from accel.__all__."""
    for name in accel.__all__:
        obj = getattr(accel, name)
        if name == "__version__" or (inspect.isclass(obj) and issubclass(obj, BaseException)
                                     and obj.__name__ not in ("AccelError", "DeviceArrayError")):
            continue
        if not (inspect.isclass(obj) or callable(obj)):
            continue
        yield name, obj.__doc__
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for member in dir(obj):
                if member.startswith("_"):
                    continue
                raw = inspect.getattr_static(obj, member)
                f = raw.fget if isinstance(raw, property) else getattr(raw, "__func__", raw)
                if inspect.isclass(f) or not (callable(f) or isinstance(raw, property)):
                    continue
                yield "%s.%s" % (name, member), (raw if isinstance(raw, property) else f).__doc__


class Docstrings(unittest.TestCase):
    def test_every_public_name_has_an_example(self):
        missing = [name for name, doc in public_api() if "Examples\n" not in (doc or "")]
        self.assertEqual(missing, [])

    def test_examples_run(self):
        cwd = os.getcwd()
        with tempfile.TemporaryDirectory() as d:
            os.chdir(d)
            try:
                for name in MODULES:
                    module = importlib.import_module(name)
                    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
                    self.assertEqual(result.failed, 0, name)
            finally:
                os.chdir(cwd)


if __name__ == "__main__":
    unittest.main(verbosity=2)

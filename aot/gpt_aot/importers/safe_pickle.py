"""Read a pickle that may hold plain data only (nanoGPT's meta.pkl).

pickle.load runs whatever callables the file names, so a meta.pkl from
elsewhere could execute code at compile time. This unpickler resolves no
global at all (classes, functions, reduce calls all need one), and the result
is then walked to admit only dicts, lists, tuples, strings, ints, bools and None.
"""

import io
import pickle
from pathlib import Path

PLAIN = (dict, list, tuple, str, int, bool, type(None))


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refers to {module}.{name}: only plain data is allowed")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("holds a persistent reference: only plain data is allowed")


def check_plain(value) -> None:
    """Raise ValueError unless `value` is built from PLAIN types only (iterative:
    a deeply nested file cannot exhaust the stack)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) not in PLAIN:
            raise ValueError(f"holds a {type(item).__name__}: only dicts, lists, tuples, strings and ints are allowed")
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def load_plain(path: Path):
    """The data in pickle file `path`; ValueError names what else it holds."""
    try:
        value = _NoGlobals(io.BytesIO(Path(path).read_bytes())).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError) as e:
        raise ValueError(f"{path}: refused pickle: {e}") from None
    try:
        check_plain(value)
    except ValueError as e:
        raise ValueError(f"{path}: refused pickle: {e}") from None
    return value

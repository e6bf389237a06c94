"""dlock._errors against the core's code table (no server needed).

The codes are defined once, in the core (dlock/code_table.h); Python reads
them through dlock._core.codes(). Python's own fact is which exception class
stands for which code: this checks that the map covers exactly the core's
codes, and that each class names the codes it stands for.
"""

from __future__ import annotations

import pickle

import dlock
from dlock import _core, _errors


def test_every_core_code_has_its_class() -> None:
    codes = _core.codes()
    assert codes[0][:2] == (0, "DLOCK_OK")
    values = [value for value, _, _ in codes]
    assert len(set(values)) == len(values)
    # Every code but DLOCK_OK is an outcome Python raises; nothing else is mapped.
    assert sorted(_errors._BY_CODE) == sorted(v for v in values if v != 0)
    for value, name, doc in codes:
        assert _core.code_name(value) == name and doc
        if value == 0:
            continue
        cls = dlock.error_class(value)
        assert issubclass(cls, dlock.Error)
        assert name in (cls.__doc__ or ""), f"{cls.__name__}'s docstring should name {name}"
        # A class stands for one code (its default), or for a few it names.
        err = cls("m", value)
        assert err.code == value and err.code_name == name
        assert pickle.loads(pickle.dumps(err)).code_name == name


def test_default_codes_and_exports() -> None:
    names = {value: name for value, name, _ in _core.codes()}
    for cls in set(_errors._BY_CODE.values()):
        assert _errors._BY_CODE[cls.default_code] is cls
        assert cls().code_name == names[cls.default_code]
        assert cls.__name__ in _errors.__all__ and getattr(dlock, cls.__name__) is cls
    assert _core.code_name(12345) == "DLOCK_UNKNOWN_CODE"
    assert dlock.Error("m", 12345).code_name == "DLOCK_UNKNOWN_CODE"

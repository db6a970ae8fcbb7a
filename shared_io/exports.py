"""A package's public names, exported from its ``__init__`` and loaded when first used
(PEP 562): ``from plans import PlanStore`` imports plans.store then, and ``import plans``
alone imports nothing. Start-up pays only for what a command uses (the console's fast
paths build no model), and the names a caller may rely on are listed in one place.

    __getattr__, __dir__ = lazy_exports(__name__, {"plans.store": ("PlanStore",), ...})

tests/unit/repo/test_public_names.py checks that every name resolves, is defined where
the table says, and that the names a type checker sees (the ``if TYPE_CHECKING:``
imports beside the table) are the same.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, exporting each name of
    ``table`` (module -> names) from its module, imported the first time it is asked."""
    where = {name: module for module, names in table.items() for name in names}

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return getattr_, dir_

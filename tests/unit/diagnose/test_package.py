"""The package's shape: its public names. (Imports, shells and processes are checked for
every package in tests/unit/repo/test_contracts.py.)"""

from __future__ import annotations

import diagnose_svc


def test_public_names_are_re_exported() -> None:
    """Everything in __all__ is importable from diagnose_svc, each name once (the list is
    written from the modules' own, scripts/generate-exports)."""
    for name in diagnose_svc.__all__:
        assert getattr(diagnose_svc, name) is not None, name
    assert len(diagnose_svc.__all__) == len(set(diagnose_svc.__all__))

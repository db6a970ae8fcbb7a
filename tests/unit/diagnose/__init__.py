"""Unit tests of the diagnosis service (diagnose_svc)."""

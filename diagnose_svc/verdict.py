"""What a diagnosis run ends with (the models live in shared_schema.diagnosis, the
contract of the diagnose socket: shared_schema.verdict)."""

from shared_schema.verdict import EndedBy, Evidence, NoteVerdict, PlanVerdict, Verdict

__all__ = ["EndedBy", "Evidence", "NoteVerdict", "PlanVerdict", "Verdict"]

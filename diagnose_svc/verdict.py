"""What a diagnosis run ends with (the models live in shared_schema.diagnosis, the
contract of the diagnose socket)."""

from shared_schema.diagnosis import EndedBy, Evidence, NoteVerdict, PlanVerdict, Verdict

__all__ = ["EndedBy", "Evidence", "NoteVerdict", "PlanVerdict", "Verdict"]

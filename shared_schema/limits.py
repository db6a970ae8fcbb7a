"""Bounds both halves and the console agree on, as plain numbers (no model is built)."""

#: The longest an approval can hold: one made for an apply window holds until that
#: window's end, and never longer than this.
APPROVAL_CEILING_SECONDS = 7 * 86400

"""Every bound the diagnosis service keeps, in one place.

The policy (possibly a remote model) only ever sees bounded text: what a tool returns,
what a subprocess printed and what the journal holds are all cut to these sizes.
"""

#: Characters of one observation shown to the policy, after redaction.
OBSERVATION_LIMIT = 2000
#: Read tool calls one step may carry (a CallTools batch), and so what a step may show.
MAX_CALLS_PER_STEP = 8
STEP_OBSERVATION_LIMIT = MAX_CALLS_PER_STEP * OBSERVATION_LIMIT
#: What a tool aims its own output at, leaving room for redaction markers.
TOOL_OUTPUT_BUDGET = 1800
#: Characters of machine-readable subprocess output kept for parsing.
COMMAND_PARSE_LIMIT = 256 * 1024
#: Seconds a systemctl query may take.
COMMAND_TIMEOUT_SECONDS = 10.0

#: Journal lines a tail may ask for, and what it asks for by default.
JOURNAL_MAX_LINES = 200
JOURNAL_DEFAULT_LINES = 50
#: Characters of one journal message.
JOURNAL_MESSAGE_LIMIT = 500

#: Characters of a health endpoint's body shown, and bytes read to find them.
HEALTH_BODY_LIMIT = 300
HEALTH_BODY_READ_BYTES = 4096

#: Entries of a unit's dependency lists (Requires=, After=, ...) shown.
UNIT_LIST_LIMIT = 32
#: Failed units listed.
FAILED_UNITS_LIMIT = 50

#: Characters of a symptom kept (the wire's limit).
SYMPTOM_LIMIT = 500
#: Characters of an observation quoted in an event or a log line.
EVENT_EXCERPT_LIMIT = 200

#: Bytes of one executor reply read at most: the wire's limit plus slack for framing.
REPLY_READ_LIMIT = 64 * 1024 + 1024

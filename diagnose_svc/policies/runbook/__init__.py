"""The embedded runbook: a deterministic, offline policy, and the default one.

It reasons the way an experienced operator does, over the service graph, from systemd's
facts; never from unit names, ports or scenarios. Each turn it reads the transcript
afresh (policies/findings.py), asks for the reads it still lacks, several at once (one step), and
when it has what it needs, or is shown no tools, decides.

Where each part lives:

* ``policy.py``: ``RunbookPolicy``, the Policy protocol's side (read, or decide; a refused
  plan or the same steps tried before go to a human).
* ``view.py``: ``View``, the service graph as the findings show it (scope, what is
  failing, the roots, what systemd stopped with a unit).
* ``reads.py``: what to read next (below). ``last_run.py``: how a unit's last run ended.
* ``decision.py``: the roots and what may be done to each; ``down.py`` for a root that
  is down, ``running.py`` for one that runs but fails, ``port_held.py`` for a port held
  by another process (either), ``notes.py`` for the notes to a human.
* ``outcomes.py`` (a cause for a human, a fix), ``words.py`` (facts in words) and
  ``constants.py`` (thresholds) are shared.

What it reads, breadth first:

1. The unit asked about, the failed units, and every configured health target at once.
2. Everything that looks failing and is in scope (the unit's dependencies, at any depth,
   and, when a health target fails, the units behind the failing targets): its state;
   and with it, for a unit that is down, its journal, its unit file (and the files it
   names), its filesystems and who holds its port; for a unit that runs but fails its
   health check, its processes, journal and unit file.
3. What the leads of those journals call for (a port another line says is in use), and
   the dependencies of what is failing that are not read yet.

How it decides:

* **The root** is the deepest failing unit whose own dependencies are healthy. Of those,
  one with a fault of its own (down, its process stopped, its health target not
  answering) comes before one that only relays an upstream's error (a proxy's 502).
* **Its failure mode, from facts**: masked, unit file broken, a full filesystem, a file it
  needs missing or unreadable by its user, its port held by another process, a setting
  its own output calls invalid that its unit file really sets, a start check that failed
  with nothing it checks changed since, a reload that failed: each is a note for a
  human, naming the cause and the fact. Otherwise a unit that is down is started again
  (its start limit cleared first if systemd gave up), with what BindsTo= stopped with it
  after it; one that runs but is stopped or does not answer is restarted, pinned to its
  invocation; one that answers errors because a file it was started with changed since
  is reloaded.
* **Untrusted text decides nothing.** A unit's own output is a lead a read tool must
  confirm: an injected line cannot turn a plan into a note or a note into a plan.
"""

from diagnose_svc.policies.runbook.policy import RunbookPolicy

__all__ = ["RunbookPolicy"]

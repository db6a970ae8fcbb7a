"""The unit that diagnoses a failed service is named after it once:
``opsbot-onfailure@app.service``, not ``opsbot-onfailure@app.service.service``.

An ``OnFailure=opsbot-onfailure@%N.service`` drop-in (``%N``: the unit's name without its
type suffix) names that unit; its instance, ``app``, reaches ``opsbot-diagnose run`` as
``%i``, which reads a name without a type as a service, as systemctl does. The drop-in is
written here by hand: it is the one ``opsbot watch`` is to write for a service.
"""

from __future__ import annotations

from testbed.container import BootedSystemd

UNIT = "demo-other.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d/50-opsbot-watch.conf"


def test_a_failed_service_is_diagnosed_by_onfailure_at_its_name(opsbot: BootedSystemd) -> None:
    """With the %N drop-in, systemd names the failure unit opsbot-onfailure@demo-other.service;
    when demo-other.service is killed that unit runs and diagnoses demo-other.service."""
    ct = opsbot
    ct.write_file(DROPIN, "[Unit]\nOnFailure=opsbot-onfailure@%N.service\n")
    ct.systemctl("daemon-reload")
    try:
        on_failure = ct.systemctl("show", "-P", "OnFailure", UNIT).stdout.strip()
        assert on_failure == "opsbot-onfailure@demo-other.service"
        ct.systemctl("kill", "--kill-who=main", "-s", "KILL", UNIT)

        def diagnosed() -> str:
            log = ct.journal("-u", on_failure, "-o", "cat")
            return log if "diagnose.finished" in log else ""

        log = ct.wait_for(diagnosed, timeout=60, interval=1, what=f"{on_failure} diagnosed")
        assert f"of {UNIT}:" in log, log
    finally:
        ct.run(["rm", "-rf", f"/etc/systemd/system/{UNIT}.d"])
        ct.systemctl("daemon-reload")
        ct.systemctl("reset-failed", UNIT, check=False)
        ct.systemctl("start", UNIT)

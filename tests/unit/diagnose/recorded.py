"""Output recorded from systemd 252 (Debian 12) in the booted test container.

``systemctl show --no-pager --timestamp=us+utc --property=... -- UNIT`` blocks, and the
journal lines of the same units as (time, priority, source, message), exactly as the
read tools saw them. The runbook tests replay them.
"""
# ruff: noqa: E501 - systemctl prints each Exec*= property on one long line

# A service whose main process was killed with SIGKILL (systemctl kill -s KILL).
KILLED_SHOW = """\
Restart=no
MainPID=0
Result=signal
NRestarts=0
ExecMainCode=2
ExecMainStatus=9
Id=killed.service
Requires=sysinit.target system.slice
Wants=
BindsTo=
BoundBy=
RequiredBy=
After=sysinit.target basic.target systemd-journald.socket system.slice
LoadState=loaded
ActiveState=failed
SubState=failed
FragmentPath=/etc/systemd/system/killed.service
UnitFileState=static
StateChangeTimestamp=Sun 2026-11-29 21:44:40.629087 UTC
ActiveEnterTimestamp=Sun 2026-11-29 21:44:38.559839 UTC
InactiveEnterTimestamp=Sun 2026-11-29 21:44:40.629087 UTC
NeedDaemonReload=no
LoadError=
InvocationID=82d3ba5b3fec48d39ed2be89fe58647a
ReloadResult=success
CanReload=no
ControlPID=0
ExecMainStartTimestamp=Sun 2026-11-29 21:44:38.559839 UTC
ActiveExitTimestamp=Sun 2026-11-29 21:44:40.629087 UTC
User=
Type=simple
ExecStartPre=
ExecStart={ path=/bin/sleep ; argv[]=/bin/sleep infinity ; ignore_errors=no ; start_time=[Sun 2026-11-29 21:44:38.559839 UTC] ; stop_time=[Sun 2026-11-29 21:44:40.629087 UTC] ; pid=90 ; code=killed ; status=9/KILL }
TriggeredBy=
"""
KILLED_JOURNAL = [
    ("2026-11-29T21:44:38.559839Z", "info", "systemd", "Started killed.service."),
    (
        "2026-11-29T21:44:40.628043Z",
        "notice",
        "systemd",
        "killed.service: Sent signal SIGKILL to main process 90 (sleep) on client request.",
    ),
    (
        "2026-11-29T21:44:40.628975Z",
        "notice",
        "systemd",
        "killed.service: Main process exited, code=killed, status=9/KILL",
    ),
    (
        "2026-11-29T21:44:40.629087Z",
        "warning",
        "systemd",
        "killed.service: Failed with result 'signal'.",
    ),
]

# Restart=on-failure with an nginx-style configuration error: the automatic restarts
# hit the start limit, Result stays exit-code.
BADCONF_SHOW = """\
Restart=on-failure
MainPID=0
Result=exit-code
NRestarts=3
ExecMainCode=1
ExecMainStatus=1
Id=badconf.service
Requires=sysinit.target system.slice
Wants=
BindsTo=
BoundBy=
RequiredBy=
After=sysinit.target basic.target systemd-journald.socket system.slice
LoadState=loaded
ActiveState=failed
SubState=failed
FragmentPath=/etc/systemd/system/badconf.service
UnitFileState=static
StateChangeTimestamp=Sun 2026-11-29 21:44:39.229962 UTC
ActiveEnterTimestamp=Sun 2026-11-29 21:44:39.071536 UTC
InactiveEnterTimestamp=Sun 2026-11-29 21:44:39.229962 UTC
NeedDaemonReload=no
LoadError=
InvocationID=b2af86d615a64c9aa0d98c270656519c
ReloadResult=success
CanReload=no
ControlPID=0
ExecMainStartTimestamp=Sun 2026-11-29 21:44:39.071536 UTC
ActiveExitTimestamp=Sun 2026-11-29 21:44:39.229962 UTC
User=
Type=simple
ExecStartPre=
ExecStart={ path=/usr/bin/badconf ; argv[]=/usr/bin/badconf -c /etc/badconf.conf ; ignore_errors=no ; start_time=[Sun 2026-11-29 21:44:38.559839 UTC] ; stop_time=[Sun 2026-11-29 21:44:40.629087 UTC] ; pid=90 ; code=exited ; status=1/FAILURE }
"""
_EMERG = 'nginx: [emerg] unknown directive "foo" in /etc/nginx/nginx.conf:12'
BADCONF_JOURNAL = [
    ("2026-11-29T21:44:38.556295Z", "info", "systemd", "Started badconf.service."),
    ("2026-11-29T21:44:38.561695Z", "info", "sh", _EMERG),
    (
        "2026-11-29T21:44:38.561398Z",
        "notice",
        "systemd",
        "badconf.service: Main process exited, code=exited, status=1/FAILURE",
    ),
    (
        "2026-11-29T21:44:38.561517Z",
        "warning",
        "systemd",
        "badconf.service: Failed with result 'exit-code'.",
    ),
    (
        "2026-11-29T21:44:39.064585Z",
        "info",
        "systemd",
        "badconf.service: Scheduled restart job, restart counter is at 2.",
    ),
    ("2026-11-29T21:44:39.064866Z", "info", "systemd", "Stopped badconf.service."),
    ("2026-11-29T21:44:39.071536Z", "info", "systemd", "Started badconf.service."),
    ("2026-11-29T21:44:39.073358Z", "info", "sh", _EMERG),
    (
        "2026-11-29T21:44:39.073668Z",
        "notice",
        "systemd",
        "badconf.service: Main process exited, code=exited, status=1/FAILURE",
    ),
    (
        "2026-11-29T21:44:39.073789Z",
        "warning",
        "systemd",
        "badconf.service: Failed with result 'exit-code'.",
    ),
    (
        "2026-11-29T21:44:39.229787Z",
        "info",
        "systemd",
        "badconf.service: Scheduled restart job, restart counter is at 3.",
    ),
    ("2026-11-29T21:44:39.229940Z", "info", "systemd", "Stopped badconf.service."),
    (
        "2026-11-29T21:44:39.229957Z",
        "warning",
        "systemd",
        "badconf.service: Start request repeated too quickly.",
    ),
    (
        "2026-11-29T21:44:39.229962Z",
        "warning",
        "systemd",
        "badconf.service: Failed with result 'exit-code'.",
    ),
    ("2026-11-29T21:44:39.230054Z", "err", "systemd", "Failed to start badconf.service."),
]

# ExecStart= names a program that does not exist.
NOEXEC_SHOW = (
    KILLED_SHOW.replace("killed.service", "noexec.service")
    .replace("Result=signal", "Result=exit-code")
    .replace("ExecMainCode=2\nExecMainStatus=9", "ExecMainCode=1\nExecMainStatus=203")
    .replace("code=killed ; status=9/KILL", "code=exited ; status=203/EXEC")
    .replace("/bin/sleep", "/usr/local/bin/noexec")
)
NOEXEC_JOURNAL = [
    ("2026-11-29T21:44:38.574586Z", "info", "systemd", "Started noexec.service."),
    (
        "2026-11-29T21:44:38.579486Z",
        "err",
        "(app)",
        "noexec.service: Failed to locate executable /nonexistent/bin/app: "
        "No such file or directory",
    ),
    (
        "2026-11-29T21:44:38.579510Z",
        "err",
        "(app)",
        "noexec.service: Failed at step EXEC spawning /nonexistent/bin/app: "
        "No such file or directory",
    ),
    (
        "2026-11-29T21:44:38.579919Z",
        "notice",
        "systemd",
        "noexec.service: Main process exited, code=exited, status=203/EXEC",
    ),
    (
        "2026-11-29T21:44:38.580057Z",
        "warning",
        "systemd",
        "noexec.service: Failed with result 'exit-code'.",
    ),
]

# A running service whose ExecReload= failed (nginx -s reload with a broken config).
RELOADFAIL_SHOW = """\
Restart=no
MainPID=88
Result=success
NRestarts=0
ExecMainCode=0
ExecMainStatus=0
Id=reloadfail.service
Requires=sysinit.target system.slice
Wants=
BindsTo=
BoundBy=
RequiredBy=
After=sysinit.target basic.target systemd-journald.socket system.slice
LoadState=loaded
ActiveState=active
SubState=running
FragmentPath=/etc/systemd/system/reloadfail.service
UnitFileState=static
StateChangeTimestamp=Sun 2026-11-29 21:44:38.560914 UTC
ActiveEnterTimestamp=Sun 2026-11-29 21:44:38.560914 UTC
InactiveEnterTimestamp=
NeedDaemonReload=no
LoadError=
InvocationID=be6c60c4597145ed871878c6d4ac0a91
ReloadResult=exit-code
CanReload=yes
ControlPID=0
ExecMainStartTimestamp=Sun 2026-11-29 21:44:38.560914 UTC
ActiveExitTimestamp=
User=
Type=simple
ExecStartPre=
ExecStart={ path=/usr/sbin/reloadfail ; argv[]=/usr/sbin/reloadfail ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
"""
RELOADFAIL_JOURNAL = [
    ("2026-11-29T21:44:38.560914Z", "info", "systemd", "Started reloadfail.service."),
    ("2026-11-29T21:44:40.617259Z", "info", "systemd", "Reloading reloadfail.service..."),
    (
        "2026-11-29T21:44:40.618658Z",
        "info",
        "sh",
        'nginx: [emerg] invalid number of arguments in "listen" directive',
    ),
    (
        "2026-11-29T21:44:40.617531Z",
        "notice",
        "systemd",
        "reloadfail.service: Control process exited, code=exited, status=1/FAILURE",
    ),
    ("2026-11-29T21:44:40.617540Z", "err", "systemd", "Reload failed for reloadfail.service."),
]

# db.service exited with status 2; app.service (Requires=db.service) keeps running.
DB_SHOW = (
    KILLED_SHOW.replace("killed.service", "db.service")
    .replace("RequiredBy=\n", "RequiredBy=app.service\n")
    .replace("Result=signal", "Result=exit-code")
    .replace("ExecMainCode=2\nExecMainStatus=9", "ExecMainCode=1\nExecMainStatus=2")
    .replace("code=killed ; status=9/KILL", "code=exited ; status=2/INVALIDARGUMENT")
)
DB_JOURNAL = [
    ("2026-11-29T21:44:38.586538Z", "info", "systemd", "Started db.service."),
    (
        "2026-11-29T21:44:38.593014Z",
        "notice",
        "systemd",
        "db.service: Main process exited, code=exited, status=2/INVALIDARGUMENT",
    ),
    (
        "2026-11-29T21:44:38.593279Z",
        "warning",
        "systemd",
        "db.service: Failed with result 'exit-code'.",
    ),
]
APP_SHOW = """\
Restart=no
MainPID=95
Result=success
NRestarts=0
ExecMainCode=0
ExecMainStatus=0
Id=app.service
Requires=sysinit.target db.service system.slice
Wants=
BindsTo=
BoundBy=
RequiredBy=
After=sysinit.target db.service basic.target systemd-journald.socket system.slice
LoadState=loaded
ActiveState=active
SubState=running
FragmentPath=/etc/systemd/system/app.service
UnitFileState=static
StateChangeTimestamp=Sun 2026-11-29 21:44:38.590102 UTC
ActiveEnterTimestamp=Sun 2026-11-29 21:44:38.590102 UTC
InactiveEnterTimestamp=
NeedDaemonReload=no
LoadError=
InvocationID=3b6ba3c857944116b4936dffb75ea52f
ReloadResult=success
CanReload=no
ControlPID=0
ExecMainStartTimestamp=Sun 2026-11-29 21:44:38.590102 UTC
ActiveExitTimestamp=
User=
Type=simple
ExecStartPre=
ExecStart={ path=/bin/sleep ; argv[]=/bin/sleep infinity ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
"""
APP_JOURNAL = [("2026-11-29T21:44:38.590102Z", "info", "systemd", "Started app.service.")]

# What systemctl show says about a unit that does not exist, and a masked one.
NOT_FOUND_SHOW = """\
Restart=no
MainPID=0
Result=success
NRestarts=0
ExecMainCode=0
ExecMainStatus=0
Id=nonexist.service
Requires=
Wants=
BindsTo=
BoundBy=
RequiredBy=
After=
LoadState=not-found
ActiveState=inactive
SubState=dead
FragmentPath=
UnitFileState=
StateChangeTimestamp=
ActiveEnterTimestamp=
InactiveEnterTimestamp=
NeedDaemonReload=no
LoadError=org.freedesktop.systemd1.NoSuchUnit "Unit nonexist.service not found."
InvocationID=
ReloadResult=success
CanReload=no
ControlPID=0
ExecMainStartTimestamp=
ActiveExitTimestamp=
User=
Type=simple
ExecStartPre=
ExecStart=
"""
MASKED_SHOW = (
    NOT_FOUND_SHOW.replace("nonexist.service", "cron.service")
    .replace("LoadState=not-found", "LoadState=masked")
    .replace("UnitFileState=\n", "UnitFileState=masked\n")
    .replace(
        'org.freedesktop.systemd1.NoSuchUnit "Unit cron.service not found."',
        'org.freedesktop.systemd1.UnitMasked "Unit cron.service is masked."',
    )
)

# systemctl list-units --state=failed --output=json --no-pager
FAILED_UNITS_JSON = (
    '[{"unit":"badconf.service","load":"loaded","active":"failed","sub":"failed",'
    '"description":"badconf.service"},{"unit":"db.service","load":"loaded","active":"failed",'
    '"sub":"failed","description":"db.service"},{"unit":"killed.service","load":"loaded",'
    '"active":"failed","sub":"failed","description":"killed.service"}]'
)

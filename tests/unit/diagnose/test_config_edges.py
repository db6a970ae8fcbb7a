"""What a unit's configuration says it reaches and where it serves: environment, command
line, config files of proxies (nginx, HAProxy, Caddy, with includes) and of anything
else; and each endpoint matched to the unit that serves it, even when that one is down.
Values never leave the reader: only the endpoint and the setting's name or file:line."""

from __future__ import annotations

from pathlib import Path

from diagnose_svc.tools import _proxy_configs as proxies
from diagnose_svc.tools._config_files import UnitConfig, config_paths, unit_config
from diagnose_svc.tools._host_units import enabled
from diagnose_svc.tools._mentions import Mention, from_argv, from_environment, from_generic
from diagnose_svc.tools.read_config_edges import (
    CONFIGURED,
    LIVE,
    RUNTIME,
    SOCKET,
    resolve,
)


def test_a_service_enabled_under_any_target_is_read_even_when_systemd_has_not_loaded_it(
    tmp_path: Path,
) -> None:
    """`systemctl enable` links a service into a target's .wants/ (or .requires/): those
    links name services the host is meant to run, loaded now or not; templates' and other
    unit types' links are not services to read."""
    for target, link in (
        ("multi-user.target.wants", "shop-db.service"),
        ("batch.target.wants", "reports.service"),
        ("multi-user.target.requires", "cache.service"),
        ("sockets.target.wants", "api.socket"),
    ):
        (tmp_path / target).mkdir(exist_ok=True)
        (tmp_path / target / link).symlink_to(f"/etc/systemd/system/{link}")
    patterns = (f"{tmp_path}/*.wants/*.service", f"{tmp_path}/*.requires/*.service")
    assert enabled(patterns) == ["cache.service", "reports.service", "shop-db.service"]


def endpoints(mentions: object) -> set[tuple[str, str]]:
    return {(m.endpoint, m.role) for m in mentions}  # type: ignore[attr-defined]


def test_an_environment_names_what_the_app_reaches_and_never_shows_a_value() -> None:
    """A URL or host:port in any variable is reached; a bare PORT= may be its own; a
    remote host and a worker count are no endpoint; the password in the URL is nowhere."""
    found = list(
        from_environment(
            [
                "DATABASE_URL=postgres://app:s3cret@127.0.0.1:5433/shop",
                "CACHE=localhost:6380",
                "PORT=8080",
                "WORKERS=4",
                "REMOTE=https://api.example.com:8443/v1",
            ]
        )
    )
    assert endpoints(found) == {(":5433", "reach"), (":6380", "reach"), (":8080", "either")}
    assert {m.source for m in found} == {
        "Environment=DATABASE_URL",
        "Environment=CACHE",
        "Environment=PORT",
    }
    assert "s3cret" not in repr(found)


def test_a_command_line_says_where_it_listens_and_what_it_reaches() -> None:
    """--listen is where it serves, --upstream what it reaches, a lone port after the
    program may be either; sleep's argument is no port; a socket path is reached."""
    argv = ["/usr/bin/app", "--listen", "127.0.0.1:9000", "--upstream=http://localhost:9100"]
    assert endpoints(from_argv(argv, "ExecStart=")) == {(":9000", "own"), (":9100", "reach")}
    assert endpoints(from_argv(["/usr/bin/python3", "-m", "http.server", "8081"], "x")) == {
        (":8081", "either")
    }
    assert endpoints(from_argv(["/bin/sleep", "infinity"], "x")) == set()
    assert endpoints(from_argv(["/usr/bin/w", "--socket", "/run/w/w.sock"], "x")) == {
        ("/run/w/w.sock", "reach")
    }


def test_a_json_or_key_value_config_is_read_by_its_keys() -> None:
    """A JSON config's keys say what its numbers are; an INI file's lines too, comments
    left out, each mention with its file:line."""
    text = '{"port": 20411, "upstreams": [20412, 20413], "timeout": 3, "name": "n"}'
    assert endpoints(from_generic(text, "/etc/a.json")) == {
        (":20411", "either"),
        (":20412", "reach"),
        (":20413", "reach"),
    }
    ini = "[server]\nbind = 0.0.0.0:7000\n# backend = 127.0.0.1:1\nbackend = 127.0.0.1:7001\n"
    found = list(from_generic(ini, "/etc/b.ini"))
    assert endpoints(found) == {(":7000", "own"), (":7001", "reach")}
    assert {m.source for m in found} == {"/etc/b.ini:2", "/etc/b.ini:4"}


NGINX = {
    "/etc/nginx/nginx.conf": (
        "events {}\nhttp {\n  include /etc/nginx/conf.d/*.conf;\n  include sites-enabled/shop;\n}\n"
    ),
    "/etc/nginx/conf.d/pool.conf": (
        "upstream pool {\n  server 127.0.0.1:21001;\n  server localhost:21002 backup;\n}\n"
    ),
    "/etc/nginx/sites-enabled/shop": (
        "server {\n  listen 8088;\n  server_name shop;\n"
        "  location / { proxy_pass http://pool; }\n"
        "  location /api/ { proxy_pass http://127.0.0.1:21003/; }  # the api\n"
        "  location /php { fastcgi_pass unix:/run/php/fpm.sock; }\n"
        "  location /ext { proxy_pass https://example.com; }\n}\n"
    ),
}


def globber(pattern: str) -> list[str]:
    import fnmatch

    return sorted(p for p in NGINX if fnmatch.fnmatch(p, pattern))


def test_nginx_upstreams_and_proxy_passes_through_its_includes() -> None:
    """nginx's own listen, its upstream pool's servers (in a conf.d include), a direct
    proxy_pass and a FastCGI socket (in a site include) are found; a remote host is not."""
    found = list(proxies.nginx("/etc/nginx/nginx.conf", NGINX.__getitem__, globber))
    assert endpoints(found) == {
        (":8088", "own"),
        (":21001", "reach"),
        (":21002", "reach"),
        (":21003", "reach"),
        ("/run/php/fpm.sock", "reach"),
    }
    [api] = [m for m in found if m.port == 21003]
    assert api.source == "/etc/nginx/sites-enabled/shop:5"


def test_an_include_loop_is_read_once() -> None:
    """A config that includes itself is read once, and an upstream that no proxy_pass
    uses is nothing the proxy reaches."""
    files = {"/etc/n.conf": "include /etc/n.conf;\nhttp { upstream u { server 127.0.0.1:1; } }"}
    found = list(proxies.nginx("/etc/n.conf", files.__getitem__, lambda p: []))
    assert endpoints(found) == set()  # an upstream no proxy_pass uses is not reached


def test_haproxy_servers_and_binds() -> None:
    """HAProxy's binds are its own, its local servers what it reaches; a server on
    another host is no unit here."""
    cfg = (
        "frontend www\n  bind *:8443,127.0.0.1:8444\n  default_backend app\n"
        "backend app\n  balance roundrobin\n  server a1 127.0.0.1:22001 check\n"
        "  server a2 127.0.0.1:22002 check  # second\n  server far 10.9.9.9:80\n"
    )
    found = list(
        proxies.haproxy(["/etc/haproxy/haproxy.cfg"], {"/etc/haproxy/haproxy.cfg": cfg}.__getitem__)
    )
    assert endpoints(found) == {
        (":8443", "own"),
        (":8444", "own"),
        (":22001", "reach"),
        (":22002", "reach"),
    }


def test_caddy_reverse_proxy_and_site_addresses_through_imports() -> None:
    """Caddy's site address is its own; reverse_proxy upstreams in an imported file are
    reached."""
    files = {
        "/etc/caddy/Caddyfile": ":8090 {\n  import sites/*\n}\n",
        "/etc/caddy/sites/a": "reverse_proxy /api/* localhost:23001 127.0.0.1:23002\n",
    }
    found = list(
        proxies.caddy(
            "/etc/caddy/Caddyfile",
            files.__getitem__,
            lambda p: sorted(f for f in files if f.startswith(p.rstrip("*"))),
        )
    )
    assert endpoints(found) == {(":8090", "own"), (":23001", "reach"), (":23002", "reach")}


def test_a_file_the_diagnose_user_cannot_read_is_reported_not_worked_around(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A config file the command names is read; an EnvironmentFile= that cannot be read
    is reported as such, with why."""
    config = tmp_path / "app.json"
    config.write_text('{"backend": "127.0.0.1:24001"}')
    missing = tmp_path / "secret.env"
    got = unit_config(
        "app.service",
        [],
        [["/usr/bin/app", "--config", str(config)]],
        [str(missing)],
        None,
    )
    assert endpoints(got.mentions) == {(":24001", "reach")}
    assert got.unreadable == [f"{missing} (not there, or hidden from opsbot-diagnose)"]
    assert config_paths(["/usr/sbin/nginx", "-c", "/etc/x/n.conf", "-g", "daemon off;"]) == [
        "/etc/x/n.conf"
    ]


def mention(port: int, role: str, source: str = "s") -> Mention:
    return Mention(port, None, role, source)  # type: ignore[arg-type]


def test_each_reached_port_is_matched_to_who_serves_it_now_or_is_configured_to() -> None:
    """front reaches :21001 (app listens there now) and :21002 (ledger is down, but its
    own command line says it serves there); app's own port is its own, no edge."""
    configs = [
        UnitConfig(
            "front.service",
            [mention(8088, "own"), mention(21001, "reach"), mention(21002, "reach")],
        ),
        UnitConfig("app.service", [mention(21001, "either")]),
        UnitConfig("ledger.service", [mention(21002, "either")]),
        UnitConfig("worker.service", [Mention(None, "/run/q.sock", "reach", "Environment=Q")]),
    ]
    edges = resolve(
        configs, {21001: "app.service", 8088: "front.service"}, {"/run/q.sock": "q.service"}
    )
    assert [(e.client, e.server, e.endpoint, e.how) for e in edges] == [
        ("front.service", "ledger.service", ":21002", CONFIGURED),
        ("worker.service", "q.service", "/run/q.sock", SOCKET),
        ("front.service", "app.service", ":21001", LIVE),
    ]


def test_a_bare_port_is_never_an_edge_out_and_two_claimants_are_no_edge() -> None:
    """A unit whose PORT= is held by another process does not "reach" that process; a
    port two down units both claim says nothing about which one a client needs."""
    configs = [
        UnitConfig("a.service", [mention(9000, "either")]),
        UnitConfig("b.service", [mention(9100, "reach")]),
        UnitConfig("c.service", [mention(9100, "own")]),
        UnitConfig("d.service", [mention(9100, "either")]),
    ]
    assert resolve(configs, {9000: "intruder.service"}, {}) == []


def test_a_socket_path_under_a_units_runtime_directory_is_an_edge_to_it_while_it_is_down() -> None:
    """app is configured to reach /run/ledger/ledger.sock; ledger is down, so no socket
    is there, but ledger's RuntimeDirectory=ledger holds /run/ledger: the edge is to
    ledger. A runtime directory inside another's holds what is under it; a unit's own
    runtime directory is no edge."""
    configs = [
        UnitConfig(
            "app.service", [Mention(None, "/run/ledger/ledger.sock", "reach", "Environment=DB")]
        ),
        UnitConfig(
            "ledger.service", [Mention(None, "/run/ledger/other.sock", "reach", "its config")]
        ),
    ]
    edges = resolve(configs, {}, {}, {"/run/ledger": "ledger.service"})
    assert [(e.client, e.server, e.endpoint, e.how) for e in edges] == [
        ("app.service", "ledger.service", "/run/ledger/ledger.sock", RUNTIME)
    ]
    nested = {"/run/ledger": "ledger.service", "/run/ledger/sub": "other.service"}
    deeper = [UnitConfig("app.service", [Mention(None, "/run/ledger/sub/x.sock", "reach", "e")])]
    assert [e.server for e in resolve(deeper, {}, {}, nested)] == ["other.service"]
    own = [UnitConfig("ledger.service", [Mention(None, "/run/ledger/x.sock", "reach", "e")])]
    assert resolve(own, {}, {}, nested) == []

#!/usr/bin/env bash
# Certificates for shipping journals to one collector (role opsbot.fleet.journal), on the
# controller:
#   packaging/ansible/journal-pki.sh DIR COLLECTOR HOST...
# - DIR/ca.crt and DIR/ca.key: a CA of your own (keep ca.key off the hosts; it signs only
#   these certificates),
# - DIR/NAME.crt and DIR/NAME.key for the collector and each host, CN=NAME and
#   subjectAltName DNS:NAME. The collector's certificate is what the hosts check before
#   they send (systemd-journal-upload --trust=ca.crt): their journals go to no one else.
#   Debian 12's systemd-journal-remote is built without GnuTLS, so it cannot check the
#   hosts' certificates: it files each sender's entries by its address
#   (remote-ADDRESS.journal), and the collector's /etc/opsbot/journal-sources (written by
#   the role from the inventory) says which host an address is. The hosts' certificates are
#   still sent, for a collector built with GnuTLS (remote-CN=NAME.journal).
# Existing files are kept (run it again to add a host). Certificates last 825 days.
set -euo pipefail

case "${1:-}" in
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
esac
[ $# -ge 2 ] || { echo "journal-pki.sh: usage: journal-pki.sh DIR COLLECTOR HOST... (see --help)" >&2; exit 2; }
command -v openssl >/dev/null || { echo "journal-pki.sh: openssl is not installed" >&2; exit 1; }
dir=$1
shift
name_ok='^[A-Za-z0-9]([A-Za-z0-9.-]{0,62})$'
for name in "$@"; do
    [[ $name =~ $name_ok ]] || { echo "journal-pki.sh: $name is not a host name" >&2; exit 2; }
done
install -d -m 0700 "$dir"
days=825
if [ ! -e "$dir/ca.key" ]; then
    echo "==> $dir/ca.crt: a new CA"
    openssl req -x509 -newkey rsa:3072 -nodes -sha256 -days "$days" -subj "/CN=opsbot journal CA" \
        -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    chmod 0600 "$dir/ca.key"
fi
for name in "$@"; do
    [ -e "$dir/$name.crt" ] && { echo "==> $dir/$name.crt exists: kept"; continue; }
    echo "==> $dir/$name.crt: CN=$name"
    openssl req -newkey rsa:3072 -nodes -sha256 -subj "/CN=$name" \
        -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
    chmod 0600 "$dir/$name.key"
    printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$name" > "$dir/$name.ext"
    openssl x509 -req -sha256 -days "$days" -in "$dir/$name.csr" -CA "$dir/ca.crt" \
        -CAkey "$dir/ca.key" -CAcreateserial -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
    rm -f "$dir/$name.csr" "$dir/$name.ext"
done

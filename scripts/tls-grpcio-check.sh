#!/usr/bin/env bash
# An independent TLS client against a dn-sim with TLS: Python grpcio (BoringSSL) sends a real
# ContainerCommandRequestProto Echo (scripts/lib/grpcio_echo.py). Installs grpcio itself when
# `import grpc` fails: into a venv under target/ with pip. Prints one `!!! SKIPPED ... registry out
# of reach ... !!!` line and exits 3 only when grpcio (or python3-venv) cannot be installed and a
# probe finds PyPI (or Debian's archive) out of reach; exits 1 when it cannot be had otherwise.
#
# Usage: scripts/tls-grpcio-check.sh HOST:PORT CA_PEM [CLIENT_CERT_PEM CLIENT_KEY_PEM] [--expect-refusal]
#   --expect-refusal: the call must fail (e.g. a dn-sim with --tls-client-ca and no client cert).
# Called by dn-sim's tests (dn-sim/tests/tls.rs), which make the certificates and start dn-sim.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 2 ] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

. "$root/scripts/lib.sh"
# Exit 3 only for a registry out of reach, as a probe showed (the line says `registry out of
# reach`); any other reason grpcio cannot be had is a failure, exit 1.
skip() {
    echo "!!! SKIPPED tls-grpcio-check: registry out of reach: $1 !!!"
    exit 3
}
fail() {
    echo "tls-grpcio-check: FAILED: $1" >&2
    exit 1
}

if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    ensure_debian_packages python3 python3-venv >&2 || true
    if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        debian_archive_reachable || skip "python3/python3-venv missing and Debian's archive unreachable (probe: deb.debian.org)"
        fail "python3 with its venv module could not be installed, Debian's archive in reach"
    fi
fi
python=python3
if ! python3 -c 'import grpc' 2>/dev/null; then
    venv="$root/target/grpcio-venv"
    if ! "$venv/bin/python" -c 'import grpc' 2>/dev/null; then
        python3 -m venv "$venv" >/dev/null 2>&1 || fail "python3 -m venv $venv failed"
        if ! "$venv/bin/pip" install --quiet --disable-pip-version-check grpcio >"$venv.log" 2>&1; then
            pypi_reachable || skip "pip install grpcio failed and PyPI is unreachable (probe: pypi.org)"
            tail -5 "$venv.log" >&2
            fail "pip install grpcio failed with PyPI in reach"
        fi
    fi
    python="$venv/bin/python"
fi
exec "$python" "$root/scripts/lib/grpcio_echo.py" "$@"

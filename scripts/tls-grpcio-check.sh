#!/usr/bin/env bash
# An independent TLS client against a dn-sim with TLS: Python grpcio (BoringSSL) sends a real
# ContainerCommandRequestProto Echo (scripts/lib/grpcio_echo.py). Installs grpcio itself when
# `import grpc` fails: into a venv under target/ with pip. Prints one `!!! SKIPPED ... !!!` line and
# exits 0 when grpcio cannot be had (no python3, no venv module, the package index out of reach).
#
# Usage: scripts/tls-grpcio-check.sh HOST:PORT CA_PEM [CLIENT_CERT_PEM CLIENT_KEY_PEM] [--expect-refusal]
#   --expect-refusal: the call must fail (e.g. a dn-sim with --tls-client-ca and no client cert).
# Called by dn-sim's tests (dn-sim/tests/tls.rs), which make the certificates and start dn-sim.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 2 ] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

skip() {
    echo "!!! SKIPPED tls-grpcio-check: $1 !!!"
    exit 0
}

command -v python3 >/dev/null || skip "no python3"
python=python3
if ! python3 -c 'import grpc' 2>/dev/null; then
    venv="$root/target/grpcio-venv"
    if ! "$venv/bin/python" -c 'import grpc' 2>/dev/null; then
        python3 -m venv "$venv" >/dev/null 2>&1 || skip "python3 -m venv failed (no venv module?)"
        "$venv/bin/pip" install --quiet --disable-pip-version-check grpcio >/dev/null 2>&1 \
            || skip "pip install grpcio failed (package index out of reach?)"
    fi
    python="$venv/bin/python"
fi
exec "$python" "$root/scripts/lib/grpcio_echo.py" "$@"

#!/usr/bin/env bash
# loadgen built without the embedded dn-sim links no server: it builds, and its normal
# dependency tree holds no dn-sim, axum or rusqlite.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -p loadgen --no-default-features --locked
if found=$(cargo tree -p loadgen --no-default-features -e normal --locked | grep -E 'dn-sim|axum|rusqlite'); then
    echo "check-no-server: loadgen --no-default-features depends on a server crate:" >&2
    echo "$found" >&2
    exit 1
fi
echo "check-no-server: ok"

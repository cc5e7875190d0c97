#!/usr/bin/env bash
# loadgen built without the embedded dn-sim links no server: it builds, its normal dependency
# tree holds no dn-sim, axum or rusqlite, and tonic is built without its server.
set -euo pipefail
cd "$(dirname "$0")/.."
# A target folder of its own: the binary built here must not replace target/debug/loadgen, which
# the later stages run with its embedded dn-sim.
cargo build -p loadgen --no-default-features --locked --target-dir target/no-server
if found=$(cargo tree -p loadgen --no-default-features -e normal --locked | grep -E 'dn-sim|axum|rusqlite'); then
    echo "check-no-server: loadgen --no-default-features depends on a server crate:" >&2
    echo "$found" >&2
    exit 1
fi
# Normal dependencies only: a dev-dependency's features (loadgen's tests run a tonic server as a
# fake DataNode) reach the test builds, not the binary (feature resolver 2 and later).
if found=$(cargo tree -p loadgen --no-default-features -e normal,features -i tonic --locked | grep -E 'tonic feature "(server|router|transport)"'); then
    echo "check-no-server: loadgen --no-default-features builds tonic's server:" >&2
    echo "$found" >&2
    exit 1
fi
# Under CI=true the folder goes once checked: nothing later uses it, and the real DataNode of
# the conformance stage needs the disk (64 MB reserved per open container).
if [ "${CI:-}" = true ]; then
    rm -rf target/no-server
fi
echo "check-no-server: ok"

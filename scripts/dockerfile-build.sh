#!/usr/bin/env bash
# Builds the real Dockerfile with Podman where its base images cannot be pulled (no image
# registry), by passing stand-ins through its RUST_IMAGE and RUNTIME_IMAGE build arguments:
# - localhost/ozone-dn-lab/rust-standin:1.95-bookworm: Debian bookworm from debootstrap (minbase,
#   gcc, libc6-dev, ca-certificates) plus this machine's Rust toolchain, as rust:1.95-bookworm;
# - localhost/ozone-dn-lab/runtime-standin:cc-debian12-nonroot: FROM scratch with glibc and
#   libgcc_s and a nonroot user (65532), as gcr.io/distroless/cc-debian12:nonroot (no shell).
# Then it runs what it built: dn-sim from its image (the image's own HEALTHCHECK must pass, with
# an OZONE-SITE.XML_ variable in its environment) and a loadgen echo from the loadgen image.
# The build itself fetches crates from crates.io, with the host's CA bundle mounted.
# Not part of the test command: a release build in a container takes several minutes and the
# stand-in images about 1.2 GB. Left behind: the stand-ins and localhost/ozone-dn-lab/*:dockerfile.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_debian_packages podman runc netavark aardvark-dns iptables debootstrap
work=$(mktemp -d /tmp/ozone-dn-lab-dockerfile.XXXXXX)
net="ozone-dn-lab-dockerfile-$$"
cleanup() {
    podman rm -f "$net-dn-sim" >/dev/null 2>&1 || true
    podman network rm -f "$net" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
podman_conf "$work"

rust_image=localhost/ozone-dn-lab/rust-standin:1.95-bookworm
runtime_image=localhost/ozone-dn-lab/runtime-standin:cc-debian12-nonroot
if ! podman image exists "$rust_image"; then
    echo "making $rust_image (debootstrap bookworm + $(rustc --version))"
    debootstrap --variant=minbase --include=gcc,libc6-dev,ca-certificates bookworm "$work/rust" \
        http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 || { tail "$work/debootstrap.log"; exit 1; }
    sysroot=$(rustc --print sysroot)
    mkdir -p "$work/rust/usr/local/rust" "$work/rust/usr/local/cargo"
    cp -a "$sysroot/bin" "$sysroot/lib" "$work/rust/usr/local/rust/"
    tar -C "$work/rust" -c . | podman import -q \
        --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV CARGO_HOME=/usr/local/cargo' - "$rust_image" >/dev/null
    rm -rf "$work/rust"
fi
if ! podman image exists "$runtime_image"; then
    mkdir -p "$work/runtime"
    [ -x target/debug/dn-sim ] || cargo build -q --locked -p dn-sim
    scratch_rootfs "$work/runtime/rootfs" target/debug/dn-sim
    printf '%s\n' 'FROM scratch' 'COPY rootfs/ /' 'USER 65532:65532' >"$work/runtime/Containerfile"
    podman build -q -t "$runtime_image" "$work/runtime" >/dev/null
fi

ca=()
[ -f /etc/ssl/certs/ca-certificates.crt ] && ca=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
for target in dn-sim loadgen; do
    start=$SECONDS
    old=$(podman image inspect --format '{{.Id}}' "localhost/ozone-dn-lab/$target:dockerfile" 2>/dev/null || true)
    # --layers=false: no 1 GB builder image left per build; the cache mounts keep rebuilds quick.
    podman build --format docker --pull=never --layers=false "${ca[@]}" \
        --build-arg RUST_IMAGE="$rust_image" --build-arg RUNTIME_IMAGE="$runtime_image" \
        --target "$target" -t "localhost/ozone-dn-lab/$target:dockerfile" . >"$work/build-$target.log" 2>&1 ||
        { tail -20 "$work/build-$target.log"; echo "FAIL: podman build --target $target"; exit 1; }
    [ -z "$old" ] || [ "$old" = "$(podman image inspect --format '{{.Id}}' "localhost/ozone-dn-lab/$target:dockerfile")" ] ||
        podman rmi "$old" >/dev/null 2>&1 || true
    echo "ok: Dockerfile --target $target built in $((SECONDS - start)) s: $(podman image inspect --format '{{.Size}}' "localhost/ozone-dn-lab/$target:dockerfile") bytes, user $(podman image inspect --format '{{.Config.User}}' "localhost/ozone-dn-lab/$target:dockerfile")"
done

podman network create "$net" >/dev/null
podman run -d --name "$net-dn-sim" --network "$net" --network-alias dn-sim \
    -e OZONE-SITE.XML_hdds.datanode.handler.count=4 localhost/ozone-dn-lab/dn-sim:dockerfile >/dev/null 2>&1
# No systemd here to run the image's HEALTHCHECK on a timer: run it as the timer would.
deadline=$((SECONDS + 30))
until podman healthcheck run "$net-dn-sim" >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && { podman logs "$net-dn-sim"; echo "FAIL: dn-sim from the Dockerfile never became healthy"; exit 1; }
    sleep 0.5
done
podman logs "$net-dn-sim" 2>&1 | grep -q "handlers=4" || { podman logs "$net-dn-sim"; echo "FAIL: OZONE-SITE.XML_ variable not applied"; exit 1; }
echo "ok: dn-sim from the Dockerfile is $(podman inspect --format '{{.State.Health.Status}}' "$net-dn-sim") (image HEALTHCHECK), runs as $(podman top "$net-dn-sim" user 2>/dev/null | tail -1), 4 handlers from OZONE-SITE.XML_"
out=$(podman run --rm --network "$net" localhost/ozone-dn-lab/loadgen:dockerfile echo --target dn-sim:9859 -n 5000 -t 8 2>/dev/null)
grep -q "^Successful executions: 5000$" <<<"$out" || { echo "$out"; echo "FAIL: loadgen from the Dockerfile"; exit 1; }
echo "ok: loadgen from the Dockerfile sent 5000 echoes to it:$(grep -E '^ +mean rate' <<<"$out" | tr -s ' ')"

#!/usr/bin/env bash
# Builds the Sluice image offline with podman (buildah underneath) and prints its reference,
# localhost/sluice:<version>, as the last line on stdout (progress and the size go to stderr):
#
#   REF=$(scripts/image.sh)          # then: podman run ... "$REF" serve --config ...
#
# No registry is reachable here, so deploy/Dockerfile's base image cannot be pulled: the image is
# built FROM scratch (deploy/Containerfile.scratch) with what this machine has:
#   - the release binary built here (cargo build --release -p sluice, in $CARGO_TARGET_DIR or
#     target/), stripped, with the file capability cap_net_bind_service=+p so user 65532 binds
#     80/443 (setcap here, before COPY, which keeps the security.capability attribute; permitted
#     only, not effective: sluice raises it itself, and containers that drop it can still exec);
#   - dynamically linked: the shared libraries `ldd` names (glibc's libc and libm, the loader,
#     libgcc_s) copied in at the paths it names. Not static musl: the toolchain here has no musl
#     target and rustup cannot fetch one offline; and the glibc build is the one every test runs;
#   - Debian's CA bundle, passwd/group entries for root and nonroot (65532) as distroless has them,
#     a world-writable /tmp (sticky) for `sluice demo` without a volume.
# Then checks the built image has the capability and is at most 40 MB.
#
# Installs podman, buildah and runc with apt when missing (the way scripts/test.sh installs
# packages). Env: SLUICE_IMAGE_SOURCE (the org.opencontainers.image.source label; default the git
# remote `origin`'s URL, else "unknown"); SLUICE_IMAGE_PROFILE=release (default) or dev: the test
# command builds its image from the debug binary `cargo test` has already built (a cold release
# build would add a quarter of an hour to CI); the 40 MB bound is the release image's (a stripped
# debug binary is ~38 MB), so a dev image prints its size and is not held to it. Measured on 2 shared cores: ~2 s with the release build
# fresh (the layers are cached by content); the release build after a change to the workspace's
# code ~5 min, from nothing (dependencies too) longer.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "image: $*" >&2; }

missing=()
command -v podman >/dev/null || missing+=(podman)
command -v buildah >/dev/null || missing+=(buildah)
command -v runc >/dev/null || missing+=(runc)
command -v setcap >/dev/null || missing+=(libcap2-bin)
command -v strip >/dev/null || missing+=(binutils)
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
if ((${#missing[@]})); then
  sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
  log "installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
# runc, not crun (crun refuses these VMs' hybrid cgroups); cgroupfs: there is no systemd.
podman=(podman --runtime runc --cgroup-manager cgroupfs)

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[[ -n $version ]] || { log "no [workspace.package] version in Cargo.toml"; exit 1; }
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# A build from uncommitted changes says so rather than claim the commit's contents.
[[ $revision == unknown || -z $(git status --porcelain 2>/dev/null) ]] || revision+="-dirty"
source=${SLUICE_IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null || echo unknown)}
ref=localhost/sluice:$version

profile=${SLUICE_IMAGE_PROFILE:-release}
case $profile in
  release)
    log "cargo build --release -p sluice"
    cargo build --release --locked -p sluice >&2
    bin=${CARGO_TARGET_DIR:-target}/release/sluice ;;
  dev)
    log "cargo build -p sluice (SLUICE_IMAGE_PROFILE=dev: the test command's image)"
    cargo build --locked -p sluice >&2
    bin=${CARGO_TARGET_DIR:-target}/debug/sluice ;;
  *) log "SLUICE_IMAGE_PROFILE=$profile: release or dev"; exit 2 ;;
esac

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/base/etc/ssl/certs" "$ctx/base/tmp"
# Stripped: the release profile's line tables make the binary ~115 MB; without them ~25 MB.
strip --strip-all -o "$ctx/sluice" "$bin"
setcap cap_net_bind_service=+p "$ctx/sluice"
getcap "$ctx/sluice" | grep -q 'cap_net_bind_service=p$' || { log "setcap did not stick"; exit 1; }

# `ldd` lines: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the loader's
# "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso is the kernel's. Each file is copied (not
# its symlink) to the path the binary and the loader look for it at.
while read -r path; do
  mkdir -p "$ctx/base$(dirname "$path")"
  cp -L "$path" "$ctx/base$path"
done < <(ldd "$bin" | sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p')
[[ -n $(find "$ctx/base" -name 'libc.so.*') ]] || { log "ldd named no libc: is $bin dynamic?"; exit 1; }
cp -L /etc/ssl/certs/ca-certificates.crt "$ctx/base/etc/ssl/certs/"
cat >"$ctx/base/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$ctx/base/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
# glibc's resolver: /etc/hosts first, then DNS (an ExternalName or auth-url host name).
echo 'hosts: files dns' >"$ctx/base/etc/nsswitch.conf"
chmod 1777 "$ctx/base/tmp"
# ingress-nginx's chart runs /wait-shutdown as its preStop hook: sluice takes that name.
ln -s sluice "$ctx/base/wait-shutdown"

log "podman build $ref"
previous=$("${podman[@]}" image inspect --format '{{.Id}}' "$ref" 2>/dev/null || true)
# --no-cache: buildah 1.28 reuses a cached LABEL step whose --build-arg values changed (a new
# commit kept the old revision label); the COPY steps cost ~1 s anyway.
"${podman[@]}" build --quiet --no-cache -f deploy/Containerfile.scratch -t "$ref" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" --build-arg SOURCE="$source" \
  "$ctx" >&2

# The image this tag named before, now untagged: removed unless a container still uses it (each
# rebuild after a code change would otherwise leave ~25 MB behind).
if [[ -n $previous && $previous != $("${podman[@]}" image inspect --format '{{.Id}}' "$ref") ]]; then
  "${podman[@]}" rmi "$previous" >/dev/null 2>&1 || true
fi
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$ref")
log "$ref: $((size / 1000000)).$((size / 100000 % 10)) MB ($size bytes), layers:"
"${podman[@]}" history --format '  {{.Size}}	{{.CreatedBy}}' "$ref" | cut -c1-100 >&2
if [[ $profile == release ]] && ((size > 40000000)); then
  log "$ref is larger than 40 MB"
  exit 1
fi
echo "$ref"

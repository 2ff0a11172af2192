#!/usr/bin/env bash
# Runs every test of the workspace on a fresh Debian machine with a Rust toolchain.
# Installs what the tests need (curl, for the tests that drive a real curl client;
# h2load from nghttp2-client, for a short HTTP/2 load over TLS; ip and iptables, for
# the transparent-proxy test in a network namespace; webext-ublock-origin-firefox,
# whose EasyList and EasyPrivacy the ad remover's tests load; c-icap, whose echo
# service the ICAP module's tests run on a port of their own; chromium, which loads the
# admin status page in the browser test; nodejs and npm, which build the proxy-wasm
# example filter in examples/wasm-add-header from npm packages; etcd-server, the etcd
# the cluster's tests start on ports of their own), then builds once and
# checks the shape of the code (tools/layer-check), runs the unit and integration
# tests. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
dpkg -s webext-ublock-origin-firefox >/dev/null 2>&1 || need+=(webext-ublock-origin-firefox)
command -v c-icap >/dev/null 2>&1 || need+=(c-icap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
if [ ${#need[@]} -gt 0 ]; then
  echo "test.sh: installing ${need[*]}"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  # The lists, c-icap, chromium, npm and etcd are optional (their tests say SKIPPED without
  # them): curl is not.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" ||
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends curl
fi

cargo fmt --all -- --check
# The proxy-wasm filter built with the AssemblyScript SDK (its test loads it).
if command -v npm >/dev/null 2>&1; then examples/wasm-add-header/build.sh; fi
# Modules of every crate form a one-way graph and no source file is over 500 lines
# (docs/architecture.md, "Layers").
cargo run -q -p layer-check
cargo clippy --workspace --all-targets -- -D warnings

# Every test binary prints its own summary; the total closes the run.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace 2>&1 | tee "$log"
cargo test --manifest-path examples/hello-module/Cargo.toml 2>&1 | tee -a "$log"
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"

#!/bin/sh
# Builds build/add_header.wasm with the AssemblyScript compiler and the proxy-wasm
# AssemblyScript SDK, both from npm (versions pinned in package-lock.json).
# Needs node and npm (Debian: apt-get install nodejs npm).
set -eu
cd "$(dirname "$0")"
if [ ! -d node_modules/assemblyscript ] || [ ! -d node_modules/@solo-io/proxy-runtime ]; then
    npm ci --no-audit --no-fund --loglevel=error
fi
mkdir -p build
if [ ! -f build/add_header.wasm ] || [ assembly/index.ts -nt build/add_header.wasm ]; then
    npx --no-install asc assembly/index.ts -b build/add_header.wasm \
        --use abort=abort_proc_exit --optimize
fi
echo "built $(pwd)/build/add_header.wasm"

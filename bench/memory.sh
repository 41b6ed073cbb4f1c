#!/usr/bin/env bash
# memory.sh [SESSIONS [CALLS]]: what idem serve holds in memory per stored
# call. Builds idem, starts it on a free loopback port with a throwaway
# data directory and the default config, records SESSIONS × CALLS new
# calls with text through the API (bench/cmd/memload, texts from STS-B in
# the public data, or IDEM_MEMLOAD_TEXTS), and prints the resident set
# and Go heap when idle and after. The server is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${1:-1000}
calls=${2:-100}
texts=${IDEM_MEMLOAD_TEXTS:-../shared/data/upstream/stsb/sts-train.csv}
[ -f "$texts" ] || { echo "memory.sh: no texts at $texts (set IDEM_MEMLOAD_TEXTS)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/idem-memory.XXXXXX")
go build -o "$tmp/idem" ./cmd/idem
go build -o "$tmp/memload" ./bench/cmd/memload
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
IDEM_LISTEN=127.0.0.1:$port IDEM_DATA_DIR=$tmp/data IDEM_LOG_LEVEL=warn "$tmp/idem" serve > "$tmp/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
sleep 2 # let the start settle before reading the idle figures
"$tmp/memload" -server "http://127.0.0.1:$port" -texts "$texts" -sessions "$sessions" -calls "$calls"

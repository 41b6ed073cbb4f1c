#!/usr/bin/env bash
# memory.sh [SESSIONS [CALLS]]: what idem serve holds in memory per stored
# call. Builds idem, starts it on a free loopback port with a throwaway
# data directory and the default config, records SESSIONS × CALLS new
# calls with text through the API (bench/cmd/memload, texts from STS-B in
# the public data, or IDEM_MEMLOAD_TEXTS), and prints the resident set
# and Go heap when idle and after, and the data directory's size after
# (IDEM_BIN measures that idem binary instead of building this tree's;
# IDEM_MEMORY_IDLE=SECONDS reads the resident set again after that long
# idle). With IDEM_MEMORY_PROFILE=FILE it also
# writes the heap profile taken after (debug_listen) to FILE and prints
# its top entries. With IDEM_MEMLOAD_DRAIN=1 the figures after are read once the
# encoder has embedded every claimed call (a build that reports its queue
# only); without, 10 s after the last call, whatever is still queued (the
# backlog is printed). The server is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${1:-1000}
calls=${2:-100}
texts=${IDEM_MEMLOAD_TEXTS:-${IDEM_PUBLIC_DATA:-../shared/data}/upstream/stsb/sts-train.csv}
[ -f "$texts" ] || { echo "memory.sh: no texts at $texts (set IDEM_MEMLOAD_TEXTS)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/idem-memory.XXXXXX")
if [ -n "${IDEM_BIN:-}" ]; then # another build to measure (a baseline)
	cp "$IDEM_BIN" "$tmp/idem"
else
	go build -o "$tmp/idem" ./cmd/idem
fi
go build -o "$tmp/memload" ./bench/cmd/memload
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
port=$(free_port)
debug=127.0.0.1:$(free_port)
IDEM_DEBUG_LISTEN=$debug IDEM_LISTEN=127.0.0.1:$port IDEM_DATA_DIR=$tmp/data IDEM_LOG_LEVEL=warn "$tmp/idem" serve > "$tmp/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
sleep 2 # let the start settle before reading the idle figures
"$tmp/memload" -server "http://127.0.0.1:$port" -texts "$texts" -sessions "$sessions" -calls "$calls" ${IDEM_MEMLOAD_DRAIN:+-drain}
# The resident set in anonymous memory (the heap, Badger's memtables) and
# in file pages (Badger's tables and logs, mapped: the kernel can drop them).
grep -E '^(RssAnon|RssFile)' "/proc/$pid/status" | tr -s ' \t' ' ' | paste -sd ' ' | sed 's/^/after: /'
# With IDEM_MEMORY_IDLE=SECONDS, the resident set again after that long
# idle: Go collects an idle heap every 2 minutes and then gives back, a
# little at a time, what it freed.
if [ -n "${IDEM_MEMORY_IDLE:-}" ]; then
	sleep "$IDEM_MEMORY_IDLE"
	grep -E '^(RssAnon|RssFile)' "/proc/$pid/status" | tr -s ' \t' ' ' | paste -sd ' ' | sed "s/^/after ${IDEM_MEMORY_IDLE} s idle: /"
fi
# What the ledger takes on disk (Badger's tables and logs).
du -sk "$tmp/data" | awk '{printf "disk: %.1f MiB in the data directory\n", $1/1024}'
# What the session views hold (sessions.max_view_bytes bounds it; an
# older build reports nothing).
curl -sf "http://127.0.0.1:$port/metrics" | grep -E '^idem_session_view' | paste -sd ' ' | sed 's/^/views: /' || true
if [ -n "${IDEM_MEMORY_PROFILE:-}" ]; then
	curl -sf "http://$debug/debug/pprof/heap" -o "$IDEM_MEMORY_PROFILE"
	go tool pprof -top -sample_index=inuse_space -nodecount=25 "$tmp/idem" "$IDEM_MEMORY_PROFILE" 2>/dev/null | sed -n '1,32p'
fi

#!/usr/bin/env bash
# Login storm against the reference server (release build, SQLite, rate limits off so that
# only the password hashing bounds it), over loopback with wrk:
#
#   bash benches/load/login-storm.sh            # 64 login connections for 10 s
#   STORM_CONNECTIONS=32 STORM_SECONDS=20 bash benches/load/login-storm.sh
#
# It reports, from one run side by side:
#   * RSS idle, peak (VmHWM) and after 15 s of rest;
#   * logins/s at 4 connections and at STORM_CONNECTIONS (and their ratio);
#   * GET /api/v1/accounts p99 alone and during the storm (and their ratio), 4 connections each
#     pausing READ_DELAY_MS (10) between requests;
#   * how many logins were refused with 503 (the bounded hashing queue).
# Extra server settings pass through the environment (AGG_HASH_CONCURRENCY, AGG_HASH_QUEUE...);
# STORM_BINARY runs an already built server instead of building this checkout's.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=common.sh
source benches/load/common.sh

CONNECTIONS="${STORM_CONNECTIONS:-64}"
SECONDS_PER_RUN="${STORM_SECONDS:-10}"
REST_SECONDS="${STORM_REST_SECONDS:-15}"
PORT="${STORM_PORT:-18089}"
READ_DELAY_MS="${READ_DELAY_MS:-10}"
PASSWORD='Str0ng!Passw0rd'
EMAIL='storm@example.com'

if ! command -v wrk >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq wrk
fi
if [[ -z "${STORM_BINARY:-}" ]]; then
    cargo build --release -q -p aggregation-examples
fi
BINARY="${STORM_BINARY:-$PWD/target/release/aggregation-server}"

WORK="$(mktemp -d)"
LUA="$WORK/lua"
mkdir -p "$LUA"
cleanup() {
    [[ -n "${SERVER_PID:-}" ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$LUA/login.lua" <<EOF
-- Counts answers by status across wrk's threads.
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) ok = 0; busy = 0; other = 0 end
function response(status, headers, body)
    if status == 201 then ok = ok + 1
    elseif status == 503 then busy = busy + 1
    else other = other + 1 end
end
function done(summary, latency, requests)
    local o, b, x = 0, 0, 0
    for _, t in ipairs(threads) do
        o = o + t:get("ok"); b = b + t:get("busy"); x = x + t:get("other")
    end
    io.write(string.format("RESULT ok=%d busy=%d other=%d seconds=%.2f p99_ms=%.1f\n",
        o, b, x, summary.duration / 1e6, latency:percentile(99) / 1000))
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"email": "$EMAIL", "password": "$PASSWORD"}'
EOF

# Reads are paced (each connection waits READ_DELAY_MS between requests) so that they stand for
# ordinary traffic beside the storm instead of competing with it for the CPU.
cat >"$LUA/read.lua" <<EOF
function delay() return ${READ_DELAY_MS} end
function done(summary, latency, requests)
    io.write(string.format("RESULT requests=%d errors=%d seconds=%.2f p50_ms=%.2f p99_ms=%.2f\n",
        summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read
        + summary.errors.write + summary.errors.timeout, summary.duration / 1e6,
        latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
EOF

rss_kib() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$SERVER_PID/status"; }
mib() { awk -v kib="$1" 'BEGIN { printf "%.0f MiB", kib / 1024 }'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

(
    cd "$WORK"
    AGG_BIND="127.0.0.1:$PORT" AGG_RATE_LIMITS=off AGG_LOG=warn \
        AGG_JWT_SECRET='load-test-secret-of-at-least-32-bytes' \
        AGG_DATABASE_URL="sqlite://$WORK/storm.db?mode=rwc" AGG_OUTBOX_DIR="$WORK/outbox" \
        exec "$BINARY"
) &
SERVER_PID=$!
BASE="http://127.0.0.1:$PORT"
for _ in $(seq 1 100); do
    curl -fsS "$BASE/health" >/dev/null 2>&1 && break
    sleep 0.1
done

ACCESS="$(verified_access_token "$BASE" "$EMAIL" "$PASSWORD" "$WORK/outbox")"

IDLE="$(rss_kib VmRSS)"
READ_ALONE="$(wrk -t1 -c4 -d"${SECONDS_PER_RUN}s" -s "$LUA/read.lua" \
    -H "Authorization: Bearer $ACCESS" "$BASE/api/v1/accounts" | grep RESULT)"
LOGIN_C4="$(wrk -t2 -c4 -d"${SECONDS_PER_RUN}s" -s "$LUA/login.lua" "$BASE/api/v1/sessions" | grep RESULT)"

# The storm, with reads measured while it blows.
wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_PER_RUN}s" --timeout 30s -s "$LUA/login.lua" \
    "$BASE/api/v1/sessions" >"$WORK/storm.out" &
STORM_PID=$!
sleep 1
READ_STORM="$(wrk -t1 -c4 -d"$((SECONDS_PER_RUN - 2))s" -s "$LUA/read.lua" \
    -H "Authorization: Bearer $ACCESS" "$BASE/api/v1/accounts" | grep RESULT)"
wait "$STORM_PID"
LOGIN_STORM="$(grep RESULT "$WORK/storm.out")"
PEAK="$(rss_kib VmHWM)"
sleep "$REST_SECONDS"
RESTED="$(rss_kib VmRSS)"

rate() { awk -v n="$(field ok "$1")" -v s="$(field seconds "$1")" 'BEGIN { printf "%.1f", n / s }'; }
C4_RATE="$(rate "$LOGIN_C4")"
STORM_RATE="$(rate "$LOGIN_STORM")"
P99_ALONE="$(field p99_ms "$READ_ALONE")"
P99_STORM="$(field p99_ms "$READ_STORM")"
cat <<EOF
login storm: $CONNECTIONS connections for ${SECONDS_PER_RUN}s, $(nproc) cores
  RSS idle                      $(mib "$IDLE")
  RSS peak (VmHWM)              $(mib "$PEAK")
  RSS after ${REST_SECONDS}s rest            $(mib "$RESTED")
  logins/s at 4 connections     $C4_RATE
  logins/s at $CONNECTIONS connections    $STORM_RATE  (ratio $(awk -v a="$STORM_RATE" -v b="$C4_RATE" 'BEGIN { printf "%.2f", a / b }'))
  503 answers during the storm  $(field busy "$LOGIN_STORM")  (other non-201: $(field other "$LOGIN_STORM"))
  GET /accounts p99 alone       ${P99_ALONE} ms
  GET /accounts p99 in storm    ${P99_STORM} ms  (ratio $(awk -v a="$P99_STORM" -v b="$P99_ALONE" 'BEGIN { printf "%.2f", a / b }'))
EOF

#!/usr/bin/env bash
# Per-request overhead of the reference server: `GET /api/v1/accounts` on the reference server
# against the bare handler (`benches/src/bin/bare-accounts.rs`: axum + sqlx, the same query
# and the same HS256 check of the same token, on the same SQLite file), over loopback with wrk:
#
#   bash benches/load/accounts-overhead.sh          # 3 rounds of 5 s each, 16 connections
#   OVERHEAD_ROUNDS=5 OVERHEAD_SECONDS=10 bash benches/load/accounts-overhead.sh
#   OVERHEAD_BASELINE_BINARY=/path/to/older/aggregation-server bash benches/load/accounts-overhead.sh
#
# It reports, from one run side by side:
#   * requests/s of the reference server and of the bare handler (median of the rounds, which
#     alternate between them, and alternate who goes first, since a shared machine is noisy),
#     and their ratio, the figure to watch;
#   * RSS of the reference server idle after start, peak (VmHWM), and idle after the load.
# OVERHEAD_BASELINE_BINARY adds another reference server build to the same rounds (on the same
# database, with the same token), e.g. the one of `main`, to compare before and after.
# The reference server runs with rate limits off (as the bare handler has none) and logs at its
# default level, `info`: one access line a request, to a file (OVERHEAD_LOG=warn leaves the
# access log out). OVERHEAD_BINARY and OVERHEAD_BARE_BINARY run already built servers instead of
# building this checkout's.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=common.sh
source benches/load/common.sh

ROUNDS="${OVERHEAD_ROUNDS:-3}"
SECONDS_PER_RUN="${OVERHEAD_SECONDS:-5}"
CONNECTIONS="${OVERHEAD_CONNECTIONS:-16}"
ACCOUNTS="${OVERHEAD_ACCOUNTS:-3}"
REST_SECONDS="${OVERHEAD_REST_SECONDS:-5}"
PORT="${OVERHEAD_PORT:-18090}"
LOG="${OVERHEAD_LOG:-info}"
BARE_PORT=$((PORT + 1))
BASELINE_PORT=$((PORT + 2))
PASSWORD='Str0ng!Passw0rd'
EMAIL='overhead@example.com'
SECRET='load-test-secret-of-at-least-32-bytes'
# The same issuer and audience for every server, so that one token verifies on each.
BASE_URL='http://overhead.test'

if ! command -v wrk >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq wrk
fi
if ! command -v sqlite3 >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq sqlite3
fi
TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
if [[ -z "${OVERHEAD_BINARY:-}" ]]; then
    cargo build --release -q -p aggregation-examples --bin aggregation-server
fi
if [[ -z "${OVERHEAD_BARE_BINARY:-}" ]]; then
    cargo build --release -q -p aggregation-benches --bin bare-accounts
fi
BINARY="${OVERHEAD_BINARY:-$TARGET_DIR/release/aggregation-server}"
BARE_BINARY="${OVERHEAD_BARE_BINARY:-$TARGET_DIR/release/bare-accounts}"
BASELINE_BINARY="${OVERHEAD_BASELINE_BINARY:-}"

WORK="$(mktemp -d)"
DATABASE="$WORK/overhead.db"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$WORK/report.lua" <<'EOF'
function done(summary, latency, requests)
    io.write(string.format("RESULT requests=%d non2xx=%d errors=%d seconds=%.3f\n",
        summary.requests, summary.errors.status, summary.errors.connect + summary.errors.read
        + summary.errors.write + summary.errors.timeout, summary.duration / 1e6))
end
EOF

# Starts a reference server build on a port; its pid goes to the variable named by $3.
start_reference() {
    local binary="$1" port="$2"
    (
        cd "$WORK"
        AGG_BIND="127.0.0.1:$port" AGG_BASE_URL="$BASE_URL" AGG_RATE_LIMITS=off AGG_LOG="$LOG" \
            AGG_JWT_SECRET="$SECRET" AGG_DATABASE_URL="sqlite://$DATABASE?mode=rwc" \
            AGG_OUTBOX_DIR="$WORK/outbox" exec "$binary" >>"$WORK/server.log" 2>&1
    ) &
    printf -v "$3" '%s' "$!"
    PIDS+=("$!")
}

wait_for() {
    for _ in $(seq 1 100); do
        curl -fsS -o /dev/null "$@" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "no answer from $1; server log:" >&2
    cat "$WORK/server.log" >&2
    exit 1
}

rss_kib() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/status"; }
mib() { awk -v kib="$1" 'BEGIN { printf "%.1f MiB", kib / 1024 }'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

start_reference "$BINARY" "$PORT" SERVER_PID
BASE="http://127.0.0.1:$PORT"
wait_for "$BASE/health"
if [[ -n "$BASELINE_BINARY" ]]; then
    # Once the first has migrated the file.
    start_reference "$BASELINE_BINARY" "$BASELINE_PORT" BASELINE_PID
    wait_for "http://127.0.0.1:$BASELINE_PORT/health"
fi
sleep 2
IDLE_START="$(rss_kib "$SERVER_PID" VmRSS)"
[[ -n "$BASELINE_BINARY" ]] && BASELINE_IDLE_START="$(rss_kib "$BASELINE_PID" VmRSS)"

ACCESS="$(verified_access_token "$BASE" "$EMAIL" "$PASSWORD" "$WORK/outbox")"

# A connection with a few accounts, written straight into the file (as a sync would have).
{
    echo "PRAGMA busy_timeout = 5000;"
    echo "INSERT INTO connections (id, user_id, provider_id, provider_slug, status, connected_at,
        created_at, updated_at)
        SELECT randomblob(16), id, randomblob(16), 'sandbox', 'active', '2026-01-02T09:00:00Z',
        '2026-01-02T09:00:00Z', '2026-01-02T09:00:00Z' FROM users WHERE email = '$EMAIL';"
    for n in $(seq 1 "$ACCOUNTS"); do
        echo "INSERT INTO accounts (id, connection_id, provider_account_id, account_number_masked,
            name, account_type, currency, balance_amount, available_balance_amount, is_active,
            last_synced_at, created_at, updated_at)
            SELECT randomblob(16), c.id, 'acct-$n', '****000$n', 'Account $n', 'brokerage', 'USD',
            '1523$n.50', '120$n.00', 1, '2026-01-31T14:05:00Z', '2026-01-02T09:00:00Z',
            '2026-01-31T14:05:00Z' FROM connections c JOIN users u ON u.id = c.user_id
            WHERE u.email = '$EMAIL';"
    done
} | sqlite3 "$DATABASE" >/dev/null

(
    BARE_BIND="127.0.0.1:$BARE_PORT" BARE_DATABASE_URL="sqlite://$DATABASE" \
        BARE_JWT_SECRET="$SECRET" BARE_JWT_ISSUER="$BASE_URL" BARE_JWT_AUDIENCE="$BASE_URL/api/v1" \
        exec "$BARE_BINARY" >>"$WORK/server.log" 2>&1
) &
PIDS+=("$!")
TARGETS=("reference:$PORT" "bare:$BARE_PORT")
[[ -n "$BASELINE_BINARY" ]] && TARGETS+=("baseline:$BASELINE_PORT")
wait_for "http://127.0.0.1:$BARE_PORT/api/v1/accounts" -H "Authorization: Bearer $ACCESS"

# Every server answers the token with the same accounts before anything is timed.
for target in "${TARGETS[@]}"; do
    body="$(curl -fsS -H "Authorization: Bearer $ACCESS" \
        "http://127.0.0.1:${target#*:}/api/v1/accounts")"
    count="$(sed -n 's/.*"total_count":\([0-9]*\).*/\1/p' <<<"$body")"
    if [[ "$count" != "$ACCOUNTS" ]]; then
        echo "${target%%:*} answered $count accounts instead of $ACCOUNTS: $body" >&2
        exit 1
    fi
done

drive() {
    wrk -t1 -c"$CONNECTIONS" -d"$2" -s "$WORK/report.lua" \
        -H "Authorization: Bearer $ACCESS" "http://127.0.0.1:$1/api/v1/accounts" | grep RESULT
}
declare -A RATES
for target in "${TARGETS[@]}"; do
    drive "${target#*:}" 2s >/dev/null # warm-up: connections, statement caches
    RATES[${target%%:*}]=""
done
for round in $(seq 1 "$ROUNDS"); do
    # Who goes first alternates, so that a neighbour's burst does not always hit the same one.
    order=("${TARGETS[@]}")
    if ((round % 2 == 0)); then
        order=()
        for ((i = ${#TARGETS[@]} - 1; i >= 0; i--)); do order+=("${TARGETS[i]}"); done
    fi
    for target in "${order[@]}"; do
        result="$(drive "${target#*:}" "${SECONDS_PER_RUN}s")"
        if [[ "$(field non2xx "$result")" != 0 || "$(field errors "$result")" != 0 ]]; then
            echo "${target%%:*}: failed requests: $result" >&2
            exit 1
        fi
        rate="$(awk -v n="$(field requests "$result")" -v s="$(field seconds "$result")" \
            'BEGIN { printf "%.1f", n / s }')"
        RATES[${target%%:*}]+="$rate "
    done
done
PEAK="$(rss_kib "$SERVER_PID" VmHWM)"
[[ -n "$BASELINE_BINARY" ]] && BASELINE_PEAK="$(rss_kib "$BASELINE_PID" VmHWM)"
sleep "$REST_SECONDS"
IDLE_AFTER="$(rss_kib "$SERVER_PID" VmRSS)"
[[ -n "$BASELINE_BINARY" ]] && BASELINE_IDLE_AFTER="$(rss_kib "$BASELINE_PID" VmRSS)"

REFERENCE="$(median <<<"${RATES[reference]}")"
BARE="$(median <<<"${RATES[bare]}")"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
cat <<EOF
GET /api/v1/accounts ($ACCOUNTS accounts): $CONNECTIONS connections, $ROUNDS rounds of ${SECONDS_PER_RUN}s, $(nproc) cores, AGG_LOG=$LOG
  bare handler req/s            $BARE  (rounds: ${RATES[bare]% })
  reference server req/s        $REFERENCE  (rounds: ${RATES[reference]% })
  ratio reference / bare        $(ratio "$REFERENCE" "$BARE")
EOF
if [[ -n "$BASELINE_BINARY" ]]; then
    BASELINE="$(median <<<"${RATES[baseline]}")"
    cat <<EOF
  baseline server req/s         $BASELINE  (rounds: ${RATES[baseline]% })
  ratio baseline / bare         $(ratio "$BASELINE" "$BARE")
  baseline RSS idle at start    $(mib "$BASELINE_IDLE_START")
  baseline RSS peak (VmHWM)     $(mib "$BASELINE_PEAK")
  baseline RSS ${REST_SECONDS}s after load    $(mib "$BASELINE_IDLE_AFTER")
EOF
fi
cat <<EOF
  reference RSS idle at start   $(mib "$IDLE_START")
  reference RSS peak (VmHWM)    $(mib "$PEAK")
  reference RSS ${REST_SECONDS}s after load   $(mib "$IDLE_AFTER")
EOF

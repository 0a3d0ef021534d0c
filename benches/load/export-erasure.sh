#!/usr/bin/env bash
# Export throughput and memory, and erasure time, for one user with many transactions: the
# reference server (release build) on loopback, a verified user who imports a one-row
# statement, whose transaction is then copied by SQL to EXPORT_TRANSACTIONS rows (1,000,000),
# then `GET /api/v1/users/me/export` to a file and `DELETE /api/v1/users/me`:
#
#   bash benches/load/export-erasure.sh
#   EXPORT_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test bash benches/load/export-erasure.sh
#
# It reports, per store: the seeded rows, RSS before the export (VmRSS), its peak while the
# export streamed (VmHWM, reset first through /proc/<pid>/clear_refs, so root or the server's
# owner), the bytes and transactions written, the time and throughput, then the erasure's
# 202 time and the time until the user's row is gone (the last batch). With
# EXPORT_DATABASE_URL (a PostgreSQL server URL whose user may create databases) it runs once
# more on a database created for it and dropped after. EXPORT_BINARY runs an already built
# server instead of building this checkout's; EXPORT_PORT (18191) sets the port.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=common.sh
source benches/load/common.sh

ROWS="${EXPORT_TRANSACTIONS:-1000000}"
PORT="${EXPORT_PORT:-18191}"
DATABASE_URL="${EXPORT_DATABASE_URL:-}"
PASSWORD='Str0ng!Passw0rd'
SECRET='load-test-secret-of-at-least-32-bytes'
BASE="http://127.0.0.1:$PORT"

TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
if [[ -z "${EXPORT_BINARY:-}" ]]; then
    nice cargo build --release -q -p aggregation-examples --bin aggregation-server
fi
BINARY="$(realpath "${EXPORT_BINARY:-$TARGET_DIR/release/aggregation-server}")"
STORES=(${EXPORT_STORES:-sqlite})
[[ -n "$DATABASE_URL" ]] && STORES+=(postgres)

WORK="$(mktemp -d)"
SERVER_PID=""
CREATED_DATABASE=""
STORE_URL=""
stop_server() {
    if [[ -n "$SERVER_PID" ]]; then
        kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
    if [[ -n "$CREATED_DATABASE" ]]; then
        psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $CREATED_DATABASE" >/dev/null || true
        CREATED_DATABASE=""
    fi
}
trap 'stop_server; rm -rf "$WORK"' EXIT

rss_kib() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/status"; }
mib() { awk -v kib="$1" 'BEGIN { printf "%.1f", kib / 1024 }'; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

start_server() {
    local store="$1"
    if [[ "$store" == postgres ]]; then
        CREATED_DATABASE="export_erasure_$$_$RANDOM"
        psql -q "$DATABASE_URL" -c "CREATE DATABASE $CREATED_DATABASE" >/dev/null
        STORE_URL="${DATABASE_URL%/*}/$CREATED_DATABASE"
    else
        rm -f "$WORK"/export.db*
        STORE_URL="sqlite://$WORK/export.db?mode=rwc"
    fi
    rm -rf "$WORK/outbox"
    (
        cd "$WORK"
        AGG_BIND="127.0.0.1:$PORT" AGG_RATE_LIMITS=off AGG_LOG=warn AGG_JWT_SECRET="$SECRET" \
            AGG_DATABASE_URL="$STORE_URL" AGG_OUTBOX_DIR="$WORK/outbox" \
            exec "$BINARY" >>"$WORK/server.log" 2>&1
    ) &
    SERVER_PID="$!"
    for _ in $(seq 1 100); do
        curl -fsS -o /dev/null "$BASE/health" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "no answer from the server; its log:" >&2
    cat "$WORK/server.log" >&2
    exit 1
}

# Runs SQL on the store of the running server.
sql() {
    if [[ -n "$CREATED_DATABASE" ]]; then
        PGOPTIONS="-c search_path=aggregation" psql -qtA "$STORE_URL" -c "$1"
    else
        sqlite3 "$WORK/export.db" "$1"
    fi
}

# One transaction, imported so that the connection and account are the service's own.
cat >"$WORK/one.ofx" <<'OFX'
OFXHEADER:100
DATA:OFXSGML
VERSION:102
SECURITY:NONE
ENCODING:USASCII
CHARSET:1252
COMPRESSION:NONE
OLDFILEUID:NONE
NEWFILEUID:NONE

<OFX><SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20250101
<LANGUAGE>ENG<FI><ORG>Export Bank<FID>1234</FI></SONRS></SIGNONMSGSRSV1>
<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS><STMTRS>
<CURDEF>USD<BANKACCTFROM><BANKID>121000248<ACCTID>123456789<ACCTTYPE>CHECKING</BANKACCTFROM>
<BANKTRANLIST><DTSTART>20240101<DTEND>20250101
<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20241231120000<TRNAMT>-12.34<FITID>SEED0001<NAME>Merchant<MEMO>Card purchase</STMTTRN>
</BANKTRANLIST><LEDGERBAL><BALAMT>1234.56<DTASOF>20250101</LEDGERBAL></STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>
OFX

COLUMNS="account_id, provider_transaction_id, transaction_type, subtype, status, amount, \
currency, description, symbol, security_name, quantity, unit_price, commission, \
transaction_date, settlement_date, created_at, updated_at"

seed() {
    local copies=$((ROWS - 1))
    if [[ -n "$CREATED_DATABASE" ]]; then
        sql "INSERT INTO transactions (id, $COLUMNS) SELECT gen_random_uuid(), t.account_id, \
             'bench-' || i, t.transaction_type, t.subtype, t.status, t.amount, t.currency, \
             t.description || ' ' || i, NULL, NULL, NULL, NULL, NULL, \
             t.transaction_date - (i % 3650), NULL, t.created_at, t.updated_at \
             FROM generate_series(1, $copies) i, (SELECT * FROM transactions LIMIT 1) t" >/dev/null
    else
        sql "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $copies) \
             INSERT INTO transactions (id, $COLUMNS) SELECT randomblob(16), t.account_id, \
             'bench-' || n.i, t.transaction_type, t.subtype, t.status, t.amount, t.currency, \
             t.description || ' ' || n.i, NULL, NULL, NULL, NULL, NULL, \
             date(t.transaction_date, '-' || (n.i % 3650) || ' days'), NULL, t.created_at, \
             t.updated_at FROM n, (SELECT * FROM transactions LIMIT 1) t" >/dev/null
    fi
    sql "UPDATE accounts SET transaction_count = (SELECT COUNT(*) FROM transactions t \
         WHERE t.account_id = accounts.id)" >/dev/null
}

printf '%-9s %10s %10s %10s %10s %12s %9s %12s %9s %9s %9s\n' store rows rss_before \
    rss_peak growth bytes seconds rows_per_s MB_per_s erase_202 erase_done
for store in "${STORES[@]}"; do
    start_server "$store"
    email="export-$store@example.com"
    token="$(verified_access_token "$BASE" "$email" "$PASSWORD" "$WORK/outbox")"
    curl -fsS -o /dev/null -H "Authorization: Bearer $token" -F "file=@$WORK/one.ofx" \
        "$BASE/api/v1/imports"
    seed
    seeded="$(sql "SELECT COUNT(*) FROM transactions")"
    sleep 2
    before="$(rss_kib "$SERVER_PID" VmRSS)"
    echo 5 >"/proc/$SERVER_PID/clear_refs" # VmHWM := VmRSS
    started="$(now)"
    curl -fsS -o "$WORK/export.json" -H "Authorization: Bearer $token" "$BASE/api/v1/users/me/export"
    seconds="$(since "$started")"
    peak="$(rss_kib "$SERVER_PID" VmHWM)"
    bytes="$(stat -c %s "$WORK/export.json")"
    exported="$(grep -o '"transaction_date"' "$WORK/export.json" | wc -l)"
    [[ "$exported" == "$seeded" ]] || echo "exported $exported of $seeded transactions" >&2
    rm -f "$WORK/export.json"
    started="$(now)"
    curl -fsS -o /dev/null -X DELETE -H "Authorization: Bearer $token" \
        -H 'Content-Type: application/json' -d "{\"password\": \"$PASSWORD\"}" "$BASE/api/v1/users/me"
    accepted="$(since "$started")"
    until [[ "$(sql "SELECT COUNT(*) FROM users")" == 0 ]]; do sleep 0.2; done
    done_after="$(since "$started")"
    left="$(sql "SELECT COUNT(*) FROM transactions")"
    [[ "$left" == 0 ]] || echo "$left transactions left after the erasure" >&2
    printf '%-9s %10s %10s %10s %10s %12s %9s %12s %9s %9s %9s\n' "$store" "$seeded" \
        "$(mib "$before")" "$(mib "$peak")" "$(mib $((peak - before)))" "$bytes" "$seconds" \
        "$(awk -v n="$exported" -v s="$seconds" 'BEGIN { printf "%.0f", n / s }')" \
        "$(awk -v b="$bytes" -v s="$seconds" 'BEGIN { printf "%.1f", b / s / 1048576 }')" \
        "$accepted" "$done_after"
    stop_server
done
echo "(RSS in MiB; seconds of wall time; erase_202: the DELETE's answer, erase_done: the user's row gone)"

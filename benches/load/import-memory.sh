#!/usr/bin/env bash
# Memory of one import against the size of its file: the reference server (release build) on
# loopback, a verified user, then one upload each of a generated ~10 MB OFX, CSV, CAMT.053 and
# MT940 file (and the OFX file once more, where every row is skipped):
#
#   bash benches/load/import-memory.sh
#   MEMORY_BASELINE_BINARY=/path/to/older/aggregation-server bash benches/load/import-memory.sh
#   MEMORY_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test bash benches/load/import-memory.sh
#
# For each upload it reports the server's RSS just before it (VmRSS), its peak while the import
# ran (VmHWM, reset before each upload through /proc/<pid>/clear_refs, so root or the server's
# owner), the growth of the peak over the file's size (the contract allows 3x), and RSS
# MEMORY_SETTLE_SECONDS (15) after the answer, with its distance to the RSS before (the
# contract allows 10 MB). The files are generated into a temporary folder, never committed.
#
# Every server runs on a fresh SQLite file in a temporary folder; with MEMORY_DATABASE_URL (a
# PostgreSQL server URL whose user may create databases) each server also runs once on a
# database created for it and dropped after. MEMORY_BASELINE_BINARY runs another build (e.g.
# the one of `main`) through the same uploads in the same run, for a side-by-side table.
# MEMORY_BINARY runs an already built server instead of building this checkout's;
# MEMORY_PROFILE (release) names the cargo profile to build (`measure`: optimized, no fat LTO);
# MEMORY_FILE_BYTES (10000000) sets the size of the files, MEMORY_PORT (18190) the port.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=common.sh
source benches/load/common.sh

FILE_BYTES="${MEMORY_FILE_BYTES:-10000000}"
SETTLE_SECONDS="${MEMORY_SETTLE_SECONDS:-15}"
PORT="${MEMORY_PORT:-18190}"
DATABASE_URL="${MEMORY_DATABASE_URL:-}"
PASSWORD='Str0ng!Passw0rd'
SECRET='load-test-secret-of-at-least-32-bytes'

TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
# MEMORY_PROFILE=measure builds the optimized profile without fat LTO (minutes less on 2 cores).
PROFILE="${MEMORY_PROFILE:-release}"
if [[ -z "${MEMORY_BINARY:-}" ]]; then
    nice cargo build --profile "$PROFILE" -q -p aggregation-examples --bin aggregation-server
fi
# Absolute: each server runs in the temporary folder.
BINARY="$(realpath "${MEMORY_BINARY:-$TARGET_DIR/$PROFILE/aggregation-server}")"
BUILDS=("reference=$BINARY")
[[ -n "${MEMORY_BASELINE_BINARY:-}" ]] && BUILDS+=("baseline=$(realpath "$MEMORY_BASELINE_BINARY")")
STORES=(sqlite)
[[ -n "$DATABASE_URL" ]] && STORES+=(postgres)

WORK="$(mktemp -d)"
SERVER_PID=""
CREATED_DATABASE=""
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

# The files: one account each, rows of the size real statements have, about FILE_BYTES long.
python3 - "$WORK" "$FILE_BYTES" >"$WORK/sizes" <<'EOF'
import datetime, sys
work, target = sys.argv[1], int(sys.argv[2])
start = datetime.date(2015, 1, 1)
def day(i): return start + datetime.timedelta(days=i // 40)
def cents(i): return (i * 7919) % 250_000 - 120_000
def money(c, sep="."): return f"{'-' if c < 0 else ''}{abs(c) // 100}{sep}{abs(c) % 100:02d}"
LABELS = {"statement.ofx": "ofx", "statement.csv": "csv", "statement.xml": "camt",
          "statement.sta": "mt940"}
def fill(name, head, row, tail):
    parts, size, i = [head], len(head) + len(tail), 0
    while True:
        line = row(i)
        if size + len(line) > target:
            break
        parts.append(line); size += len(line); i += 1
    parts.append(tail)
    with open(f"{work}/{name}", "w", newline="") as out:
        out.write("".join(parts))
    print(f"{LABELS[name]} {size} {i}")

fill("statement.ofx",
     "OFXHEADER:100\r\nDATA:OFXSGML\r\nVERSION:102\r\nSECURITY:NONE\r\nENCODING:USASCII\r\n"
     "CHARSET:1252\r\nCOMPRESSION:NONE\r\nOLDFILEUID:NONE\r\nNEWFILEUID:NONE\r\n\r\n<OFX>\r\n"
     "<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20250101"
     "<LANGUAGE>ENG<FI><ORG>Memory Bank<FID>1234</FI></SONRS></SIGNONMSGSRSV1>\r\n"
     "<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS><STMTRS>"
     "<CURDEF>USD<BANKACCTFROM><BANKID>121000248<ACCTID>123456789<ACCTTYPE>CHECKING"
     "</BANKACCTFROM>\r\n<BANKTRANLIST><DTSTART>20150101<DTEND>20250101\r\n",
     lambda i: f"<STMTTRN><TRNTYPE>{'CREDIT' if cents(i) > 0 else 'DEBIT'}<DTPOSTED>"
               f"{day(i):%Y%m%d}120000<TRNAMT>{money(cents(i))}<FITID>MB{i:012d}"
               f"<NAME>Merchant {i % 997}<MEMO>Card purchase {i}</STMTTRN>\r\n",
     "</BANKTRANLIST><LEDGERBAL><BALAMT>1234.56<DTASOF>20250101</LEDGERBAL></STMTRS>"
     "</STMTTRNRS></BANKMSGSRSV1></OFX>\r\n")
fill("statement.csv", "Date,Description,Amount\n",
     lambda i: f"{day(i):%Y-%m-%d},Card purchase {i} at merchant {i % 997},{money(cents(i))}\n",
     "")
fill("statement.xml",
     '<?xml version="1.0" encoding="UTF-8"?>\n<Document xmlns="urn:iso:std:iso:20022:tech:xsd:'
     'camt.053.001.08"><BkToCstmrStmt><GrpHdr><MsgId>M</MsgId><CreDtTm>2025-01-01T20:00:00'
     '</CreDtTm></GrpHdr><Stmt><Id>M-1</Id><Acct><Id><IBAN>DE89370400440532013000</IBAN></Id>'
     '<Ccy>EUR</Ccy></Acct>\n',
     lambda i: f'<Ntry><Amt Ccy="EUR">{money(abs(cents(i)) + 1)}</Amt><CdtDbtInd>'
               f'{"CRDT" if cents(i) > 0 else "DBIT"}</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>'
               f'<BookgDt><Dt>{day(i)}</Dt></BookgDt><ValDt><Dt>{day(i)}</Dt></ValDt>'
               f'<AcctSvcrRef>MB{i:012d}</AcctSvcrRef><NtryDtls><TxDtls><Refs><EndToEndId>'
               f'E2E-{i}</EndToEndId></Refs><RltdPties><Cdtr><Pty><Nm>Merchant {i % 997}</Nm>'
               f'</Pty></Cdtr></RltdPties><RmtInf><Ustrd>Invoice {i}</Ustrd></RmtInf></TxDtls>'
               f'</NtryDtls></Ntry>\n',
     '</Stmt></BkToCstmrStmt></Document>\n')
# MT940: statements of 500 entries each, all of one account, each closing on its balance.
state = {"balance": 0}
def mt940(i):
    text = ""
    if i % 500 == 0:
        if i:
            text += f":62F:{'D' if state['balance'] < 0 else 'C'}250101EUR{money(abs(state['balance']), ',')}\r\n-\r\n"
        text += (f":20:MEMORY{i // 500}\r\n:25:10020030/0123456789\r\n:28C:{i // 500 + 1}/1\r\n"
                 f":60F:{'D' if state['balance'] < 0 else 'C'}250101EUR{money(abs(state['balance']), ',')}\r\n")
    c = cents(i)
    state["balance"] += c
    text += (f":61:{day(i):%y%m%d}{'D' if c < 0 else 'C'}{money(abs(c), ',')}NTRFNONREF//MB{i:012d}\r\n"
             f":86:166?00SEPA-UEBERWEISUNG?20EREF+MB{i:012d}?21SVWZ+Invoice {i}?32Merchant {i % 997}\r\n")
    return text
def mt940_tail():
    return f":62F:{'D' if state['balance'] < 0 else 'C'}250101EUR{money(abs(state['balance']), ',')}\r\n-\r\n"
# The tail depends on the balance after the last row: write the rows, then close.
parts, size, i = [], 0, 0
while True:
    saved = state["balance"]
    line = mt940(i)
    if size + len(line) + 64 > target:
        state["balance"] = saved
        break
    parts.append(line); size += len(line); i += 1
parts.append(mt940_tail())
with open(f"{work}/statement.sta", "w", newline="") as out:
    out.write("".join(parts))
print(f"mt940 {size} {i}")
EOF

rss_kib() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/status"; }
mib() { awk -v kib="$1" 'BEGIN { printf "%.1f", kib / 1024 }'; }

# Starts a build on a store; the server's pid in SERVER_PID.
start_server() {
    local binary="$1" store="$2" url
    if [[ "$store" == postgres ]]; then
        CREATED_DATABASE="import_memory_$$_$RANDOM"
        psql -q "$DATABASE_URL" -c "CREATE DATABASE $CREATED_DATABASE" >/dev/null
        url="${DATABASE_URL%/*}/$CREATED_DATABASE"
    else
        rm -f "$WORK"/memory.db*
        url="sqlite://$WORK/memory.db?mode=rwc"
    fi
    rm -rf "$WORK/outbox"
    (
        cd "$WORK"
        AGG_BIND="127.0.0.1:$PORT" AGG_RATE_LIMITS=off AGG_LOG=warn AGG_JWT_SECRET="$SECRET" \
            AGG_DATABASE_URL="$url" AGG_OUTBOX_DIR="$WORK/outbox" \
            exec "$binary" >>"$WORK/server.log" 2>&1
    ) &
    SERVER_PID="$!"
    for _ in $(seq 1 100); do
        curl -fsS -o /dev/null "http://127.0.0.1:$PORT/health" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "no answer from the server; its log:" >&2
    cat "$WORK/server.log" >&2
    exit 1
}

# One upload: prints "label before peak after status seconds" (KiB, KiB, KiB, HTTP status).
measure() {
    local label="$1" file="$2" token="$3"
    shift 3
    local before peak after status started finished
    before="$(rss_kib "$SERVER_PID" VmRSS)"
    echo 5 >"/proc/$SERVER_PID/clear_refs" # VmHWM := VmRSS
    started="$(date +%s.%N)"
    status="$(curl -sS -o "$WORK/answer.json" -w '%{http_code}' --max-time 600 \
        -H "Authorization: Bearer $token" -F "file=@$WORK/$file" "$@" \
        "http://127.0.0.1:$PORT/api/v1/imports")"
    finished="$(date +%s.%N)"
    peak="$(rss_kib "$SERVER_PID" VmHWM)"
    if [[ "$status" != 20? ]]; then
        echo "$label: HTTP $status: $(head -c 600 "$WORK/answer.json")" >&2
    fi
    sleep "$SETTLE_SECONDS"
    after="$(rss_kib "$SERVER_PID" VmRSS)"
    echo "$label $before $peak $after $status $(awk -v a="$started" -v b="$finished" \
        'BEGIN { printf "%.1f", b - a }')"
}

RESULTS="$WORK/results"
: >"$RESULTS"
for build in "${BUILDS[@]}"; do
    for store in "${STORES[@]}"; do
        start_server "${build#*=}" "$store"
        sleep 2
        idle="$(rss_kib "$SERVER_PID" VmRSS)"
        token="$(verified_access_token "http://127.0.0.1:$PORT" "memory-$RANDOM@example.com" \
            "$PASSWORD" "$WORK/outbox")"
        sleep 2
        {
            echo "${build%%=*} $store idle $idle"
            measure ofx statement.ofx "$token"
            measure "ofx-again" statement.ofx "$token"
            measure csv statement.csv "$token" -F account_name=Checking -F currency=EUR
            measure camt statement.xml "$token"
            measure mt940 statement.sta "$token"
        } | tee -a "$RESULTS" >&2
        stop_server
    done
done

echo
echo "Import memory, $(nproc) cores, RSS in MiB (peak growth as a multiple of the file: at most 3;"
echo "after: RSS ${SETTLE_SECONDS}s after the answer, minus RSS before: at most 10 MB)"
awk -v dir="$WORK" '
    BEGIN {
        while ((getline line < (dir "/sizes")) > 0) { split(line, f, " "); size[f[1]] = f[2] }
        printf "%-10s %-8s %-9s %5s %7s %7s %7s %6s %7s %8s %6s\n", "build", "store", "file",
            "MB", "before", "peak", "growth", "x file", "after", "after-b", "s"
    }
    $3 == "idle" { build = $1; store = $2; printf "%-10s %-8s %-9s %5s %7.1f\n", build, store,
        "(idle)", "", $4 / 1024; next }
    {
        file = $1; sub(/-again$/, "", file); bytes = size[file]
        growth = ($3 - $2) * 1024
        printf "%-10s %-8s %-9s %5.1f %7.1f %7.1f %7.1f %6.2f %7.1f %+8.1f %6s%s\n", build, store,
            $1, bytes / 1e6, $2 / 1024, $3 / 1024, growth / 1048576, growth / bytes, $4 / 1024,
            ($4 - $2) / 1024, $6, ($5 ~ /^20/ ? "" : "  HTTP " $5)
    }' "$RESULTS"

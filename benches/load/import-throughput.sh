#!/usr/bin/env bash
# Import throughput, side by side with another build: the reference server on loopback, a
# verified user, then uploads through POST /api/v1/imports of generated CSV and OFX files of
# THROUGHPUT_ROWS rows each (50,000 and 200,000), each into a new account, then
# THROUGHPUT_FILL_FILES (4) more OFX files of the largest size into the account the largest OFX
# file created, so that the last one lands in an account already holding 800,000 rows:
#
#   bash benches/load/import-throughput.sh
#   THROUGHPUT_BASELINE_BINARY=/path/to/older/aggregation-server bash benches/load/import-throughput.sh
#   THROUGHPUT_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test bash benches/load/import-throughput.sh
#
# With THROUGHPUT_BASELINE_BINARY both builds run at once, each on its own store (a fresh
# SQLite file; with THROUGHPUT_DATABASE_URL, a PostgreSQL server URL whose user may create
# databases, also on a database created for each and dropped after), and every file goes to
# one build, then to the other (who goes first alternates), so both see the same load of a
# shared machine: compare the ratio, not rates across runs. For each upload it reports the
# rows created, the rows the account held before, the seconds from the first byte sent to the
# answer (curl's time_total) and rows per second; then the ratio per file.
#
# THROUGHPUT_BINARY runs an already built server instead of building this checkout's;
# THROUGHPUT_PROFILE (release) names the cargo profile to build (`measure`: optimized, no fat
# LTO); THROUGHPUT_PORT (18200) is the reference server's port, the baseline's is the next one.
# The files are generated into a temporary folder, never committed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=common.sh
source benches/load/common.sh

ROWS=(${THROUGHPUT_ROWS:-50000 200000})
FILL_FILES="${THROUGHPUT_FILL_FILES:-4}"
PORT="${THROUGHPUT_PORT:-18200}"
DATABASE_URL="${THROUGHPUT_DATABASE_URL:-}"
PASSWORD='Str0ng!Passw0rd'
SECRET='load-test-secret-of-at-least-32-bytes'

TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
PROFILE="${THROUGHPUT_PROFILE:-release}"
if [[ -z "${THROUGHPUT_BINARY:-}" ]]; then
    nice cargo build --profile "$PROFILE" -q -p aggregation-examples --bin aggregation-server
fi
# Absolute: each server runs in the temporary folder.
BUILDS=("reference=$(realpath "${THROUGHPUT_BINARY:-$TARGET_DIR/$PROFILE/aggregation-server}")")
[[ -n "${THROUGHPUT_BASELINE_BINARY:-}" ]] &&
    BUILDS+=("baseline=$(realpath "$THROUGHPUT_BASELINE_BINARY")")
STORES=(sqlite)
[[ -n "$DATABASE_URL" ]] && STORES+=(postgres)

WORK="$(mktemp -d)"
declare -A SERVER_PID=() CREATED_DATABASE=() TOKEN=()
stop_servers() {
    local name
    for name in "${!SERVER_PID[@]}"; do
        kill "${SERVER_PID[$name]}" 2>/dev/null && wait "${SERVER_PID[$name]}" 2>/dev/null || true
    done
    SERVER_PID=()
    for name in "${!CREATED_DATABASE[@]}"; do
        psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS ${CREATED_DATABASE[$name]}" \
            >/dev/null || true
    done
    CREATED_DATABASE=()
}
trap 'stop_servers; rm -rf "$WORK"' EXIT

# The files: the descriptions of real card and transfer statements (processor prefixes, store
# numbers, cities: what merchant names are derived from), one account per file.
largest="${ROWS[-1]}"
python3 - "$WORK" "$FILL_FILES" "$largest" "${ROWS[@]}" <<'EOF'
import datetime, sys
work, fill_files, largest, sizes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
start = datetime.date(2015, 1, 1)
MERCHANTS = ["SQ *BLUE BOTTLE COFFEE {n} OAKLAND CA", "AMZN Mktp US*2K4{n} Seattle WA",
             "SHELL OIL 5744{n} BERKELEY CA", "PAYPAL *SPOTIFY 40293{n}",
             "TST* THE BURGER JOINT {n}", "UBER *TRIP HELP.UBER.COM {n}",
             "CITY OF OAKLAND PARKING {n}", "KARTENZAHLUNG REWE MARKT {n} BERLIN",
             "SEPA-Lastschrift Stadtwerke Muenchen {n}", "WHOLEFDS MKT #10{n} SAN FRANCISCO CA"]
def day(i): return start + datetime.timedelta(days=i // 300)
def cents(i): return (i * 7919) % 250_000 - 120_000
def money(c): return f"{'-' if c < 0 else ''}{abs(c) // 100}.{abs(c) % 100:02d}"
def text(i): return MERCHANTS[i % len(MERCHANTS)].format(n=i % 1_000)
def csv(name, rows):
    with open(f"{work}/{name}", "w", newline="") as out:
        out.write("Date,Description,Amount\n")
        out.write("".join(f"{day(i):%Y-%m-%d},{text(i)} {i},{money(cents(i))}\n"
                          for i in range(rows)))
def ofx(name, account, first, rows):
    with open(f"{work}/{name}", "w", newline="") as out:
        out.write(
            "OFXHEADER:100\r\nDATA:OFXSGML\r\nVERSION:102\r\nSECURITY:NONE\r\nENCODING:USASCII\r\n"
            "CHARSET:1252\r\nCOMPRESSION:NONE\r\nOLDFILEUID:NONE\r\nNEWFILEUID:NONE\r\n\r\n<OFX>\r\n"
            "<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20250101"
            "<LANGUAGE>ENG<FI><ORG>Throughput Bank<FID>1234</FI></SONRS></SIGNONMSGSRSV1>\r\n"
            "<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS><STMTRS>"
            f"<CURDEF>USD<BANKACCTFROM><BANKID>121000248<ACCTID>{account}<ACCTTYPE>CHECKING"
            "</BANKACCTFROM>\r\n<BANKTRANLIST><DTSTART>20150101<DTEND>20250101\r\n")
        out.write("".join(
            f"<STMTTRN><TRNTYPE>{'CREDIT' if cents(i) > 0 else 'DEBIT'}<DTPOSTED>"
            f"{day(i):%Y%m%d}120000<TRNAMT>{money(cents(i))}<FITID>TB{i:012d}"
            f"<NAME>{text(i)}<MEMO>Card purchase {i}</STMTTRN>\r\n"
            for i in range(first, first + rows)))
        out.write("</BANKTRANLIST><LEDGERBAL><BALAMT>1234.56<DTASOF>20250101</LEDGERBAL></STMTRS>"
                  "</STMTTRNRS></BANKMSGSRSV1></OFX>\r\n")
for size in map(int, sizes):
    csv(f"csv-{size}.csv", size)
    # The largest OFX file opens the account the fill files go on filling.
    ofx(f"ofx-{size}.ofx", "FILL" if size == largest else f"NEW{size}", 0, size)
for n in range(1, fill_files + 1):
    ofx(f"fill-{n}.ofx", "FILL", n * largest, largest)
EOF

# Starts a build on a store, with its verified user's token in TOKEN.
start_server() {
    local name="$1" binary="$2" store="$3" port="$4" url
    if [[ "$store" == postgres ]]; then
        CREATED_DATABASE[$name]="import_throughput_${name}_$$_$RANDOM"
        psql -q "$DATABASE_URL" -c "CREATE DATABASE ${CREATED_DATABASE[$name]}" >/dev/null
        url="${DATABASE_URL%/*}/${CREATED_DATABASE[$name]}"
    else
        rm -f "$WORK/$name".db*
        url="sqlite://$WORK/$name.db?mode=rwc"
    fi
    rm -rf "$WORK/outbox-$name"
    (
        cd "$WORK"
        AGG_BIND="127.0.0.1:$port" AGG_RATE_LIMITS=off AGG_LOG=warn AGG_JWT_SECRET="$SECRET" \
            AGG_DATABASE_URL="$url" AGG_OUTBOX_DIR="$WORK/outbox-$name" \
            AGG_MAX_UPLOAD_BYTES=$((256 * 1024 * 1024)) \
            exec "$binary" >>"$WORK/server-$name.log" 2>&1
    ) &
    SERVER_PID[$name]="$!"
    for _ in $(seq 1 100); do
        if curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null; then
            TOKEN[$name]="$(verified_access_token "http://127.0.0.1:$port" \
                "throughput-$RANDOM@example.com" "$PASSWORD" "$WORK/outbox-$name")"
            return 0
        fi
        sleep 0.1
    done
    echo "no answer from the $name server; its log:" >&2
    cat "$WORK/server-$name.log" >&2
    exit 1
}

# One upload: prints "build store label held created seconds rows/s".
upload() {
    local name="$1" store="$2" port="$3" label="$4" file="$5" held="$6"
    shift 6
    local answer="$WORK/answer-$name.json" result status seconds created
    result="$(curl -sS -o "$answer" -w '%{http_code} %{time_total}' --max-time 1200 \
        -H "Authorization: Bearer ${TOKEN[$name]}" -F "file=@$WORK/$file" "$@" \
        "http://127.0.0.1:$port/api/v1/imports")"
    status="${result% *}"
    seconds="${result#* }"
    created="$(sed -n 's/.*"transactions_created":\([0-9]*\).*/\1/p' "$answer")"
    if [[ "$status" != 201 ]]; then
        echo "$name $store $label: HTTP $status: $(head -c 600 "$answer")" >&2
        created=0
    fi
    echo "$name $store $label $held ${created:-0} $seconds $(awk -v r="${created:-0}" \
        -v s="$seconds" 'BEGIN { printf "%.0f", r / s }')"
}

RESULTS="$WORK/results"
: >"$RESULTS"
for store in "${STORES[@]}"; do
    names=()
    port="$PORT"
    declare -A PORTS=()
    for build in "${BUILDS[@]}"; do
        start_server "${build%%=*}" "${build#*=}" "$store" "$port"
        PORTS[${build%%=*}]="$port"
        names+=("${build%%=*}")
        port=$((port + 1))
    done
    sleep 2
    cases=()
    for size in "${ROWS[@]}"; do
        cases+=("csv-$size|csv-$size.csv|0|-F|account_name=CSV $size")
    done
    for size in "${ROWS[@]}"; do
        cases+=("ofx-$size|ofx-$size.ofx|0")
    done
    for n in $(seq 1 "$FILL_FILES"); do
        cases+=("ofx-fill-$n|fill-$n.ofx|$((n * largest))")
    done
    turn=0
    for entry in "${cases[@]}"; do
        IFS='|' read -r -a fields <<<"$entry"
        order=("${names[@]}")
        if ((turn % 2 == 1)) && ((${#names[@]} == 2)); then
            order=("${names[1]}" "${names[0]}")
        fi
        for name in "${order[@]}"; do
            upload "$name" "$store" "${PORTS[$name]}" "${fields[0]}" "${fields[1]}" \
                "${fields[2]}" "${fields[@]:3}" | tee -a "$RESULTS" >&2
        done
        turn=$((turn + 1))
    done
    stop_servers
done

echo
echo "Import throughput, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(held: rows in the account before the upload; s: upload to answer over loopback)"
awk '
    BEGIN {
        printf "%-8s %-12s %8s %8s | %-9s %7s %8s | %-9s %7s %8s | %6s\n", "store", "file",
            "rows", "held", "build", "s", "rows/s", "build", "s", "rows/s", "ratio"
    }
    {
        key = $2 " " $3; if (!(key in first)) { order[++n] = key; first[key] = $1 }
        rate[key, $1] = $7; secs[key, $1] = $6; rows[key] = $5; held[key] = $4
        builds[$1] = 1
    }
    END {
        for (i = 1; i <= n; i++) {
            key = order[i]; split(key, k, " ")
            line = sprintf("%-8s %-12s %8d %8d | %-9s %7.2f %8d", k[1], k[2], rows[key],
                held[key], "reference", secs[key, "reference"], rate[key, "reference"])
            if ("baseline" in builds) {
                line = line sprintf(" | %-9s %7.2f %8d | %6.2f", "baseline",
                    secs[key, "baseline"], rate[key, "baseline"],
                    rate[key, "baseline"] ? rate[key, "reference"] / rate[key, "baseline"] : 0)
            }
            print line
        }
    }' "$RESULTS"

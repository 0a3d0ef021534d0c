#!/usr/bin/env bash
# Two instances of the reference server over one PostgreSQL and one Redis, and checks that they
# share what they must:
#   (a) sessions: a user registers and logs in on A, refreshes on B; the old refresh token,
#       presented again on A, is detected as reused and ends the session everywhere;
#   (b) rate limits: logins sent alternately to A and B run out at one limit, not two;
#   (c) job leases: both instances run the jobs runner, and each run happens on one of them.
#
#   bash deploy/two-instances.sh
#
# With a Docker daemon and `docker compose`, it runs deploy/compose.yaml (nginx in front,
# instances on :8081 and :8082). Otherwise it starts two release `aggregation-server` processes
# on two loopback ports against the local PostgreSQL (a fresh database, dropped at exit) and
# Redis (an empty logical database, its keys deleted at exit). It exits non-zero when a check
# fails.
#
# Settings: TWO_INSTANCES_MODE=compose|processes (default: compose when Docker answers);
# AGG_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test: the server on which
# the fresh database is created); AGG_TEST_REDIS_URL (default redis://127.0.0.1:6379);
# AGG_SERVER_BINARY (default target/release/aggregation-server, built when missing).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$(mktemp -d)
FAILURES=0
# Job interval for the lease check: short, so that several runs happen during the script.
SYNC_INTERVAL=2
# The jobs runner logs at debug level when another instance holds a job's lease.
LOG_FILTER=info,aggregation_core::jobs=debug
EMAIL="ada-$$-$RANDOM@example.com"
PASSWORD='Corr3ct-Horse!'
# Every instance signs with the same secret and decrypts with the same keys.
AGG_JWT_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n')
AGG_ENCRYPTION_KEYS="k1:$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
export AGG_JWT_SECRET AGG_ENCRYPTION_KEYS

for tool in curl jq; do
    command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 2; }
done

pass() { echo "  ok    $*"; }
fail() {
    echo "  FAIL  $*"
    FAILURES=$((FAILURES + 1))
}

MODE=${TWO_INSTANCES_MODE:-}
if [[ -z $MODE ]]; then
    if docker info >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
        MODE=compose
    else
        MODE=processes
    fi
fi

# --- the topology -----------------------------------------------------------------------

COMPOSE=(docker compose -f "$ROOT/deploy/compose.yaml" -p aggregation-two-instances)
PIDS=()
DATABASE=""
REDIS_DB_URL=""

cleanup() {
    local status=$?
    set +e
    if [[ $MODE == compose ]]; then
        "${COMPOSE[@]}" down --volumes --remove-orphans >/dev/null 2>&1
    else
        for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
        for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
        if [[ -n $DATABASE ]]; then
            psql "$PG_URL" -qc "DROP DATABASE IF EXISTS \"$DATABASE\" WITH (FORCE)" >/dev/null
        fi
        if [[ -n $REDIS_DB_URL ]]; then
            redis-cli -u "$REDIS_DB_URL" --scan --pattern 'aggregation:*' |
                xargs -r redis-cli -u "$REDIS_DB_URL" del >/dev/null
            redis-cli -u "$REDIS_DB_URL" del two-instances:claim >/dev/null
        fi
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT

# Prints the log of instance a or b.
instance_log() {
    if [[ $MODE == compose ]]; then
        "${COMPOSE[@]}" logs --no-color --no-log-prefix "api-$1"
    else
        cat "$WORK/$1.log"
    fi
}

# Prints every email the instances wrote to their (shared) outbox.
outbox() {
    if [[ $MODE == compose ]]; then
        "${COMPOSE[@]}" exec -T api-a sh -c 'cat /srv/aggregation/outbox/*.eml 2>/dev/null' || true
    else
        cat "$WORK"/outbox/*.eml 2>/dev/null || true
    fi
}

# Runs one SQL query on the instances' database, printing unaligned rows.
sql() {
    # The store may keep its tables in their own schema.
    if [[ $MODE == compose ]]; then
        "${COMPOSE[@]}" exec -T -e PGOPTIONS='-c search_path=aggregation,public' postgres \
            psql -U aggregation -d aggregation -At -F ' ' -c "$1"
    else
        PGOPTIONS='-c search_path=aggregation,public' psql "$DATABASE_URL" -At -F ' ' -c "$1"
    fi
}

# Stops both instances gracefully (SIGTERM: requests, then jobs, then queued mail).
stop_instances() {
    if [[ $MODE == compose ]]; then
        "${COMPOSE[@]}" stop api-a api-b >/dev/null 2>&1
    else
        for pid in "${PIDS[@]}"; do kill -TERM "$pid"; done
        for pid in "${PIDS[@]}"; do wait "$pid" || true; done
        PIDS=()
    fi
}

start_compose() {
    export AGG_ADMIN_EMAILS=$EMAIL AGG_SYNC_INTERVAL_SECONDS=$SYNC_INTERVAL AGG_LOG=$LOG_FILTER
    echo "mode: docker compose (deploy/compose.yaml: nginx, api-a, api-b, postgres, redis)"
    "${COMPOSE[@]}" up --detach --build --wait
    A=http://127.0.0.1:8081
    B=http://127.0.0.1:8082
}

# Waits until instance $1 logs the address it listens on, and prints it.
listening_address() {
    local deadline=$((SECONDS + 60))
    while ((SECONDS < deadline)); do
        local address
        address=$(grep -oE 'listening on http://[0-9.:]+' "$WORK/$1.log" | head -n 1 | cut -d' ' -f3 || true)
        if [[ -n $address ]]; then
            echo "$address"
            return 0
        fi
        if ! kill -0 "${PIDS[$2]}" 2>/dev/null; then break; fi
        sleep 0.2
    done
    echo "instance $1 did not start:" >&2
    cat "$WORK/$1.log" >&2
    return 1
}

start_processes() {
    for tool in psql redis-cli; do
        command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 2; }
    done
    PG_URL=${AGG_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
    local redis_url=${AGG_TEST_REDIS_URL:-redis://127.0.0.1:6379}
    # Without a database number: the run picks its own.
    if [[ $redis_url =~ ^(.*://[^/]+)(/[0-9]*)?$ ]]; then redis_url=${BASH_REMATCH[1]}; fi
    local binary=${AGG_SERVER_BINARY:-$ROOT/target/release/aggregation-server}
    if [[ ! -x $binary ]]; then
        echo "building the release server (once) ..."
        cargo build --release --quiet -p aggregation-examples --bin aggregation-server
    fi
    DATABASE="agg_two_instances_$$_$RANDOM"
    psql "$PG_URL" -qc "CREATE DATABASE \"$DATABASE\"" >/dev/null
    DATABASE_URL="${PG_URL%/*}/$DATABASE"
    # Rate-limit keys use the server's fixed prefix, so the run takes a logical database
    # nobody uses (and claims it) instead of sharing keys with another server.
    local n
    for n in $(seq 1 15); do
        if [[ $(redis-cli -u "$redis_url/$n" dbsize) == 0 ]] &&
            [[ $(redis-cli -u "$redis_url/$n" set two-instances:claim $$ NX EX 900) == OK ]]; then
            REDIS_DB_URL="$redis_url/$n"
            break
        fi
    done
    [[ -n $REDIS_DB_URL ]] || { echo "no empty Redis database among 1 to 15" >&2; exit 2; }
    echo "mode: two processes ($binary)"
    echo "      PostgreSQL database $DATABASE (dropped at exit), Redis $REDIS_DB_URL"
    mkdir -p "$WORK/outbox"
    local instance
    for instance in a b; do
        # The environment compose.yaml gives its instances; only the address differs.
        (
            cd "$WORK"
            exec env AGG_BIND=127.0.0.1:0 \
                AGG_DATABASE_URL="$DATABASE_URL" \
                AGG_REDIS_URL="$REDIS_DB_URL" \
                AGG_BASE_URL=http://localhost:8080 \
                AGG_ADMIN_EMAILS="$EMAIL" \
                AGG_SYNC_INTERVAL_SECONDS=$SYNC_INTERVAL \
                AGG_OUTBOX_DIR="$WORK/outbox" \
                AGG_LOG="$LOG_FILTER" \
                NO_COLOR=1 \
                "$binary" >"$WORK/$instance.log" 2>&1
        ) &
        PIDS+=($!)
    done
    A=$(listening_address a 0)
    B=$(listening_address b 1)
}

# --- HTTP -------------------------------------------------------------------------------

# call METHOD URL [JSON] [BEARER]: sets STATUS, BODY and HEADERS (a file).
HEADERS="$WORK/headers"
call() {
    local args=(-s -X "$1" "$2" -o "$WORK/body" -D "$HEADERS" -w '%{http_code}')
    if [[ -n ${3:-} ]]; then args+=(-H 'content-type: application/json' -d "$3"); fi
    if [[ -n ${4:-} ]]; then args+=(-H "authorization: Bearer $4"); fi
    # A connection failure is status 000: a failed check, not the end of the script.
    STATUS=$(curl "${args[@]}") || true
    BODY=$(cat "$WORK/body" 2>/dev/null || true)
}

header() { grep -i "^$1:" "$HEADERS" | head -n 1 | cut -d' ' -f2 | tr -d '\r'; }

expect() {
    local want=$1 what=$2
    if [[ $STATUS == "$want" ]]; then
        pass "$what: $STATUS"
    else
        fail "$what: $STATUS, expected $want: $BODY"
    fi
}

credentials() { jq -nc --arg e "$1" --arg p "$2" '{email: $e, password: $p}'; }

# --- run --------------------------------------------------------------------------------

if [[ $MODE == compose ]]; then start_compose; else start_processes; fi
echo "instance A: $A    instance B: $B"
STARTED=$SECONDS

echo "(a) sessions: issued by one instance, refreshed by the other"
call POST "$A/api/v1/users" "$(credentials "$EMAIL" "$PASSWORD")"
expect 201 "register on A"
TOKEN=""
for _ in $(seq 1 50); do
    TOKEN=$(outbox | grep -ohE '[0-9a-f]{64}' | tail -n 1 || true)
    [[ -n $TOKEN ]] && break
    sleep 0.2
done
call POST "$B/api/v1/email-verifications" "$(jq -nc --arg t "$TOKEN" '{token: $t}')"
expect 201 "verify the email on B"
call POST "$A/api/v1/sessions" "$(credentials "$EMAIL" "$PASSWORD")"
expect 201 "log in on A"
FIRST_REFRESH=$(jq -r '.refresh_token // empty' <<<"$BODY")
call POST "$B/api/v1/tokens" "$(jq -nc --arg t "$FIRST_REFRESH" '{refresh_token: $t}')"
expect 201 "refresh on B with the token A issued"
SECOND_REFRESH=$(jq -r '.refresh_token // empty' <<<"$BODY")
SECOND_ACCESS=$(jq -r '.access_token // empty' <<<"$BODY")
call GET "$A/api/v1/sessions" "" "$SECOND_ACCESS"
expect 200 "list sessions on A with the access token B issued"
# Within 2 s of its rotation a rotated token is taken for a concurrent refresh that lost the
# race (401 without revoking); later it is a reuse, which revokes the session.
sleep 2.5
call POST "$A/api/v1/tokens" "$(jq -nc --arg t "$FIRST_REFRESH" '{refresh_token: $t}')"
expect 401 "reuse of the first refresh token on A is refused"
call POST "$B/api/v1/tokens" "$(jq -nc --arg t "$SECOND_REFRESH" '{refresh_token: $t}')"
expect 401 "after the reuse, B refuses the session's newest refresh token too"

call POST "$B/api/v1/sessions" "$(credentials "$EMAIL" "$PASSWORD")"
expect 201 "log in again on B (an admin: the email is in AGG_ADMIN_EMAILS)"
ADMIN=$(jq -r '.access_token // empty' <<<"$BODY")

echo "(b) rate limits: POST /api/v1/sessions alternately on A and B"
LIMIT=""
ALLOWED=0
REFUSED_BY=""
BURST_STARTED=$SECONDS
for attempt in $(seq 1 12); do
    if ((attempt % 2)); then target=A url=$A; else target=B url=$B; fi
    call POST "$url/api/v1/sessions" "$(credentials nobody@example.com wrong-password)"
    LIMIT=${LIMIT:-$(header x-ratelimit-limit)}
    echo "        attempt $attempt on $target: $STATUS (remaining $(header x-ratelimit-remaining))"
    if [[ $STATUS == 429 ]]; then
        [[ $REFUSED_BY == *$target* ]] || REFUSED_BY+=$target
    else
        ALLOWED=$((ALLOWED + 1))
    fi
done
# The login bucket refills its capacity once a minute: allow for what may have refilled
# meanwhile (rounded up).
REFILLED=$(((SECONDS - BURST_STARTED) * ${LIMIT:-0} / 60 + 1))
if [[ -n $LIMIT ]] && ((ALLOWED <= LIMIT + REFILLED)); then
    pass "$ALLOWED attempts allowed across both instances: one bucket of $LIMIT (at most $REFILLED refilled meanwhile), where two separate limiters would allow up to $((2 * LIMIT))"
else
    fail "$ALLOWED attempts allowed across both instances with a limit of ${LIMIT:-?} per client"
fi
if [[ $REFUSED_BY == *A* && $REFUSED_BY == *B* ]]; then
    pass "once the shared bucket was empty, both A and B answered 429"
else
    fail "429 came only from '${REFUSED_BY}'"
fi

echo "(c) job leases: both instances run the jobs runner"
# Wait for a few runs of the short-interval job (bounded).
RUNS=0
for _ in $(seq 1 60); do
    call GET "$A/api/v1/admin/jobs" "" "$ADMIN"
    RUNS=$(jq -r '[.jobs[] | select(.name == "sync_connections") | .runs] | first // 0' <<<"$BODY")
    ((RUNS >= 4)) && break
    sleep 0.5
done
expect 200 "GET /api/v1/admin/jobs on A"
jq -r '.jobs[] | "        \(.name): runs \(.runs), every \(.interval_seconds // "-") s, last error \(.last_error // "none")"' <<<"$BODY"
stop_instances
ELAPSED=$((SECONDS - STARTED))
echo "        both instances stopped gracefully after ${ELAPSED} s"
for job in purge_expired refresh_provider_tokens sync_connections; do
    on_a=$(instance_log a | grep -c "job started.*job=\"\?$job" || true)
    on_b=$(instance_log b | grep -c "job started.*job=\"\?$job" || true)
    recorded=$(sql "SELECT runs FROM job_runs WHERE name = '$job'")
    recorded=${recorded:-0}
    if ((on_a + on_b == recorded && recorded > 0)); then
        pass "$job: $recorded runs recorded, each started by one instance (A $on_a, B $on_b)"
    else
        fail "$job: $recorded runs recorded, but A started $on_a and B $on_b"
    fi
done
for instance in a b; do
    started=$(instance_log $instance | grep -c "job started" || true)
    skipped=$(instance_log $instance | grep -c "job skipped" || true)
    if ((started + skipped > 0)); then
        pass "the runner of ${instance^^} was active: $started runs started, $skipped skipped (leased elsewhere or not due)"
    else
        fail "the runner of ${instance^^} neither started nor skipped a job"
    fi
done
SYNC_RUNS=$(sql "SELECT runs FROM job_runs WHERE name = 'sync_connections'")
# One shared schedule: about one run per interval, not one per instance and interval.
MOST=$((ELAPSED / SYNC_INTERVAL + 2))
if ((${SYNC_RUNS:-0} <= MOST)); then
    pass "sync_connections ran ${SYNC_RUNS:-0} times in ${ELAPSED} s at one run per ${SYNC_INTERVAL} s shared (at most $MOST)"
else
    fail "sync_connections ran ${SYNC_RUNS} times in ${ELAPSED} s: more than one schedule (at most $MOST)"
fi
for job in purge_expired refresh_provider_tokens; do
    if [[ $(sql "SELECT runs FROM job_runs WHERE name = '$job'") == 1 ]]; then
        pass "$job: both instances were due at start, one ran it"
    else
        fail "$job: not exactly one run at start"
    fi
done

if ((FAILURES > 0)); then
    echo "$FAILURES checks failed"
    exit 1
fi
echo "every check passed"

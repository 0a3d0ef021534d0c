#!/usr/bin/env bash
# Baseline for the Redis rate-limit benchmark: redis-benchmark calling the store's own check
# script (aggregation-core/src/rate_limit/check.lua) by EVALSHA with the arguments the store
# sends (a bucket that never runs dry, the server's TIME as the clock), on one key, sequentially
# (-c 1) and with 16 clients, on the same machine. Usage: benches/redis-baseline.sh [host] [port]
set -euo pipefail
cd "$(dirname "$0")/.."
host=${1:-127.0.0.1}
port=${2:-6379}
sha=$(redis-cli -h "$host" -p "$port" SCRIPT LOAD "$(cat aggregation-core/src/rate_limit/check.lua)")
for clients in 1 16; do
    echo "clients=$clients"
    redis-benchmark -h "$host" -p "$port" -n 20000 -c "$clients" -q \
        EVALSHA "$sha" 1 "aggbench:baseline:rl:ip:bench:POST:/api/v1/sessions" 1e12 1e12 1 120 "" | tr '\r' '\n' | grep "requests per second"
done
redis-cli -h "$host" -p "$port" --scan --pattern 'aggbench:*' | xargs -r redis-cli -h "$host" -p "$port" DEL >/dev/null

#!/usr/bin/env bash
# Baseline for the Redis rate-limit benchmark: redis-benchmark running a token-bucket Lua script
# of the same shape (HMGET, arithmetic, HSET, EXPIRE) by EVALSHA, sequentially (-c 1) and with 16
# clients, on the same machine. Usage: benches/redis-baseline.sh [host] [port]
set -euo pipefail
host=${1:-127.0.0.1}
port=${2:-6379}
script='local s=redis.call("HMGET",KEYS[1],"t","ts") local now=tonumber(ARGV[1]) local t=tonumber(s[1]) or 1e12 local ts=tonumber(s[2]) or now t=math.min(1e12,t+(now-ts)*1e12/60) local ok=0 if t>=1 then t=t-1 ok=1 end redis.call("HSET",KEYS[1],"t",t,"ts",now) redis.call("EXPIRE",KEYS[1],120) return {ok,math.floor(t)}'
sha=$(redis-cli -h "$host" -p "$port" SCRIPT LOAD "$script")
for clients in 1 16; do
    echo "clients=$clients"
    redis-benchmark -h "$host" -p "$port" -n 20000 -c "$clients" -q \
        EVALSHA "$sha" 1 "aggbench:baseline:__rand_int__" 1000
done
redis-cli -h "$host" -p "$port" --scan --pattern 'aggbench:*' | xargs -r redis-cli -h "$host" -p "$port" DEL >/dev/null

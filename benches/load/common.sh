# Shared by the load scripts (sourced, not run).

# Registers EMAIL with PASSWORD on the server at BASE, verifies the address with the token the
# outbox folder OUTBOX receives, logs in, and prints the access token.
verified_access_token() {
    local base="$1" email="$2" password="$3" outbox="$4" token=""
    curl -fsS -X POST "$base/api/v1/users" -H 'Content-Type: application/json' \
        -d "{\"email\": \"$email\", \"password\": \"$password\"}" >/dev/null
    for _ in $(seq 1 50); do
        token="$(cat "$outbox"/*.eml 2>/dev/null | grep -oE '\b[0-9a-f]{64}\b' | head -n 1 || true)"
        [[ -n "$token" ]] && break
        sleep 0.1
    done
    curl -fsS -X POST "$base/api/v1/email-verifications" -H 'Content-Type: application/json' \
        -d "{\"token\": \"$token\"}" >/dev/null
    curl -fsS -X POST "$base/api/v1/sessions" -H 'Content-Type: application/json' \
        -d "{\"email\": \"$email\", \"password\": \"$password\"}" |
        sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p'
}

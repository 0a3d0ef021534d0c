local max_tokens = tonumber(ARGV[1])
local refill_rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
local available
if tokens == nil or ts == nil then
  available = max_tokens
else
  if now < ts then now = ts end
  available = math.min(max_tokens, tokens + (now - ts) * refill_rate / 60)
end
return string.format('%.17g', available)

-- A provider's request budget per connection, as a token bucket kept in one number: the
-- instant up to which its requests are paid for (GCRA's theoretical arrival time), in
-- microseconds since the Unix epoch. A bucket with no row, or one paid up to the past, is
-- full; each request sent moves the instant on by `per / requests`.
CREATE TABLE provider_request_budgets (
    connection_id BLOB PRIMARY KEY REFERENCES connections (id) ON DELETE CASCADE,
    paid_until_micros INTEGER NOT NULL
);

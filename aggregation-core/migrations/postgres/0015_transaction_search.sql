-- Search across accounts: the words of each transaction's description, merchant name and
-- notes in a GIN index.
--
-- The expression is exactly the one the search query matches against (ASCII punctuation
-- turned into spaces, then the `simple` configuration: lower case, no stemming, no stop
-- words), so the index serves it; PostgreSQL keeps it in step with every write.
CREATE INDEX transactions_search ON transactions USING gin (
    to_tsvector('simple', translate(
        coalesce(description, '') || ' ' || coalesce(merchant_name, '') || ' '
            || coalesce(notes, ''),
        '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                '))
);

-- Revoking every session of a user (password change and reset, "sign out everywhere") marks
-- the user's refresh tokens by user_id; without an index that scanned the whole table.
CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id);

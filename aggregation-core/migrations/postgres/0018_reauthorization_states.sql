-- A state started by a reauthorization names the connection it renews: its callback renews
-- exactly that connection, and a link provider's callback without a public token (Plaid
-- Link's update mode) is accepted only for such a state. NULL for a fresh connect. No foreign
-- key: a state lives minutes, and its callback checks that the connection is still the
-- user's and not disconnected.
ALTER TABLE oauth_states ADD COLUMN reauthorizes_connection_id UUID;

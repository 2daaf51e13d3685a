-- The Postgres peers' schema: what a read API over PostgreSQL would keep for these two
-- endpoints. The list entry's fields are columns (the list reads nothing else); the
-- detail's nested parts are JSONB columns of the meeting's row rather than child tables,
-- because the detail always reads them whole and together with the meeting, and the
-- service never queries inside them: one index lookup and one row instead of four joins
-- or four queries.
DROP TABLE IF EXISTS meetings, tokens, accounts;
CREATE TABLE accounts (
  account_id text PRIMARY KEY,
  plan_tier text,
  api_quota bigint,
  billing_cycle_anchor timestamptz
);
CREATE TABLE tokens (
  token_sha256 text PRIMARY KEY,
  token_id text NOT NULL,
  account_id text NOT NULL,
  revoked boolean NOT NULL
);
CREATE TABLE meetings (
  account_id text NOT NULL,
  id text NOT NULL,
  title text NOT NULL,
  kind text NOT NULL,
  status text NOT NULL,
  started_at timestamptz,
  ended_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  series_id text,
  timezone text,
  language text,
  note jsonb NOT NULL,
  summaries jsonb NOT NULL,
  participants jsonb NOT NULL,
  action_items jsonb NOT NULL,
  PRIMARY KEY (account_id, id)
);
\copy accounts FROM 'accounts.csv' WITH (FORMAT csv)
\copy tokens FROM 'tokens.csv' WITH (FORMAT csv)
\copy meetings FROM 'meetings.csv' WITH (FORMAT csv)
-- The keyset index of the list: a page is one index range scan.
CREATE INDEX meetings_keyset ON meetings (account_id, created_at DESC, id DESC);
VACUUM ANALYZE accounts, tokens, meetings;

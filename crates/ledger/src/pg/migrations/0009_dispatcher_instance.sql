-- Which channel instance a dispatcher sends through (issue 26 §1; SQLite
-- migration 0014): `motor/<instance_id>` or `cloud/<phone_number_id>`.
ALTER TABLE dispatchers ADD COLUMN channel_instance TEXT;

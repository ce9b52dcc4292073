-- Which channel instance a dispatcher sends through (issue 26 §1):
-- `motor/<instance_id>` or `cloud/<phone_number_id>`. `unavez doctor` warns
-- when two live dispatchers on one ledger send through different
-- instances (the same patients messaged from two numbers). NULL on rows
-- of dispatchers older than this column.
ALTER TABLE dispatchers ADD COLUMN channel_instance TEXT;

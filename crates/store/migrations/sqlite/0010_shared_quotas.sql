-- Shared quotas are a PostgreSQL feature (several instances on one database); on SQLite, one
-- instance counts its limits in process. This migration keeps the two backends' version numbers
-- in step and changes nothing.
SELECT 1;

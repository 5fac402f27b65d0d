-- exists.sql: Migrate's test for the Client's objects: true if the table
-- (with the leader column that elections added later), the sequence and
-- the fences table all exist. It needs no privilege on
-- them, where CREATE ... IF NOT EXISTS needs CREATE on the schema even
-- when they exist. {{table}}, {{sequence}} and {{fences}} are quoted
-- identifiers, which to_regclass reads as such.
SELECT to_regclass('{{table}}') IS NOT NULL
   AND to_regclass('{{sequence}}') IS NOT NULL
   AND to_regclass('{{fences}}') IS NOT NULL
   AND EXISTS (SELECT FROM pg_attribute
               WHERE attrelid = to_regclass('{{table}}') AND attname = 'leader' AND NOT attisdropped)

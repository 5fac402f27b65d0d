-- exists.sql: Migrate's test for the Client's objects: true if the table,
-- the sequence and the fences table all exist. It needs no privilege on
-- them, where CREATE ... IF NOT EXISTS needs CREATE on the schema even
-- when they exist. {{table}}, {{sequence}} and {{fences}} are quoted
-- identifiers, which to_regclass reads as such.
SELECT to_regclass('{{table}}') IS NOT NULL
   AND to_regclass('{{sequence}}') IS NOT NULL
   AND to_regclass('{{fences}}') IS NOT NULL

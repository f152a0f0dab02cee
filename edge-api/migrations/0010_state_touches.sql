-- The touches of the re-scanned window move into the state row (issue 29: fewer rows written per
-- change). A run compares the logs it re-scans with what earlier runs saw; kept as a table, each
-- change cost two rows written (its touch inserted, then deleted once it left the window). Kept
-- as one JSON value (`kya_core::window_touches::WindowTouches`: per block, its agents) in a
-- column of the state row, which every run that writes saves anyway, they cost none.
ALTER TABLE state ADD COLUMN touches TEXT;
UPDATE state SET touches = (
  SELECT json_group_object(CAST(block AS TEXT), json(agents))
  FROM (SELECT block, json_group_array(agent_id) AS agents FROM touches GROUP BY block)
) WHERE key = 'index';
DROP TABLE touches;

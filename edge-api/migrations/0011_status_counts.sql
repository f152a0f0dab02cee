-- Fewer rows written per status change and registration (issue 29: at most 6 per changed agent;
-- they cost 10 to 14). The status counts per bucket of 256 ids were versioned by index block, a
-- row per status and bucket: each count a run moved cost a new version inserted, the old one
-- ended (with the partial index of superseded counts) and both collected later, 5 rows, so a
-- status change (two counts) cost 10 beside its agent's 4. They are read only in the same D1
-- batch as the state row (a `?status=` page: `store::Store::state_with`), one transaction that
-- sees the current counts and the state naming their block together, so no answer needs an
-- earlier version. Now one row per bucket holds the current count of each status, updated in
-- place: a status change moves two counts of its agent's bucket in one row written, a
-- registration one. A reorganisation is undone as any change is: the run moves the counts from
-- each agent as held to the agent as read again.
--
-- The counts of an index in place are carried over (the current versions), not filled again.
CREATE TABLE status_counts (
  bucket INTEGER PRIMARY KEY,
  -- Agents of each status (kya_core::AgentStatus: 0 to 3) among ids bucket * 256 to
  -- bucket * 256 + 255.
  active INTEGER NOT NULL,
  suspended INTEGER NOT NULL,
  revoked INTEGER NOT NULL,
  terminated INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO status_counts (bucket, active, suspended, revoked, terminated)
SELECT bucket,
  sum(CASE status WHEN 0 THEN agents ELSE 0 END),
  sum(CASE status WHEN 1 THEN agents ELSE 0 END),
  sum(CASE status WHEN 2 THEN agents ELSE 0 END),
  sum(CASE status WHEN 3 THEN agents ELSE 0 END)
FROM status_buckets WHERE until IS NULL GROUP BY bucket;

DROP TABLE status_buckets;

-- The stream outlet's cursor (the last batch of the change feed handed to the stream's shards)
-- rides in the index's state row (`streamThrough`), which the runs write anyway, instead of a
-- row of its own written after every run that added batches.
UPDATE state SET value = json_set(value, '$.streamThrough',
  (SELECT CAST(value AS INTEGER) FROM state WHERE key = 'outlet:stream'))
WHERE key = 'index' AND EXISTS (SELECT 1 FROM state WHERE key = 'outlet:stream');
DELETE FROM state WHERE key = 'outlet:stream';

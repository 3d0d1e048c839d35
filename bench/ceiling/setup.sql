-- Fills the jobs table (dbq's own schema, created by scripts/ceiling.sh
-- with `dbq migrate sql --prefix ceiling_`) with :n ready jobs of one queue.
INSERT INTO ceiling_jobs (queue, payload) SELECT 'bench', '' FROM generate_series(1, :n);
VACUUM ANALYZE ceiling_jobs;

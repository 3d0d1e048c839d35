-- extend: renew the leases named by the (id, token) rows of the VALUES list
-- to now + the lease; returns the ids renewed. FORCESEEK: each lease by its
-- key, as in complete.sql.
UPDATE f
SET claimed_until = DATEADD(millisecond, @lease_ms, DATEADD(second, @lease_s, SYSUTCDATETIME()))
OUTPUT inserted.id
FROM {{table "jobs_inflight"}} AS f WITH (ROWLOCK, FORCESEEK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}, @t{{$i}}){{end}}) AS l (id, token) ON f.id = l.id AND f.claim_token = l.token;

-- Window functions (ranking, lag/lead, running and sliding frames, ntile, percent_rank,
-- first/last/nth_value, named windows) queried through views.
CREATE TABLE ten(x INTEGER);
INSERT INTO ten VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);
CREATE TABLE reading(id INTEGER PRIMARY KEY, sensor TEXT, t INTEGER, value REAL);
INSERT INTO reading(sensor, t, value)
SELECT 's' || (n % 8), n / 8, ((n * n * 31 + n * 7919) % 997) / 10.0 + (n % 8) * 3
FROM (SELECT a.x * 100 + b.x * 10 + c.x AS n FROM ten a, ten b, ten c)
WHERE n < 272;

CREATE VIEW ranked AS
SELECT sensor, t, value,
       row_number() OVER w AS rn,
       rank() OVER (PARTITION BY sensor ORDER BY value DESC) AS rk,
       dense_rank() OVER (PARTITION BY sensor ORDER BY CAST(value AS INTEGER) DESC) AS drk
FROM reading WINDOW w AS (PARTITION BY sensor ORDER BY t);

CREATE VIEW smoothed AS
SELECT sensor, t, value,
       avg(value) OVER (PARTITION BY sensor ORDER BY t ROWS BETWEEN 4 PRECEDING AND 4 FOLLOWING) AS ma9,
       sum(value) OVER (PARTITION BY sensor ORDER BY t ROWS UNBOUNDED PRECEDING) AS running,
       value - lag(value, 1, value) OVER (PARTITION BY sensor ORDER BY t) AS delta,
       lead(value, 2) OVER (PARTITION BY sensor ORDER BY t) AS ahead2
FROM reading;

SELECT sensor, count(*), max(rn), sum(rk = 1), max(drk) FROM ranked GROUP BY sensor ORDER BY sensor;
SELECT sensor, t, value FROM ranked WHERE rk <= 2 ORDER BY sensor, rk, t LIMIT 8;

SELECT sensor, printf('%.3f', max(ma9) - min(ma9)), printf('%.1f', max(running)), printf('%.1f', max(abs(delta)))
FROM smoothed GROUP BY sensor ORDER BY sensor;
SELECT count(*) FROM smoothed WHERE ahead2 IS NULL;

-- quartiles and relative standing
SELECT sensor, q, count(*), printf('%.2f', min(value)), printf('%.2f', max(value))
FROM (SELECT sensor, value, ntile(4) OVER (PARTITION BY sensor ORDER BY value) AS q FROM reading)
WHERE sensor IN ('s0', 's5') GROUP BY sensor, q ORDER BY sensor, q;
SELECT printf('%.4f', avg(pr)), printf('%.4f', avg(cd))
FROM (SELECT percent_rank() OVER (ORDER BY value) AS pr, cume_dist() OVER (ORDER BY value) AS cd FROM reading);

-- RANGE and GROUPS frames, frame exclusion, first/last/nth_value
SELECT sensor, printf('%.2f', sum(x)), printf('%.2f', sum(y)), printf('%.2f', sum(z))
FROM (SELECT sensor,
             first_value(value) OVER (PARTITION BY sensor ORDER BY t RANGE BETWEEN 3 PRECEDING AND CURRENT ROW) AS x,
             last_value(value) OVER (PARTITION BY sensor ORDER BY t GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS y,
             nth_value(value, 3) OVER (PARTITION BY sensor ORDER BY t ROWS BETWEEN 5 PRECEDING AND CURRENT ROW EXCLUDE TIES) AS z
      FROM reading)
GROUP BY sensor ORDER BY sensor;

-- windowed aggregates with FILTER and over a grouped result
SELECT t / 5 AS slice, count(*) OVER (ORDER BY t / 5) AS c,
       printf('%.2f', sum(avg(value)) OVER (ORDER BY t / 5 ROWS 2 PRECEDING)),
       printf('%.2f', max(value) FILTER (WHERE sensor > 's3'))
FROM reading GROUP BY t / 5 ORDER BY slice LIMIT 5 OFFSET 2;

-- gaps and islands: runs of increasing readings per sensor
SELECT sensor, max(len), count(*)
FROM (SELECT sensor, grp, count(*) AS len
      FROM (SELECT sensor, t, sum(up) OVER (PARTITION BY sensor ORDER BY t) AS grp
            FROM (SELECT sensor, t, CASE WHEN value > lag(value) OVER (PARTITION BY sensor ORDER BY t) THEN 0 ELSE 1 END AS up FROM reading))
      GROUP BY sensor, grp)
GROUP BY sensor ORDER BY sensor;

-- Recursive CTEs (counters, tree walk, Collatz, string building, ASCII Mandelbrot) combined with
-- string functions: substr, replace, instr, trim, hex/unhex, char/unicode, like/glob, upper/lower.
CREATE TABLE emp(id INTEGER PRIMARY KEY, boss INTEGER, name TEXT);
WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 400)
INSERT INTO emp SELECT n, CASE WHEN n = 1 THEN NULL ELSE (n * 5) / 11 + 1 END,
  char(65 + n % 26) || lower(char(65 + n * 7 % 26, 65 + n * 11 % 26, 65 + n * 13 % 26)) || '_' || n FROM c;

-- depth-first walk of the management tree with the path as a string
WITH RECURSIVE walk(id, depth, path) AS (
  SELECT id, 0, name FROM emp WHERE boss IS NULL
  UNION ALL
  SELECT e.id, w.depth + 1, w.path || '/' || e.name FROM emp e JOIN walk w ON e.boss = w.id
  ORDER BY 2 DESC
)
SELECT max(depth), count(*), max(length(path)), sum(instr(path, 'Q')) FROM walk;

WITH RECURSIVE walk(id, depth) AS (
  SELECT 1, 0 UNION ALL SELECT e.id, w.depth + 1 FROM emp e JOIN walk w ON e.boss = w.id
)
SELECT depth, count(*), group_concat(substr(name, 1, 2), '') FROM walk JOIN emp USING (id) GROUP BY depth HAVING depth < 4 ORDER BY depth;

-- Collatz sequence lengths for 1..80
WITH RECURSIVE col(start, v, steps) AS (
  SELECT n, n, 0 FROM (WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 80) SELECT n FROM c)
  UNION ALL
  SELECT start, CASE WHEN v % 2 = 0 THEN v / 2 ELSE 3 * v + 1 END, steps + 1 FROM col WHERE v <> 1
)
SELECT start, max(steps) FROM col GROUP BY start ORDER BY max(steps) DESC, start LIMIT 3;

-- build and mangle strings character by character
WITH RECURSIVE s(i, str) AS (
  SELECT 0, '' UNION ALL
  SELECT i + 1, str || char(97 + (i * i + 3 * i) % 26) || CASE WHEN i % 9 = 8 THEN ' ' ELSE '' END FROM s WHERE i < 600
)
SELECT length(str), upper(substr(str, 1, 20)), length(replace(str, ' ', '')), instr(str, 'xyz'),
       length(trim(str, 'abc ')), hex(substr(str, 100, 6)), unicode(substr(str, -1))
FROM s WHERE i = 600;

-- reverse words, caesar-shift them, and count patterns
WITH RECURSIVE
  w(k, word) AS (SELECT id, lower(substr(name, 1, 4)) FROM emp WHERE id <= 200),
  rev(k, rest, out) AS (SELECT k, word, '' FROM w UNION ALL SELECT k, substr(rest, 2), substr(rest, 1, 1) || out FROM rev WHERE rest <> ''),
  shifted(k, rest, out) AS (SELECT k, word, '' FROM w UNION ALL
    SELECT k, substr(rest, 2), out || char((unicode(rest) - 97 + 3) % 26 + 97) FROM shifted WHERE rest <> '')
SELECT (SELECT count(*) FROM rev WHERE rest = '' AND out LIKE '%a%'),
       (SELECT count(*) FROM shifted WHERE rest = '' AND out GLOB '[d-m]*'),
       (SELECT group_concat(out, ',') FROM (SELECT out FROM rev WHERE rest = '' AND k <= 5 ORDER BY k)),
       (SELECT group_concat(out, ',') FROM (SELECT out FROM shifted WHERE rest = '' AND k <= 5 ORDER BY k));

-- string functions over the table
SELECT count(*) FROM emp WHERE name LIKE '_a%' OR name GLOB '*[xyz]_*';
SELECT sum(length(quote(name)) + length(hex(name)) + length(unhex(hex(name)))) FROM emp;
SELECT substr(name, instr(name, '_') + 1) + 0 AS num, ltrim(rtrim(name, '0123456789'), 'ABCDEFGHIJKLM')
FROM emp WHERE id % 97 = 0 ORDER BY id;
SELECT format('%s|%10s|%-10s|%.3s', 'x', lower(name), upper(name), name), concat_ws('-', id, boss, length(name)), octet_length(name)
FROM emp WHERE id IN (7, 77, 277);

-- ASCII Mandelbrot set
WITH RECURSIVE
  xaxis(x) AS (VALUES(-2.0) UNION ALL SELECT x + 0.125 FROM xaxis WHERE x < 0.75),
  yaxis(y) AS (VALUES(-1.0) UNION ALL SELECT y + 0.25 FROM yaxis WHERE y < 1.0),
  m(iter, cx, cy, x, y) AS (
    SELECT 0, x, y, 0.0, 0.0 FROM xaxis, yaxis
    UNION ALL
    SELECT iter + 1, cx, cy, x * x - y * y + cx, 2.0 * x * y + cy FROM m
    WHERE (x * x + y * y) < 4.0 AND iter < 18
  ),
  m2(iter, cx, cy) AS (SELECT max(iter), cx, cy FROM m GROUP BY cx, cy),
  a(t) AS (SELECT group_concat(substr(' .+*#', 1 + min(iter / 4, 4), 1), '') FROM m2 GROUP BY cy)
SELECT rtrim(t) FROM a;

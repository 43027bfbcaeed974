-- Grouped aggregates (GROUP BY/HAVING, count DISTINCT, avg, total, group_concat), CASE,
-- and printf/format-heavy report output over a generated sales table.
CREATE TABLE n10(v INTEGER);
INSERT INTO n10 VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);
CREATE TABLE sale(
  id INTEGER PRIMARY KEY,
  region TEXT,
  product TEXT,
  qty INTEGER,
  price REAL,
  day INTEGER
);
INSERT INTO sale(region, product, qty, price, day)
SELECT CASE (n / 7 + n * n) % 5 WHEN 0 THEN 'north' WHEN 1 THEN 'south' WHEN 2 THEN 'east' WHEN 3 THEN 'west' ELSE 'central' END,
       'p' || ((n * n + n / 3) % 23),
       1 + n * 13 % 9,
       round(2.5 + (n * 7919 % 1000) / 40.0, 2),
       n * 17 % 365
FROM (SELECT a.v * 1000 + b.v * 100 + c.v * 10 + d.v AS n FROM n10 a, n10 b, n10 c, n10 d WHERE a.v < 2)
WHERE n < 1200;

SELECT printf('%-8s %6d %10.2f %8.3f', region, count(*), sum(qty * price), avg(price))
FROM sale GROUP BY region ORDER BY region;

SELECT printf('%s: %d products, %d days, qty %d..%d', region, count(DISTINCT product), count(DISTINCT day), min(qty), max(qty))
FROM sale GROUP BY region ORDER BY 1;

SELECT product, printf('%.2f', total(qty * price)) AS revenue
FROM sale GROUP BY product HAVING total(qty * price) > 1400 ORDER BY total(qty * price) DESC, product LIMIT 6;

SELECT printf('Q%d %-7s %5d %12.2f', day / 92 + 1, region, sum(qty), sum(qty * price))
FROM sale GROUP BY day / 92, region ORDER BY day / 92, region;

SELECT bucket, count(*), printf('%5.1f%%', 100.0 * count(*) / (SELECT count(*) FROM sale))
FROM (SELECT CASE WHEN price < 7 THEN 'cheap' WHEN price < 15 THEN 'mid' WHEN price < 22 THEN 'high' ELSE 'premium' END AS bucket FROM sale)
GROUP BY bucket ORDER BY count(*) DESC;

SELECT region, length(group_concat(DISTINCT product)), substr(group_concat(product, '|'), 1, 24)
FROM (SELECT region, product FROM sale WHERE qty = 9 ORDER BY product) GROUP BY region ORDER BY region;

SELECT printf('%08.3f|%+d|%x|%o|%e|%q|%-5s|%5.2s', price, qty - 5, id, day, price * 1000, region, product, region)
FROM sale WHERE id % 300 = 1 ORDER BY id;

SELECT sum(length(printf('%d-%s-%05.1f-%c', id, upper(region), price, product))) FROM sale;

SELECT max(c), min(c), avg(c) FROM (SELECT count(*) AS c FROM sale GROUP BY product, region);

-- Multi-way joins over a small star schema: inner/left joins, automatic indexes,
-- EXISTS/IN/NOT IN subqueries, compound selects (UNION/EXCEPT/INTERSECT) and DISTINCT.
CREATE TABLE k(v INTEGER);
INSERT INTO k VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);

CREATE TABLE region(id INTEGER PRIMARY KEY, name TEXT);
INSERT INTO region VALUES (1,'Alpine'),(2,'Coast'),(3,'Delta'),(4,'Plains'),(5,'Uplands'),(6,'Tundra');

CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, region_id INTEGER, tier INTEGER);
INSERT INTO customer
SELECT n, 'cust' || n, 1 + n * 7 % 5, n * 11 % 4
FROM (SELECT a.v * 100 + b.v * 10 + c.v + 1 AS n FROM k a, k b, k c WHERE a.v < 3);

CREATE TABLE product(id INTEGER PRIMARY KEY, name TEXT, category TEXT, cost INTEGER);
INSERT INTO product
SELECT n, 'prod' || n, CASE n % 4 WHEN 0 THEN 'tools' WHEN 1 THEN 'food' WHEN 2 THEN 'toys' ELSE 'books' END, 3 + n * 37 % 61
FROM (SELECT a.v * 10 + b.v + 1 AS n FROM k a, k b WHERE a.v < 8);

CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, day INTEGER);
INSERT INTO orders
SELECT n, 1 + (n * n + 3 * n) % 331, n * 3 % 360
FROM (SELECT a.v * 100 + b.v * 10 + c.v + 1 AS n FROM k a, k b, k c WHERE a.v < 9);

CREATE TABLE item(order_id INTEGER, product_id INTEGER, qty INTEGER);
INSERT INTO item
SELECT 1 + n % 900, 1 + n * 13 % 85, 1 + n % 7
FROM (SELECT a.v * 1000 + b.v * 100 + c.v * 10 + d.v AS n FROM k a, k b, k c, k d WHERE a.v < 2);
CREATE INDEX item_order ON item(order_id);
CREATE INDEX orders_customer ON orders(customer_id, day);

-- four-way join with grouping
SELECT r.name, count(DISTINCT o.id), sum(i.qty * p.cost)
FROM region r
JOIN customer c ON c.region_id = r.id
JOIN orders o ON o.customer_id = c.id
JOIN item i ON i.order_id = o.id
JOIN product p ON p.id = i.product_id
GROUP BY r.name ORDER BY r.name;

-- left joins keep regions and customers without orders
SELECT r.name, count(c.id), count(o.id)
FROM region r LEFT JOIN customer c ON c.region_id = r.id LEFT JOIN orders o ON o.customer_id = c.id
GROUP BY r.id ORDER BY r.id;

-- join on an unindexed column (automatic index) and a category breakdown
SELECT p.category, c.tier, sum(i.qty)
FROM item i JOIN product p ON p.id = i.product_id JOIN orders o ON o.id = i.order_id JOIN customer c ON c.id = o.customer_id
WHERE o.day BETWEEN 90 AND 180
GROUP BY p.category, c.tier ORDER BY p.category, c.tier;

-- semi-joins and anti-joins
SELECT count(*) FROM customer c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.day < 30);
SELECT count(*) FROM product p WHERE p.id NOT IN (SELECT product_id FROM item i JOIN orders o ON o.id = i.order_id WHERE o.day < 100 AND i.qty = 7);
SELECT count(*) FROM orders WHERE customer_id IN (SELECT id FROM customer WHERE tier = 3 AND region_id IN (2, 4));

-- compound selects
SELECT count(*) FROM (SELECT customer_id FROM orders WHERE day < 120 UNION SELECT customer_id FROM orders WHERE day > 300);
SELECT count(*) FROM (SELECT product_id FROM item WHERE qty = 7 INTERSECT SELECT product_id FROM item WHERE qty = 1);
SELECT count(*) FROM (SELECT id FROM customer EXCEPT SELECT customer_id FROM orders);
SELECT count(DISTINCT customer_id * 1000 + product_id) FROM orders o JOIN item i ON i.order_id = o.id;

-- top customers by spend, self-join to compare with their region's average
SELECT c.name, t.spend
FROM (SELECT o.customer_id AS cid, sum(i.qty * p.cost) AS spend
      FROM orders o JOIN item i ON i.order_id = o.id JOIN product p ON p.id = i.product_id
      GROUP BY o.customer_id) t
JOIN customer c ON c.id = t.cid
ORDER BY t.spend DESC, c.id LIMIT 5;

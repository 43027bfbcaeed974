-- Bulk loading (multi-row VALUES and INSERT ... SELECT in transactions), index creation,
-- point and range lookups through secondary indexes, indexed UPDATE and DELETE.
CREATE TABLE digit(d INTEGER PRIMARY KEY);
INSERT INTO digit VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);

CREATE TABLE account(
  id INTEGER PRIMARY KEY,
  branch INTEGER NOT NULL,
  code TEXT NOT NULL,
  balance INTEGER NOT NULL,
  opened INTEGER NOT NULL
);

BEGIN;
INSERT INTO account(id, branch, code, balance, opened)
SELECT n, n * 37 % 97, 'AC' || substr('00000' || (n * 7919 % 100003), -6), n * 104729 % 50000 - 10000, 20000 + n * 13 % 3650
FROM (SELECT a.d * 1000 + b.d * 100 + c.d * 10 + e.d + 1 AS n
      FROM digit a, digit b, digit c, digit e WHERE a.d < 2)
WHERE n <= 1200;
COMMIT;

CREATE TABLE ledger(
  account_id INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  amount INTEGER NOT NULL,
  memo TEXT,
  PRIMARY KEY(account_id, seq)
) WITHOUT ROWID;

BEGIN;
INSERT INTO ledger VALUES
  (1,1,500,'open'),(1,2,-120,'fee'),(2,1,900,'open'),(2,2,-45,'atm'),(3,1,77,'open'),
  (3,2,12,'interest'),(4,1,1500,'open'),(4,2,-300,'rent'),(5,1,250,'open'),(5,2,-5,'fee'),
  (6,1,640,'open'),(6,2,-64,'tax'),(7,1,333,'open'),(7,2,-33,'fee'),(8,1,808,'open'),
  (8,2,-80,'atm'),(9,1,990,'open'),(9,2,-99,'rent'),(10,1,101,'open'),(10,2,-10,'fee');
INSERT INTO ledger
SELECT n % 1187 + 11, n / 1187 + 3, (n * 6007 % 2001) - 1000, 'auto-' || (n % 17)
FROM (SELECT a.d * 1000 + b.d * 100 + c.d * 10 + e.d AS n
      FROM digit a, digit b, digit c, digit e)
WHERE n < 1300;
COMMIT;

CREATE INDEX account_branch ON account(branch, balance);
CREATE UNIQUE INDEX account_code ON account(code, id);
CREATE INDEX ledger_amount ON ledger(amount);

-- point lookups through the unique index
SELECT count(*), sum(balance) FROM account
WHERE code IN (SELECT 'AC' || substr('00000' || (n * 7919 % 100003), -6)
               FROM (SELECT a.d * 100 + b.d * 10 + c.d + 1 AS n FROM digit a, digit b, digit c WHERE a.d < 3));

-- many single-row lookups by rowid and by index, driven by a correlated subquery
SELECT sum((SELECT balance FROM account WHERE id = (x.n * 31 % 1200) + 1)),
       sum((SELECT count(*) FROM account WHERE branch = x.n % 97 AND balance > 0))
FROM (SELECT a.d * 100 + b.d * 10 + c.d AS n FROM digit a, digit b, digit c WHERE a.d < 5) AS x;

-- range scans with ORDER BY satisfied by the index
SELECT id, branch, balance FROM account WHERE branch = 42 ORDER BY balance DESC LIMIT 5;
SELECT count(*), min(amount), max(amount) FROM ledger WHERE amount BETWEEN -50 AND 50;
SELECT account_id, seq, amount FROM ledger WHERE account_id BETWEEN 500 AND 503 ORDER BY account_id, seq;

-- indexed updates and deletes
BEGIN;
UPDATE account SET balance = balance + 100 WHERE branch IN (3, 5, 7, 11, 13) AND balance < 0;
UPDATE ledger SET memo = 'reviewed' WHERE amount < -990;
DELETE FROM ledger WHERE account_id IN (SELECT id FROM account WHERE branch = 17);
DELETE FROM account WHERE branch = 17;
COMMIT;

SELECT count(*), sum(balance), min(opened), max(opened) FROM account;
SELECT count(*), sum(amount), count(DISTINCT memo) FROM ledger;
SELECT memo, count(*) FROM ledger WHERE memo = 'reviewed';

-- check the b-trees and indexes
PRAGMA integrity_check;

-- JSON functions (json_object/array, ->/->>, json_each/json_tree, json_set/patch/remove,
-- json_group_array/object) with AFTER/BEFORE triggers writing a JSON audit log and UPSERTs.
CREATE TABLE doc(id INTEGER PRIMARY KEY, body TEXT NOT NULL CHECK (json_valid(body)));
CREATE TABLE audit(seq INTEGER PRIMARY KEY, op TEXT, info TEXT);
CREATE TABLE tag_count(tag TEXT PRIMARY KEY, n INTEGER NOT NULL);

CREATE TRIGGER doc_ins AFTER INSERT ON doc BEGIN
  INSERT INTO audit(op, info) VALUES ('ins', json_object('id', new.id, 'kind', new.body ->> '$.kind'));
  INSERT INTO tag_count(tag, n) SELECT value, 1 FROM json_each(new.body, '$.tags') WHERE true
    ON CONFLICT(tag) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER doc_upd AFTER UPDATE OF body ON doc
  WHEN json_extract(old.body, '$.price') <> json_extract(new.body, '$.price') BEGIN
  INSERT INTO audit(op, info)
  VALUES ('price', json_array(new.id, old.body -> '$.price', new.body -> '$.price'));
END;
CREATE TRIGGER doc_del BEFORE DELETE ON doc BEGIN
  INSERT INTO audit(op, info) VALUES ('del', json_remove(old.body, '$.tags', '$.dims'));
END;

CREATE TABLE d(x INTEGER);
INSERT INTO d VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);

INSERT INTO doc(id, body)
SELECT n, json_object(
  'kind', CASE n % 3 WHEN 0 THEN 'book' WHEN 1 THEN 'disc' ELSE 'game' END,
  'title', 'item ' || n,
  'price', (n * 7919 % 5000) / 100.0,
  'stock', n * 31 % 17,
  'tags', json_array('t' || (n % 7), 't' || (n * n % 11), CASE WHEN n % 4 = 0 THEN 'sale' ELSE 'full' END),
  'dims', json_object('w', n % 13, 'h', n % 19, 'd', n % 5),
  'ok', json(CASE WHEN n % 6 = 0 THEN 'false' ELSE 'true' END))
FROM (SELECT a.x * 100 + b.x * 10 + c.x + 1 AS n FROM d a, d b, d c WHERE a.x < 3);

SELECT body ->> '$.kind' AS kind, count(*), printf('%.2f', sum(body ->> '$.price')), sum(body -> '$.dims' ->> 'w')
FROM doc GROUP BY kind ORDER BY kind;
SELECT tag, n FROM tag_count ORDER BY n DESC, tag LIMIT 6;

-- rewrite documents: json_set/json_insert/json_replace/json_patch fire the update trigger
UPDATE doc SET body = json_set(body, '$.price', round((body ->> '$.price') * 1.1, 2), '$.stock', (body ->> '$.stock') - 1)
WHERE id % 5 = 0;
UPDATE doc SET body = json_patch(body, '{"dims":{"d":null,"unit":"cm"},"ok":true}') WHERE id % 7 = 0;
UPDATE doc SET body = json_insert(json_replace(body, '$.title', upper(body ->> '$.title')), '$.tags[#]', 'new')
WHERE body ->> '$.stock' < 2;
DELETE FROM doc WHERE json_extract(body, '$.ok') = 0 AND id % 4 = 0;

SELECT op, count(*) FROM audit GROUP BY op ORDER BY op;
SELECT info FROM audit WHERE op = 'price' ORDER BY seq LIMIT 3;
SELECT info FROM audit WHERE op = 'del' ORDER BY seq LIMIT 2;

-- walk the documents as trees
SELECT type, count(*) FROM doc, json_tree(doc.body) GROUP BY type ORDER BY type;
SELECT count(*), max(json_array_length(body, '$.tags')) FROM doc WHERE EXISTS (SELECT 1 FROM json_each(body, '$.tags') WHERE value = 'new');
SELECT fullkey, count(*) FROM doc, json_tree(doc.body, '$.dims') WHERE atom IS NOT NULL GROUP BY fullkey ORDER BY fullkey;

-- aggregate back to JSON
SELECT json_group_object(kind, cnt) FROM (SELECT body ->> 'kind' AS kind, count(*) AS cnt FROM doc GROUP BY 1 ORDER BY 1);
SELECT length(json_group_array(json_object('id', id, 'p', body -> 'price'))) FROM doc;
SELECT json_pretty(json_object('total', (SELECT count(*) FROM doc), 'tags', (SELECT json_group_array(tag) FROM (SELECT tag FROM tag_count ORDER BY tag))));
SELECT json_quote('a"b'), json_type('[1,2.5,"x",null]', '$[1]'), json('  {"a" : [1, 2, {"b": null}]} '), '{"x":[10,20,30]}' -> '$.x[#-1]';
SELECT count(*) FROM doc WHERE json_valid(body) AND jsonb(body) IS NOT NULL AND json(jsonb(body)) = body;

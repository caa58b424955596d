// The snowflake type from Node.js: JSON that keeps every digit.
//
// The `pg` package parses json and jsonb columns with JSON.parse, as a
// browser parses an API's response. A bigint ID in JSON is a number, and
// JSON.parse rounds every integer above 2^53 to the nearest double: another
// ID, with no error. A column of the type `snowflake` is a JSON string, so
// the same query gives the exact IDs. This script shows both, on the same
// rows:
//   - to_json, row_to_json and jsonb_agg of rows keyed by snowflake: every
//     ID parses back exactly; keyed by bigint: they do not;
//   - reading a snowflake column: a string (pg does not know the type's
//     OID, and returns its text), as it returns a bigint by default;
//   - writing: a string or a BigInt as the parameter; generated keys with
//     RETURNING.
//
// Run it against a server that preloads snowflake_id (PG* environment
// variables select the server):
//   npm ci && PGHOST=127.0.0.1 PGPORT=54330 PGUSER=postgres node json_ids.js
'use strict';

const assert = require('node:assert/strict');
const { Client } = require('pg');

const ROWS = 1000;

async function main() {
  const client = new Client();
  await client.connect();
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS snowflake_id');
    await client.query(`DROP TABLE IF EXISTS api_orders, api_orders_bigint`);
    await client.query(`CREATE TABLE api_orders (
                          id   snowflake PRIMARY KEY DEFAULT snowflake_next(),
                          item text NOT NULL)`);

    // Generated keys: RETURNING id gives the new IDs, as strings.
    const inserted = await client.query(
      `INSERT INTO api_orders (item) SELECT 'item ' || g FROM generate_series(1, $1::int) g
       RETURNING id`, [ROWS]);
    assert.equal(inserted.rows.length, ROWS);
    const ids = inserted.rows.map((r) => r.id);
    assert.ok(ids.every((id) => typeof id === 'string' && /^[0-9]{18,19}$/.test(id)));
    assert.ok(ids.every((id) => BigInt(id) > 2n ** 53n));
    console.log(`inserted ${ROWS} rows, id ${ids[0]} (${typeof ids[0]}) ..`);

    // The same rows keyed by bigint.
    await client.query(`CREATE TABLE api_orders_bigint AS SELECT id::bigint AS id, item FROM api_orders`);

    // JSON of the rows, parsed by JSON.parse (pg parses json and jsonb),
    // each beside the exact ID as text.
    for (const [name, sql] of [
      ['to_json', 'SELECT to_json(o) AS j, o.id::text AS exact FROM %s o'],
      ['row_to_json', 'SELECT row_to_json(o) AS j, o.id::text AS exact FROM %s o'],
      ['jsonb_agg', `SELECT e.value AS j, x.exact
                     FROM (SELECT jsonb_agg(o ORDER BY id) AS a, array_agg(id::text ORDER BY id) AS ids FROM %s o) s,
                          jsonb_array_elements(s.a) WITH ORDINALITY e(value, n),
                          unnest(s.ids) WITH ORDINALITY x(exact, n)
                     WHERE e.n = x.n`],
    ]) {
      const typed = await client.query(sql.replaceAll('%s', 'api_orders'));
      assert.equal(typed.rows.length, ROWS);
      assert.ok(typed.rows.every((r) => typeof r.j.id === 'string'), `${name}: an ID is not a string`);
      const typedWrong = typed.rows.filter((r) => r.j.id !== r.exact).length;
      assert.equal(typedWrong, 0, `${name}: ${typedWrong} IDs of the type differ after JSON.parse`);

      const plain = await client.query(sql.replaceAll('%s', 'api_orders_bigint'));
      assert.ok(plain.rows.every((r) => typeof r.j.id === 'number'));
      const wrong = plain.rows.filter((r) => BigInt(r.j.id).toString() !== r.exact).length;
      assert.ok(wrong > 0, `${name}: every bigint ID survived JSON.parse, which cannot be`);
      console.log(`${name.padEnd(11)} snowflake: ${ROWS} of ${ROWS} IDs exact; bigint: ${wrong} of ${ROWS} IDs changed by JSON.parse`);
    }
    // One ID, both ways, for the eye: one that a double cannot hold (IDs
    // are above 2^57, where doubles are 32 apart, so a multiple of 32 would
    // survive by chance).
    const one = await client.query(
      `SELECT to_json(o.id)::text AS typed, to_json(o.id::bigint)::text AS plain FROM api_orders o
       WHERE o.id % 32 <> 0 ORDER BY id LIMIT 1`);
    const { typed, plain } = one.rows[0];
    console.log(`one ID: ${typed} parses to ${JSON.parse(typed)}; as bigint ${plain} parses to ${JSON.parse(plain)}`);
    assert.notEqual(String(JSON.parse(plain)), plain);

    // Writing: a string or a BigInt as the parameter.
    const next = (BigInt(ids[ROWS - 1]) + 1n).toString();
    await client.query(`INSERT INTO api_orders (id, item) VALUES ($1, 'as a string')`, [next]);
    await client.query(`INSERT INTO api_orders (id, item) VALUES ($1, 'as a BigInt')`, [BigInt(next) + 1n]);
    const back = await client.query(`SELECT id, item FROM api_orders WHERE id >= $1 ORDER BY id`, [next]);
    assert.deepEqual(back.rows, [
      { id: next, item: 'as a string' },
      { id: (BigInt(next) + 1n).toString(), item: 'as a BigInt' },
    ]);
    console.log('written as a string and as a BigInt, read back exactly');
  } finally {
    await client.end();
  }
}

main().then(
  () => console.log('node json example: ok'),
  (err) => {
    console.error(err);
    process.exit(1);
  });

// snowflake_id from Node.js with the `pg` package.
//
// JavaScript numbers are doubles: integers above 2^53 (9007199254740992) are
// rounded, and snowflake IDs are far above that. So:
//   - `pg` returns bigint (int8) columns as strings by default: keep them so;
//   - send IDs to browsers as strings too (JSON.stringify of a string is
//     exact), or as the short text forms of snowflake_encode();
//   - pass IDs back to PostgreSQL as strings (or BigInt): both are exact.
// Never parseInt()/Number() an ID; use BigInt(id) if you need arithmetic.
//
// Run it against a server that preloads snowflake_id (PG* environment
// variables select the server):
//   npm ci && PGHOST=127.0.0.1 PGPORT=54330 PGUSER=postgres node ids.js
'use strict';

const assert = require('node:assert/strict');
const { Client } = require('pg');

async function main() {
  const client = new Client();
  await client.connect();
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS snowflake_id');
    await client.query(`CREATE TABLE IF NOT EXISTS js_orders (
                          id   bigint PRIMARY KEY DEFAULT snowflake_next(),
                          item text NOT NULL)`);

    // int8 arrives as a string, exact.
    const { rows } = await client.query(
      "INSERT INTO js_orders (item) VALUES ('book') RETURNING id, id::text AS id_text");
    const id = rows[0].id;
    assert.equal(typeof id, 'string');
    assert.equal(id, rows[0].id_text);
    console.log(`inserted id ${id} (${typeof id})`);

    // As a number it would not be exact.
    assert.ok(BigInt(id) > 2n ** 53n);
    assert.equal(Number.isSafeInteger(Number(id)), false);
    console.log(`Number(id) = ${Number(id)}: not a safe integer, keep the string`);

    // JSON for a browser: the ID as a string.
    const json = JSON.stringify({ id, item: 'book' });
    assert.equal(JSON.parse(json).id, id);
    console.log(`JSON: ${json}`);

    // The string goes back as a parameter unchanged.
    const found = await client.query('SELECT item FROM js_orders WHERE id = $1', [id]);
    assert.equal(found.rows[0].item, 'book');

    // Text forms round-trip: every format, parsed by the server.
    for (const format of ['base62', 'base32', 'hex', 'decimal']) {
      const enc = await client.query('SELECT snowflake_encode($1, $2) AS t', [id, format]);
      const text = enc.rows[0].t;
      const dec = await client.query('SELECT snowflake_parse($1, $2) AS id', [text, format]);
      assert.equal(dec.rows[0].id, id);
      console.log(`${format.padEnd(7)} ${text}`);
    }

    // The client can decode hex itself with BigInt, exactly.
    const hex = (await client.query("SELECT snowflake_encode($1, 'hex') AS t", [id])).rows[0].t;
    assert.equal(BigInt('0x' + hex).toString(), id);
  } finally {
    await client.end();
  }
}

main().then(
  () => console.log('node example: ok'),
  (err) => {
    console.error(err);
    process.exit(1);
  });

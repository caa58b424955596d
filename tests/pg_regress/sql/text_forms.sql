-- IDs as text: snowflake_encode / snowflake_parse.
SELECT f AS format, snowflake_encode(249909418513149952, f) AS encoded,
       length(snowflake_encode(249909418513149952, f)) AS width,
       snowflake_parse(snowflake_encode(249909418513149952, f), f) AS parsed
FROM unnest(ARRAY['base62', 'base32', 'hex', 'decimal']) AS f;
-- base62 is the default
SELECT snowflake_encode(249909418513149952) AS base62, snowflake_parse('0ISaRSN189A') AS id;
-- the extremes
SELECT snowflake_encode(0) AS zero, snowflake_encode(9223372036854775807) AS max,
       snowflake_encode(9223372036854775807, 'base32') AS max_base32;
-- base32 and hex read either case; decimal also reads id::text
SELECT snowflake_parse('06xz1qr7r1400', 'base32') AS b32, snowflake_parse('0377E1BE0F809000', 'hex') AS hex,
       snowflake_parse('42', 'decimal') AS dec;
-- text order = ID order under COLLATE "C"
WITH ids(id) AS (VALUES (1), (61), (62), (3843), (3844), (249909418513149952), (9223372036854775807))
SELECT array_agg(id ORDER BY snowflake_encode(id) COLLATE "C") = array_agg(id ORDER BY id) AS base62_sorts,
       array_agg(id ORDER BY snowflake_encode(id, 'base32') COLLATE "C") = array_agg(id ORDER BY id) AS base32_sorts
FROM ids;
-- errors: SQLSTATE, message, hint (regress_try is defined in setup.sql)
\x on
SELECT * FROM regress_try($$SELECT snowflake_encode(1, 'base64')$$);
SELECT * FROM regress_try($$SELECT snowflake_encode(-1)$$);
SELECT * FROM regress_try($$SELECT snowflake_parse('')$$);
SELECT * FROM regress_try($$SELECT snowflake_parse('0ISaRSN189')$$);
SELECT * FROM regress_try($$SELECT snowflake_parse('0ISaRSN18-A')$$);
SELECT * FROM regress_try($$SELECT snowflake_parse('AzL8n0Y58m8')$$);
SELECT * FROM regress_try($$SELECT snowflake_parse('06XZ1QR7R14OO', 'base32')$$);
SELECT * FROM regress_try($$SELECT snowflake_parse('9223372036854775808', 'decimal')$$);
\x off

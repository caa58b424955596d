"""Inserting rows with DEFAULT snowflake_next() from Python, with psycopg 3.

Run it against a server that preloads snowflake_id (connection settings from
the usual PG* environment variables, or a connection string as argument):

    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
    PGHOST=127.0.0.1 PGPORT=54330 PGUSER=postgres .venv/bin/python orders.py

bigint columns arrive as Python ints: no precision is lost, whatever the size.
"""

import sys

import psycopg


def main(conninfo: str = "") -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS snowflake_id")
        conn.execute(
            """CREATE TABLE IF NOT EXISTS py_orders (
                   id   bigint PRIMARY KEY DEFAULT snowflake_next(),
                   item text NOT NULL)"""
        )

        # One row: RETURNING id gives the new ID as an int.
        row = conn.execute(
            "INSERT INTO py_orders (item) VALUES (%s) RETURNING id", ("book",)
        ).fetchone()
        assert row is not None
        first_id = row[0]
        assert isinstance(first_id, int)
        print(f"inserted id {first_id} ({type(first_id).__name__})")

        # Many rows in one statement; IDs come back in insertion order.
        items = [f"item {i}" for i in range(100)]
        ids = [
            r[0]
            for r in conn.execute(
                "INSERT INTO py_orders (item) SELECT unnest(%s::text[]) RETURNING id",
                (items,),
            )
        ]
        assert len(ids) == 100 and ids == sorted(ids) and ids[0] > first_id
        print(f"inserted {len(ids)} more, ids {ids[0]} .. {ids[-1]}")

        # IDs are above 2^53: a JavaScript number could not hold them, a
        # Python int can.
        assert all(i > 2**53 for i in ids)

        # Read back by ID, and decode it.
        item, node, created = conn.execute(
            "SELECT item, snowflake_node(id), snowflake_timestamp(id) FROM py_orders WHERE id = %s",
            (ids[-1],),
        ).fetchone()
        assert item == "item 99"
        print(f"id {ids[-1]}: {item!r}, node {node}, issued at {created.isoformat()}")

        # Short text form for URLs, and back.
        public, back = conn.execute(
            "SELECT snowflake_encode(%s), snowflake_parse(snowflake_encode(%s))",
            (first_id, first_id),
        ).fetchone()
        assert back == first_id
        print(f"id {first_id} as base62: {public}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
    print("python example: ok")

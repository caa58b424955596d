"""A table keyed by the snowflake type, from Python with psycopg 3.

psycopg knows PostgreSQL's built-in types by their OIDs; the snowflake type
is an extension's, so by default psycopg returns its text (a `str`) in text
mode and its 8 bytes in binary mode. One call per connection makes it an
`int`, exact at any size: register bigint's loaders for the type's OID
(below, `use_int_for_snowflake`). Writing needs nothing: a Python int is
sent as a bigint (or a smaller integer), which PostgreSQL stores into the
type.

Run it against a server that preloads snowflake_id (connection settings from
the usual PG* environment variables, or a connection string as argument):

    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
    PGHOST=127.0.0.1 PGPORT=54330 PGUSER=postgres .venv/bin/python snowflake_type.py
"""

import json
import sys

import psycopg
from psycopg.types import TypeInfo
from psycopg.types.numeric import Int8BinaryLoader, IntLoader


def use_int_for_snowflake(conn: psycopg.Connection) -> None:
    """Read the snowflake type as int, in text and binary results."""
    info = TypeInfo.fetch(conn, "snowflake")
    if info is None:
        raise RuntimeError("no type snowflake: CREATE EXTENSION snowflake_id first")
    conn.adapters.register_loader(info.oid, IntLoader)
    conn.adapters.register_loader(info.oid, Int8BinaryLoader)


def main(conninfo: str = "") -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS snowflake_id")
        conn.execute("DROP TABLE IF EXISTS py_typed_orders")
        conn.execute(
            """CREATE TABLE py_typed_orders (
                   id   snowflake PRIMARY KEY DEFAULT snowflake_next(),
                   item text NOT NULL)"""
        )

        # Without the loaders: the text of the ID (exact, but a str).
        row = conn.execute(
            "INSERT INTO py_typed_orders (item) VALUES (%s) RETURNING id", ("book",)
        ).fetchone()
        assert row is not None and isinstance(row[0], str)
        print(f"default: generated key {row[0]} ({type(row[0]).__name__})")
        binary = conn.cursor(binary=True).execute("SELECT id FROM py_typed_orders").fetchone()
        assert binary is not None and isinstance(binary[0], bytes) and len(binary[0]) == 8
        assert int.from_bytes(binary[0], "big", signed=True) == int(row[0])

        # With them: int, in text and binary mode.
        use_int_for_snowflake(conn)
        first = conn.execute(
            "INSERT INTO py_typed_orders (item) VALUES (%s) RETURNING id", ("pen",)
        ).fetchone()
        assert first is not None and isinstance(first[0], int) and first[0] > 2**53
        print(f"with the loaders: generated key {first[0]} ({type(first[0]).__name__})")
        ids = [
            r[0]
            for r in conn.execute(
                "INSERT INTO py_typed_orders (item) SELECT unnest(%s::text[]) RETURNING id",
                ([f"item {i}" for i in range(100)],),
            )
        ]
        assert len(ids) == 100 and ids == sorted(ids) and all(isinstance(i, int) for i in ids)
        in_binary = conn.cursor(binary=True).execute(
            "SELECT id FROM py_typed_orders WHERE id = %s", (ids[-1],)
        ).fetchone()
        assert in_binary == (ids[-1],)

        # Writing an int, and finding rows by int (the index is used).
        explicit = ids[-1] + 1
        conn.execute(
            "INSERT INTO py_typed_orders (id, item) VALUES (%s, %s)", (explicit, "explicit")
        )
        found = conn.execute(
            "SELECT id, item FROM py_typed_orders WHERE id = %s", (explicit,)
        ).fetchone()
        assert found == (explicit, "explicit")
        small = conn.execute(
            "SELECT count(*) FROM py_typed_orders WHERE id = ANY(%s)", ([explicit, 5],)
        ).fetchone()
        assert small == (1,)
        print(f"written as int {explicit}, found by int")

        # JSON made by the server: IDs are strings, exact for any client.
        doc = conn.execute(
            "SELECT json_agg(o ORDER BY id)::text FROM py_typed_orders o"
        ).fetchone()
        assert doc is not None
        rows = json.loads(doc[0])
        assert all(isinstance(r["id"], str) for r in rows)
        assert [int(r["id"]) for r in rows][-1] == explicit
        print(f"json_agg: {len(rows)} rows, IDs as strings")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
    print("python snowflake type example: ok")

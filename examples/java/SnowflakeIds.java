// The snowflake type from Java with the PostgreSQL JDBC driver.
//
// The driver knows PostgreSQL's built-in types by their OIDs; the snowflake
// type is an extension's, so ResultSetMetaData reports it as
// Types.OTHER and getObject() returns a PGobject holding its text. Read it
// with getLong() (or getString()), exact at any size; write it with
// setLong() or setObject(Long): the driver sends a bigint, which PostgreSQL
// stores into the type. Generated keys (Statement.RETURN_GENERATED_KEYS)
// come back the same way.
//
// Run it against a server that preloads snowflake_id, with the driver's jar
// (Debian: libpostgresql-jdbc-java, /usr/share/java/postgresql.jar), as a
// single-file program (Java 11 or later):
//   java -cp /usr/share/java/postgresql.jar SnowflakeIds.java \
//        'jdbc:postgresql://127.0.0.1:54330/postgres?user=postgres'
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;

public class SnowflakeIds {
    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    public static void main(String[] args) throws SQLException {
        try (Connection conn = DriverManager.getConnection(args[0])) {
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE EXTENSION IF NOT EXISTS snowflake_id");
                st.execute("DROP TABLE IF EXISTS java_orders");
                st.execute("CREATE TABLE java_orders ("
                        + " id snowflake PRIMARY KEY DEFAULT snowflake_next(), item text NOT NULL)");
            }

            // Generated keys.
            long generated;
            try (PreparedStatement ins = conn.prepareStatement(
                    "INSERT INTO java_orders (item) VALUES (?)", Statement.RETURN_GENERATED_KEYS)) {
                ins.setString(1, "book");
                check(ins.executeUpdate() == 1, "one row inserted");
                try (ResultSet keys = ins.getGeneratedKeys()) {
                    check(keys.next(), "a generated key");
                    generated = keys.getLong("id");
                    check(keys.getString("id").equals(Long.toString(generated)), "getString and getLong agree");
                    Object asObject = keys.getObject("id");
                    System.out.println("generated key " + generated + " (getObject: "
                            + asObject.getClass().getName() + ")");
                    check(generated > (1L << 53), "the ID is above 2^53");
                }
            }

            // Writing with setLong and setObject(Long).
            try (PreparedStatement ins = conn.prepareStatement(
                    "INSERT INTO java_orders (id, item) VALUES (?, ?)")) {
                ins.setLong(1, generated + 1);
                ins.setString(2, "setLong");
                ins.executeUpdate();
                ins.setObject(1, Long.valueOf(generated + 2));
                ins.setString(2, "setObject");
                ins.executeUpdate();
            }

            // Reading by ID, with the type as the driver reports it.
            try (PreparedStatement sel = conn.prepareStatement(
                    "SELECT id, item FROM java_orders WHERE id = ? OR id = ? ORDER BY id")) {
                sel.setLong(1, generated + 1);
                sel.setLong(2, generated + 2);
                try (ResultSet rs = sel.executeQuery()) {
                    check(rs.getMetaData().getColumnTypeName(1).equals("snowflake"), "type name snowflake");
                    check(rs.getMetaData().getColumnType(1) == Types.OTHER, "reported as Types.OTHER");
                    check(rs.next() && rs.getLong(1) == generated + 1 && rs.getString(2).equals("setLong"), "setLong row");
                    check(rs.next() && rs.getLong(1) == generated + 2 && rs.getString(2).equals("setObject"), "setObject row");
                    check(!rs.next(), "two rows");
                }
            }
            System.out.println("written with setLong and setObject(Long), read with getLong: exact");

            // JSON made by the server: the ID is a string.
            try (PreparedStatement sel = conn.prepareStatement(
                    "SELECT row_to_json(o)::text FROM java_orders o WHERE id = ?")) {
                sel.setLong(1, generated);
                try (ResultSet rs = sel.executeQuery()) {
                    check(rs.next(), "a row");
                    String json = rs.getString(1);
                    check(json.contains("\"id\":\"" + generated + "\""), "the ID is a JSON string: " + json);
                    System.out.println("row_to_json: " + json);
                }
            }
        }
        System.out.println("java example: ok");
    }
}

// Java Paimon (0.9, the core inside pypaimon 0.2.0's sdist) against the server's tables: the
// tests' interop harness. A single file run by Java's source launcher (no build step):
//
//   java -cp paimon-python-java-bridge-0.9.0.jar:pyspark/jars/* tests/java/PaimonJava.java CMD ARGS
//
// Commands (WH a warehouse directory, TABLE db.name):
//   create WH TABLE SPEC      SPEC is JSON: {"fields": [["id", "bigint!"], ["name", "string"]],
//                             "primaryKeys": [...], "partitionKeys": [...], "options": {...}}
//                             types: tinyint smallint int bigint float double boolean string; ! is NOT NULL
//   read WH TABLE [SNAPSHOT]  the table's rows (at SNAPSHOT) as JSON lines
//   latest WH TABLE           the latest snapshot id (0 when none)
//   write WH TABLE            JSON lines on stdin (an optional "_kind": +I -U +U -D) as one commit;
//                             prints the snapshot id
//   commits WH TABLE N ROWS WRITER START INTERVAL_MS
//                             N commits of ROWS generated rows each (ids START, START+1, ...; string
//                             columns WRITER-id, numbers id), one every INTERVAL_MS; prints each
//                             commit's snapshot id as it is made. Write-only (no compaction of its
//                             own): the server's maintenance compacts the table
//   expire WH TABLE RETAIN    Java's snapshot expiry keeping the last RETAIN; prints how many went
//
// A failure prints one line "error: <exception>" on stderr and exits 1.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.options.Options;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.StreamTableCommit;
import org.apache.paimon.table.sink.StreamTableWrite;
import org.apache.paimon.table.sink.StreamWriteBuilder;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypes;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;
import org.apache.paimon.utils.JsonSerdeUtil;

public class PaimonJava {

    public static void main(String[] args) {
        try {
            run(args);
            System.out.flush();
            System.exit(0);
        } catch (Throwable t) {
            Throwable root = t;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            System.err.println("error: " + t + (root != t ? " (caused by " + root + ")" : ""));
            System.exit(1);
        }
    }

    static void run(String[] args) throws Exception {
        if (args.length < 3) {
            throw new IllegalArgumentException("usage: PaimonJava COMMAND WAREHOUSE TABLE [ARGS]");
        }
        Options options = new Options();
        options.set("warehouse", args[1]);
        try (Catalog catalog = CatalogFactory.createCatalog(CatalogContext.create(options))) {
            Identifier id = Identifier.fromString(args[2]);
            switch (args[0]) {
                case "create":
                    create(catalog, id, args[3]);
                    break;
                case "read":
                    read(catalog.getTable(id), args.length > 3 ? Long.parseLong(args[3]) : null);
                    break;
                case "latest":
                    System.out.println(catalog.getTable(id).latestSnapshotId().orElse(0L));
                    break;
                case "write":
                    write(catalog.getTable(id));
                    break;
                case "commits":
                    commits(catalog.getTable(id), Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5],
                            Long.parseLong(args[6]), Long.parseLong(args[7]));
                    break;
                case "expire":
                    int retain = Integer.parseInt(args[3]);
                    int expired = catalog.getTable(id).newExpireSnapshots().config(ExpireConfig.builder()
                            .snapshotRetainMax(retain).snapshotRetainMin(Math.min(retain, 1))
                            .snapshotTimeRetain(Duration.ZERO).snapshotMaxDeletes(Integer.MAX_VALUE).build())
                            .expire();
                    System.out.println(expired);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + args[0]);
            }
        }
    }

    // -- create ---------------------------------------------------------------------------

    @SuppressWarnings("unchecked")
    static void create(Catalog catalog, Identifier id, String spec) throws Exception {
        Map<String, Object> s = JsonSerdeUtil.fromJson(spec, Map.class);
        Schema.Builder b = Schema.newBuilder();
        for (List<String> f : (List<List<String>>) s.get("fields")) {
            b.column(f.get(0), type(f.get(1)));
        }
        b.primaryKey((List<String>) s.getOrDefault("primaryKeys", Collections.emptyList()));
        b.partitionKeys((List<String>) s.getOrDefault("partitionKeys", Collections.emptyList()));
        b.options((Map<String, String>) s.getOrDefault("options", Collections.emptyMap()));
        catalog.createDatabase(id.getDatabaseName(), true);
        catalog.createTable(id, b.build(), false);
    }

    static DataType type(String spec) {
        boolean notNull = spec.endsWith("!");
        String name = notNull ? spec.substring(0, spec.length() - 1) : spec;
        DataType t;
        switch (name) {
            case "tinyint": t = DataTypes.TINYINT(); break;
            case "smallint": t = DataTypes.SMALLINT(); break;
            case "int": t = DataTypes.INT(); break;
            case "bigint": t = DataTypes.BIGINT(); break;
            case "float": t = DataTypes.FLOAT(); break;
            case "double": t = DataTypes.DOUBLE(); break;
            case "boolean": t = DataTypes.BOOLEAN(); break;
            case "string": t = DataTypes.STRING(); break;
            default: throw new IllegalArgumentException("unknown type " + spec);
        }
        return notNull ? t.notNull() : t;
    }

    // -- read -----------------------------------------------------------------------------

    static void read(Table table, Long snapshot) throws Exception {
        if (snapshot != null) {
            table = table.copy(Collections.singletonMap("scan.snapshot-id", snapshot.toString()));
        }
        RowType rowType = table.rowType();
        List<DataField> fields = rowType.getFields();
        InternalRow.FieldGetter[] getters = new InternalRow.FieldGetter[fields.size()];
        for (int i = 0; i < getters.length; i++) {
            getters[i] = InternalRow.createFieldGetter(fields.get(i).type(), i);
        }
        ReadBuilder rb = table.newReadBuilder();
        StringBuilder out = new StringBuilder();
        try (RecordReader<InternalRow> reader = rb.newRead().createReader(rb.newScan().plan())) {
            reader.forEachRemaining(row -> {
                Map<String, Object> m = new LinkedHashMap<>();
                for (int i = 0; i < getters.length; i++) {
                    m.put(fields.get(i).name(), json(getters[i].getFieldOrNull(row)));
                }
                out.append(JsonSerdeUtil.toFlatJson(m)).append('\n');
            });
        }
        System.out.print(out);
    }

    static Object json(Object v) {
        if (v instanceof BinaryString) {
            return v.toString();
        }
        if (v instanceof Decimal) {
            return ((Decimal) v).toBigDecimal();
        }
        return v;
    }

    // -- write ----------------------------------------------------------------------------

    @SuppressWarnings("unchecked")
    static void write(Table table) throws Exception {
        List<GenericRow> rows = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (!line.isBlank()) {
                rows.add(row(table.rowType(), JsonSerdeUtil.fromJson(line, Map.class)));
            }
        }
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        try (BatchTableWrite write = builder.newWrite(); BatchTableCommit commit = builder.newCommit()) {
            for (GenericRow r : rows) {
                write.write(r);
            }
            commit.commit(write.prepareCommit());
        }
        System.out.println(table.latestSnapshotId().orElse(0L));
    }

    static GenericRow row(RowType type, Map<String, Object> values) {
        Object kind = values.get("_kind");
        GenericRow r = new GenericRow(kind == null ? RowKind.INSERT : RowKind.fromShortString(kind.toString()),
                type.getFieldCount());
        for (int i = 0; i < type.getFieldCount(); i++) {
            DataField f = type.getFields().get(i);
            r.setField(i, value(f.type(), values.get(f.name())));
        }
        return r;
    }

    static Object value(DataType type, Object v) {
        if (v == null) {
            return null;
        }
        switch (type.getTypeRoot()) {
            case TINYINT: return ((Number) v).byteValue();
            case SMALLINT: return ((Number) v).shortValue();
            case INTEGER: return ((Number) v).intValue();
            case BIGINT: return ((Number) v).longValue();
            case FLOAT: return ((Number) v).floatValue();
            case DOUBLE: return ((Number) v).doubleValue();
            case BOOLEAN: return v;
            case CHAR:
            case VARCHAR: return BinaryString.fromString(v.toString());
            case DECIMAL:
                return Decimal.fromBigDecimal(new BigDecimal(v.toString()),
                        ((org.apache.paimon.types.DecimalType) type).getPrecision(),
                        ((org.apache.paimon.types.DecimalType) type).getScale());
            default: throw new IllegalArgumentException("no JSON conversion for " + type);
        }
    }

    // -- commits every INTERVAL_MS ------------------------------------------------------------

    static void commits(Table table, int n, int rowsPer, String writer, long start, long intervalMs)
            throws Exception {
        // write-only: the server compacts the table; two compactors' COMPACT commits would conflict
        table = table.copy(Collections.singletonMap("write-only", "true"));
        RowType type = table.rowType();
        String kindField = table.options().get("rowkind.field");
        StreamWriteBuilder builder = table.newStreamWriteBuilder();
        long next = start;
        try (StreamTableWrite write = builder.newWrite(); StreamTableCommit commit = builder.newCommit()) {
            for (int c = 0; c < n; c++) {
                long began = System.nanoTime();
                for (int i = 0; i < rowsPer; i++, next++) {
                    Map<String, Object> values = new LinkedHashMap<>();
                    for (DataField f : type.getFields()) {
                        boolean text = f.type().getTypeRoot() == org.apache.paimon.types.DataTypeRoot.VARCHAR;
                        values.put(f.name(), f.name().equals(kindField) ? "+I" : text ? writer + "-" + next : next);
                    }
                    write.write(row(type, values));
                }
                commit.commit(c, write.prepareCommit(false, c));
                System.out.println(table.latestSnapshotId().orElse(0L));
                System.out.flush();
                long left = intervalMs - (System.nanoTime() - began) / 1_000_000;
                if (left > 0 && c + 1 < n) {
                    Thread.sleep(left);
                }
            }
        }
    }
}

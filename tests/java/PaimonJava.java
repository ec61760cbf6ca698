// Java Paimon (0.9, the core inside pypaimon 0.2.0's sdist) against the server's tables: the
// tests' interop harness. A single file run by Java's source launcher (no build step):
//
//   java -cp paimon-python-java-bridge-0.9.0.jar:pyspark/jars/* tests/java/PaimonJava.java CMD WH TABLE ARGS
//   java -cp ... tests/java/PaimonJava.java serve
//
// `serve` keeps one JVM for many commands (what the tests use: a JVM's start and this file's
// compilation cost seconds): each line on stdin is a request {"args": [CMD, WH, TABLE, ...],
// "stdin": "..."} (with "background": ID it runs on a thread of its own, and ["join", ID] waits
// for it), answered by one line on stdout, {"out": "..."} or {"error": "..."}, in order.
//
// Commands (WH a warehouse directory, TABLE db.name):
//   create WH TABLE SPEC      SPEC is JSON: {"fields": [["id", "bigint!"], ["name", "string"]],
//                             "primaryKeys": [...], "partitionKeys": [...], "options": {...}}
//                             types: tinyint smallint int bigint float double boolean string; ! is NOT NULL
//   read WH TABLE [SNAPSHOT]  the table's rows (at SNAPSHOT) as JSON lines
//   latest WH TABLE           the latest snapshot id (0 when none)
//   write WH TABLE            JSON lines on stdin (an optional "_kind": +I -U +U -D) as one commit
//                             of Java's batch writer (which compacts when its trigger is reached,
//                             waiting for it); prints the snapshot id
//   commits WH TABLE N ROWS WRITER START INTERVAL_MS MODE
//                             N commits of ROWS generated rows each (ids START, START+1, ...; string
//                             columns WRITER-id, numbers id), one every INTERVAL_MS, by Java's
//                             streaming writer; prints a JSON line per commit: {"snapshot": the
//                             latest id after it, "compacted": [files its compaction replaced]}.
//                             MODE write-only: no compaction of its own (the server compacts);
//                             compact: Java's normal writer, compacting as its options say
//                             (asynchronously; the last commit waits for it), a table's
//                             write-only overridden as Flink's dedicated compaction job does
//   expire WH TABLE RETAIN    Java's snapshot expiry keeping the last RETAIN; prints how many went
//
// A dynamic-bucket primary-key table (bucket -1) is written as Flink and Spark write it: each
// row's bucket from Paimon's HashBucketAssigner over the table's hash index (Java's writer then
// writes the index). A one-shot failure prints one line "error: <exception>" on stderr, exit 1.

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.apache.paimon.CoreOptions;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.index.HashBucketAssigner;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.options.Options;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.table.BucketMode;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.CommitMessageImpl;
import org.apache.paimon.table.sink.RowPartitionKeyExtractor;
import org.apache.paimon.table.sink.StreamTableCommit;
import org.apache.paimon.table.sink.StreamTableWrite;
import org.apache.paimon.table.sink.StreamWriteBuilder;
import org.apache.paimon.table.sink.TableWrite;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypes;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;
import org.apache.paimon.utils.JsonSerdeUtil;

public class PaimonJava {

    public static void main(String[] args) {
        if (args.length == 1 && args[0].equals("serve")) {
            serve();
            return;
        }
        try {
            run(args, System.in, System.out);
            System.out.flush();
            System.exit(0);
        } catch (Throwable t) {
            System.err.println("error: " + describe(t));
            System.exit(1);
        }
    }

    static String describe(Throwable t) {
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        return t + (root != t ? " (caused by " + root + ")" : "");
    }

    // -- serve: one JVM, many commands --------------------------------------------------------

    @SuppressWarnings("unchecked")
    static void serve() {
        PrintStream answers = System.out;
        System.setOut(System.err); // anything a library prints stays off the answers
        ExecutorService background = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "background-command");
            t.setDaemon(true);
            return t;
        });
        Map<String, Future<String>> jobs = new ConcurrentHashMap<>();
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                Map<String, Object> answer = new LinkedHashMap<>();
                try {
                    Map<String, Object> request = JsonSerdeUtil.fromJson(line, Map.class);
                    String[] args = ((List<Object>) request.get("args")).stream().map(String::valueOf)
                            .toArray(String[]::new);
                    String stdin = (String) request.getOrDefault("stdin", "");
                    Object job = request.get("background");
                    if (args[0].equals("join")) {
                        Future<String> f = jobs.remove(args[1]);
                        if (f == null) {
                            throw new IllegalArgumentException("no background command " + args[1]);
                        }
                        try {
                            answer.put("out", f.get());
                        } catch (java.util.concurrent.ExecutionException e) {
                            throw e.getCause();
                        }
                    } else if (job != null) {
                        jobs.put(job.toString(), background.submit(() -> captured(args, stdin)));
                        answer.put("out", "");
                    } else {
                        answer.put("out", captured(args, stdin));
                    }
                } catch (Throwable t) {
                    answer.put("error", describe(t));
                }
                answers.println(JsonSerdeUtil.toFlatJson(answer));
                answers.flush();
            }
        } catch (Exception e) {
            System.err.println("error: " + describe(e));
        }
        System.exit(0);
    }

    static String captured(String[] args, String stdin) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8)) {
            run(args, new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)), out);
        }
        return bytes.toString(StandardCharsets.UTF_8);
    }

    // -- the commands ---------------------------------------------------------------------

    static void run(String[] args, InputStream stdin, PrintStream out) throws Exception {
        if (args.length < 3) {
            throw new IllegalArgumentException("usage: PaimonJava COMMAND WAREHOUSE TABLE [ARGS] | serve");
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
                    read(catalog.getTable(id), args.length > 3 ? Long.parseLong(args[3]) : null, out);
                    break;
                case "latest":
                    out.println(catalog.getTable(id).latestSnapshotId().orElse(0L));
                    break;
                case "write":
                    write(catalog.getTable(id), stdin, out);
                    break;
                case "commits":
                    commits(catalog.getTable(id), Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5],
                            Long.parseLong(args[6]), Long.parseLong(args[7]), args[8], out);
                    break;
                case "expire":
                    int retain = Integer.parseInt(args[3]);
                    int expired = catalog.getTable(id).newExpireSnapshots().config(ExpireConfig.builder()
                            .snapshotRetainMax(retain).snapshotRetainMin(Math.min(retain, 1))
                            .snapshotTimeRetain(Duration.ZERO).snapshotMaxDeletes(Integer.MAX_VALUE).build())
                            .expire();
                    out.println(expired);
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

    static void read(Table table, Long snapshot, PrintStream out) throws Exception {
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
        StringBuilder text = new StringBuilder();
        try (RecordReader<InternalRow> reader = rb.newRead().createReader(rb.newScan().plan())) {
            reader.forEachRemaining(row -> {
                Map<String, Object> m = new LinkedHashMap<>();
                for (int i = 0; i < getters.length; i++) {
                    m.put(fields.get(i).name(), json(getters[i].getFieldOrNull(row)));
                }
                text.append(JsonSerdeUtil.toFlatJson(m)).append('\n');
            });
        }
        out.print(text);
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

    /** Writes rows into their buckets: a dynamic-bucket table's by Paimon's HashBucketAssigner. */
    static final class Bucketing {
        final HashBucketAssigner assigner;
        final RowPartitionKeyExtractor extractor;

        Bucketing(Table table) {
            FileStoreTable t = (FileStoreTable) table;
            if (t.bucketMode() == BucketMode.HASH_DYNAMIC) {
                extractor = new RowPartitionKeyExtractor(t.schema());
                assigner = new HashBucketAssigner(t.snapshotManager(), UUID.randomUUID().toString(),
                        t.store().newIndexFileHandler(), 1, 1, 0,
                        CoreOptions.fromMap(t.options()).dynamicBucketTargetRowNum());
            } else {
                extractor = null;
                assigner = null;
            }
        }

        void write(TableWrite write, InternalRow row) throws Exception {
            if (assigner == null) {
                write.write(row);
            } else {
                write.write(row, assigner.assign(extractor.partition(row), extractor.trimmedPrimaryKey(row).hashCode()));
            }
        }

        void prepared(long commitIdentifier) {
            if (assigner != null) {
                assigner.prepareCommit(commitIdentifier);
            }
        }
    }

    @SuppressWarnings("unchecked")
    static void write(Table table, InputStream stdin, PrintStream out) throws Exception {
        List<GenericRow> rows = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(stdin, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (!line.isBlank()) {
                rows.add(row(table.rowType(), JsonSerdeUtil.fromJson(line, Map.class)));
            }
        }
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        Bucketing bucketing = new Bucketing(table);
        try (BatchTableWrite write = builder.newWrite(); BatchTableCommit commit = builder.newCommit()) {
            for (GenericRow r : rows) {
                bucketing.write(write, r);
            }
            List<CommitMessage> messages = write.prepareCommit();
            bucketing.prepared(BatchWriteBuilder.COMMIT_IDENTIFIER);
            commit.commit(messages);
        }
        out.println(table.latestSnapshotId().orElse(0L));
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

    static void commits(Table table, int n, int rowsPer, String writer, long start, long intervalMs, String mode,
                        PrintStream out) throws Exception {
        if (!mode.equals("write-only") && !mode.equals("compact")) {
            throw new IllegalArgumentException("unknown mode " + mode + " (write-only or compact)");
        }
        // compact overrides a table's write-only, as Flink's dedicated compaction job does
        table = table.copy(Collections.singletonMap("write-only", String.valueOf(mode.equals("write-only"))));
        RowType type = table.rowType();
        String kindField = table.options().get("rowkind.field");
        StreamWriteBuilder builder = table.newStreamWriteBuilder();
        Bucketing bucketing = new Bucketing(table);
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
                    bucketing.write(write, row(type, values));
                }
                List<CommitMessage> messages = write.prepareCommit(c + 1 == n, c);
                bucketing.prepared(c);
                List<String> compacted = new ArrayList<>();
                for (CommitMessage m : messages) {
                    for (DataFileMeta f : ((CommitMessageImpl) m).compactIncrement().compactBefore()) {
                        compacted.add(f.fileName());
                    }
                }
                commit.commit(c, messages);
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("snapshot", table.latestSnapshotId().orElse(0L));
                line.put("compacted", compacted);
                out.println(JsonSerdeUtil.toFlatJson(line));
                out.flush();
                long left = intervalMs - (System.nanoTime() - began) / 1_000_000;
                if (left > 0 && c + 1 < n) {
                    Thread.sleep(left);
                }
            }
        }
    }
}

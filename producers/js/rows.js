/** Deterministic demo rows: every value is a function of the row's global index (see README). */

import {
  Bool, DateDay, Decimal, Field, Float32, Float64, Int32, Int64, List, RecordBatch, Schema,
  Struct, TimestampMicrosecond, Utf8, makeBuilder, makeData,
} from 'apache-arrow';

const TS0 = 1_700_000_000_000_000n;
const BIG0 = -(1n << 62n);

// The registered table, as `flight_cli register --schema` spells it:
// id:int64!,small:int32,big:int64,ratio:double,f32:float,name:string,flag:bool,
// ts:timestamp[us],day:date32,price:decimal(12,2),tags:list<int32>
export function demoSchema({ wrongSchema = false } = {}) {
  return new Schema([
    // --wrong-schema narrows `id` so the server has a named difference to report.
    new Field('id', wrongSchema ? new Int32() : new Int64(), false),
    new Field('small', new Int32(), true),
    new Field('big', new Int64(), true),
    new Field('ratio', new Float64(), true),
    new Field('f32', new Float32(), true),
    new Field('name', new Utf8(), true),
    new Field('flag', new Bool(), true),
    new Field('ts', new TimestampMicrosecond(), true),
    new Field('day', new DateDay(), true),
    new Field('price', new Decimal(2, 12, 128), true),
    new Field('tags', new List(new Field('item', new Int32(), true)), true),
  ]);
}

// One row as plain values (null for a null); BigInt where the value may pass 2^53.
export function row(i) {
  const n = BigInt(i);
  const tags = [];
  for (let k = 0; k < i % 4; k++) tags.push((i + k) % 6 === 5 ? null : i * 10 + k);
  return {
    id: n,
    small: i % 11 === 3 ? null : ((i * 7919) % 65536) - 32768,
    big: n * 2654435761n + BIG0,
    ratio: i % 13 === 5 ? null : i / 8 - 100,
    f32: (i % 1000) * 0.5 - 250,
    name: i % 7 === 6 ? null : i % 19 === 4 ? '' : i % 5 === 0 ? `zürich-${i}` : `row-${i}`,
    flag: i % 17 === 2 ? null : i % 3 === 0,
    ts: i % 23 === 7 ? null : TS0 + n * 1_000_003n,
    day: 19000 + (i % 1000),
    price: i % 29 === 11 ? null : n * 137n - 5000n, // unscaled: hundredths
    tags: i % 9 === 8 ? null : tags,
  };
}

function fixedWidth(type, values, Typed, width = 1, put = (out, j, v) => { out[j] = v; }) {
  const data = new Typed(values.length * width);
  const bitmap = new Uint8Array(Math.ceil(values.length / 8));
  let nulls = 0;
  values.forEach((v, j) => {
    if (v === null) { nulls++; return; }
    bitmap[j >> 3] |= 1 << (j & 7);
    put(data, j, v);
  });
  return makeData({ type, length: values.length, nullCount: nulls, nullBitmap: nulls ? bitmap : null, data });
}

function built(type, values) {
  const builder = makeBuilder({ type, nullValues: [null] });
  for (const v of values) builder.append(v);
  return builder.finish().flush();
}

// Decimal128 is two little-endian 64-bit words of two's complement per value.
function putDecimal(out, j, v) {
  out[2 * j] = BigInt.asIntN(64, v);
  out[2 * j + 1] = v < 0n ? -1n : 0n;
}

/** Rows [first, first + count) as one RecordBatch of `schema`. */
export function makeBatch(schema, first, count) {
  const rows = Array.from({ length: count }, (_, r) => row(first + r));
  const col = (name) => rows.map((x) => x[name]);
  const children = schema.fields.map((field) => {
    const values = col(field.name);
    switch (field.name) {
      case 'id':
        return field.type instanceof Int32
          ? fixedWidth(field.type, values.map(Number), Int32Array)
          : fixedWidth(field.type, values, BigInt64Array);
      case 'big': case 'ts': return fixedWidth(field.type, values, BigInt64Array);
      case 'small': case 'day': return fixedWidth(field.type, values, Int32Array);
      case 'ratio': return fixedWidth(field.type, values, Float64Array);
      case 'f32': return fixedWidth(field.type, values, Float32Array);
      case 'price': return fixedWidth(field.type, values, BigInt64Array, 2, putDecimal);
      default: return built(field.type, values);
    }
  });
  const struct = makeData({ type: new Struct(schema.fields), length: count, nullCount: 0, children });
  return new RecordBatch(schema, struct);
}
